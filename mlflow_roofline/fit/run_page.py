"""What the MLflow UI shows of a fit run: its plots, its measured-vs-predicted table, its description.

The plots are logged with :func:`mlflow.log_figure` (PNG images in the run's artifact
view), the per-run data with :func:`mlflow.log_table` (a JSON table the artifact view
shows and filters) and the Markdown of :mod:`mlflow_roofline.fit.description` as the
run's description. Logs into the active (fluent) run the fit job opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mlflow
import numpy as np
import pandas as pd

from mlflow_roofline.core.schema import M_ALPHA_ETA, M_ENERGY_J
from mlflow_roofline.fit import forms, plots
from mlflow_roofline.fit.description import TABLE_ARTIFACT, fit_markdown
from mlflow_roofline.fit.speedup_fit import laws_of
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.notes import set_description

if TYPE_CHECKING:
    from mlflow_roofline.fit.hardware import HardwareFit

TABLE_COLUMNS = (
    "run_id",
    "strategy",
    "num_devices",
    "num_layers",
    "hidden_size",
    "seq_len",
    "batch_size",
    "num_steps",
    "eta",
    "eta_source",
)


def fitted_logs(fit: HardwareFit) -> dict[str, np.ndarray]:
    """Fitted log energy per law shown: the baseline, the paper's law and the registered form."""
    fitted = {
        "baseline": fit.energy.forms[forms.BASELINE].fitted_log,
        "paper (efficiency-aware)": fit.energy.forms[forms.PAPER].fitted_log,
    }
    if fit.energy.chosen not in (forms.BASELINE, forms.PAPER):
        fitted[f"{fit.energy.chosen} (registered)"] = fit.energy.forms[fit.energy.chosen].fitted_log
    return fitted


def measured_vs_predicted_table(fit: HardwareFit) -> pd.DataFrame:
    """One row per run: its configuration, measured ``energy_j`` and each law's prediction (joules)."""
    table = fit.frame[[c for c in TABLE_COLUMNS if c in fit.frame]].reset_index(drop=True)
    table[M_ENERGY_J] = fit.frame[M_ENERGY_J].to_numpy(dtype=float)
    chosen = fit.energy.forms[fit.energy.chosen].fitted_log
    for name, key in ((forms.BASELINE, "baseline"), (forms.PAPER, "paper")):
        table[f"predicted_j_{key}"] = np.exp(fit.energy.forms[name].fitted_log)
    table["predicted_j_registered"] = np.exp(chosen)
    table["error_pct_registered"] = 100.0 * (table["predicted_j_registered"] / table[M_ENERGY_J] - 1.0)
    return table


def log_figures(fit: HardwareFit) -> list[str]:
    """Log the diagnostic plots (and the extrapolation check's) with :func:`mlflow.log_figure`; their paths."""
    fitted = fitted_logs(fit)
    laws = laws_of(fit.speedup)
    figures = {
        "plots/measured_vs_predicted.png": plots.measured_vs_predicted(fit.data, fitted),
        "plots/residuals.png": plots.residuals(fit.data, fitted),
        "plots/speedup_vs_n.png": plots.speedup_vs_n(fit.frame, laws),
        "plots/energy_vs_n.png": plots.energy_vs_n(fit.frame, laws, fit.metrics()[M_ALPHA_ETA], fit.psi),
    }
    check = fit.energy.extrapolation
    if check is not None:  # the held-out large models of the size-extrapolation check
        shown = dict.fromkeys([forms.PAPER, *forms.ROOFLINE_FORMS, fit.energy.chosen])
        predicted = {f"{n}: extrap_mape {fit.energy.forms[n].extrap_mape:.1f}%": check.predicted[n] for n in shown}
        figures["plots/extrapolation.png"] = plots.measured_vs_predicted(fit.data[check.held_out], predicted)
    for path, figure in figures.items():
        mlflow.log_figure(figure, path)
    return list(figures)


def log_run_page(fit: HardwareFit, n_found: int) -> None:
    """Plots, the measured-vs-predicted table and the Markdown description, into the active run."""
    run = mlflow.active_run()
    if run is None:
        raise RuntimeError("log_run_page needs the fit run to be the active MLflow run")
    log_figures(fit)
    mlflow.log_table(measured_vs_predicted_table(fit), TABLE_ARTIFACT)
    client = mlflow.MlflowClient()
    metrics = {**fit.metrics(), **client.get_run(run.info.run_id).data.metrics}
    set_description(TrackingClient(), run.info.run_id, fit_markdown(fit, metrics, n_found))
