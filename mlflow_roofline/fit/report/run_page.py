"""What a fit run holds besides its params and metrics: its files, its plots, its table, its description.

The files (:func:`write_artifacts`): the summaries of every form, the coefficient table,
the additive roofline, the speedup laws, the law as JSON, the text report and the
dropped runs. The plots are logged as PNG images (the run's artifact view), drawn in a thread
beside the rest of the run's logging (:func:`figures_beside`), the per-run
data as a JSON table (``mlflow.log_table``'s format: the artifact view shows and filters
it) and the Markdown of :mod:`mlflow_roofline.fit.report.markdown` as the run's
description (:func:`log_run_page`), all into an explicit run through the
:class:`~mlflow_roofline.tracking.client.TrackingClient`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from mlflow_roofline.core.schema import M_ALPHA_ETA, M_ENERGY_J, M_TIME_S, PARAM_NAMES
from mlflow_roofline.fit.forms import catalog
from mlflow_roofline.fit.forms.ols import summaries
from mlflow_roofline.fit.hardware_fit import HardwareFit
from mlflow_roofline.fit.report import plots
from mlflow_roofline.fit.report.markdown import TABLE_ARTIFACT, fit_markdown
from mlflow_roofline.fit.runs.run_data import RunData
from mlflow_roofline.fit.speedup_fit import laws_of
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.notes import set_description

TRAIN_RUNS_DATASET = "train-runs"
"""The name of the fit run's dataset input (``train-runs on <hardware>``): the train runs it learned from."""
TABLE_COLUMNS = (
    "run_name",
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
    "baseline",
)


def fitted_logs(fit: HardwareFit) -> dict[str, np.ndarray]:
    """Fitted log energy per law shown: the baseline, the paper's law and the registered form."""
    fitted = {
        "baseline": fit.energy.forms[catalog.BASELINE].fitted_log,
        "paper (efficiency-aware)": fit.energy.forms[catalog.PAPER].fitted_log,
    }
    if fit.energy.chosen not in (catalog.BASELINE, catalog.PAPER):
        fitted[f"{fit.energy.chosen} (registered)"] = fit.energy.forms[fit.energy.chosen].fitted_log
    return fitted


def measured_vs_predicted_table(fit: HardwareFit) -> pd.DataFrame:
    """One row per run: its configuration, measured ``energy_j`` and each law's prediction (joules)."""
    table = fit.frame[[c for c in TABLE_COLUMNS if c in fit.frame]].reset_index(drop=True)
    table[M_ENERGY_J] = fit.frame[M_ENERGY_J].to_numpy(dtype=float)
    chosen = fit.energy.forms[fit.energy.chosen].fitted_log
    for name, key in ((catalog.BASELINE, "baseline"), (catalog.PAPER, "paper")):
        table[f"predicted_j_{key}"] = np.exp(fit.energy.forms[name].fitted_log)
    table["predicted_j_registered"] = np.exp(chosen)
    table["error_pct_registered"] = 100.0 * (table["predicted_j_registered"] / table[M_ENERGY_J] - 1.0)
    return table


def _figure_makers(fit: HardwareFit) -> dict[str, Callable[[], Figure]]:
    """Each diagnostic plot of the fit run (and the extrapolation check's), by artifact path, drawn on call."""
    fitted = fitted_logs(fit)
    laws = laws_of(fit.speedup)
    makers: dict[str, Callable[[], Figure]] = {
        "plots/measured_vs_predicted.png": lambda: plots.measured_vs_predicted(fit.data, fitted),
        "plots/residuals.png": lambda: plots.residuals(fit.data, fitted),
        "plots/speedup_vs_n.png": lambda: plots.speedup_vs_n(fit.frame, laws),
        "plots/energy_vs_n.png": lambda: plots.energy_vs_n(fit.frame, laws, fit.metrics()[M_ALPHA_ETA], fit.psi),
    }
    check = fit.energy.extrapolation
    if check is not None:  # the held-out large models of the size-extrapolation check
        roofline = [n for n in catalog.ROOFLINE_FORMS if n in fit.energy.forms]
        shown = dict.fromkeys([catalog.PAPER, *roofline, fit.energy.chosen])
        predicted = {f"{n}: extrap_mape {fit.energy.forms[n].extrap_mape:.1f}%": check.predicted[n] for n in shown}
        makers["plots/extrapolation.png"] = lambda: plots.measured_vs_predicted(fit.data[check.held_out], predicted)
    return makers


def plot_paths(fit: HardwareFit) -> list[str]:
    """The artifact paths of the fit run's plots (what :func:`log_figures` logs), without drawing them."""
    return list(_figure_makers(fit))


def log_figures(client: TrackingClient, run_id: str, fit: HardwareFit) -> list[str]:
    """Log the diagnostic plots (and the extrapolation check's) as PNG images of ``run_id``; their paths."""
    makers = _figure_makers(fit)
    for path, draw in makers.items():
        client.log_figure(run_id, draw(), path)
    return list(makers)


@contextlib.contextmanager
def figures_beside(client: TrackingClient, run_id: str, fit: HardwareFit) -> Iterator[None]:
    """Draw and log the plots of ``run_id`` (:func:`log_figures`) in a thread while the block logs the rest.

    The figures are matplotlib's CPU work and the block's logging mostly the store's writes, so
    they overlap. The block's exit waits for the figures; their failure is the block's.
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="fit-figures") as pool:
        drawn = pool.submit(log_figures, client, run_id, fit)
        try:
            yield
        finally:
            error = drawn.exception()  # waits; a failure of the block itself wins
        if error is not None:
            raise error


def train_runs_table(fit: HardwareFit) -> pd.DataFrame:
    """The train runs the fit learned from: name, id, experiment, params, measured energy (J) and time (s)."""
    columns = ["run_name", "run_id", "experiment_id", *PARAM_NAMES, M_ENERGY_J, M_TIME_S]
    return fit.frame[[c for c in columns if c in fit.frame]].reset_index(drop=True)


def log_run_page(
    client: TrackingClient, run_id: str, fit: HardwareFit, run_data: RunData, metrics: Mapping[str, float]
) -> None:
    """The files, the measured-vs-predicted table, the train runs as the run's dataset input and the
    Markdown description of the fit run ``run_id`` (its plots: :func:`figures_beside`); ``metrics``: what the
    run logs as metrics (the description quotes them)."""
    name = f"{TRAIN_RUNS_DATASET} on {fit.hardware}"
    client.log_dataset(run_id, train_runs_table(fit), name, context="training", targets=M_ENERGY_J)
    with tempfile.TemporaryDirectory() as tmp:
        write_artifacts(fit, Path(tmp), run_data)
        client.log_artifacts(run_id, tmp)
    client.log_table(run_id, measured_vs_predicted_table(fit), TABLE_ARTIFACT)
    set_description(client, run_id, fit_markdown(fit, metrics, run_data.n_found, plot_paths(fit)))


def _write_tables(fit: HardwareFit, directory: Path, run_data: RunData) -> None:
    """Summaries, coefficients, the additive roofline, speedup laws, law JSON, report, dropped runs."""
    (directory / "summaries").mkdir()
    fits = {**fit.energy.forms, "time": fit.energy.time}
    for name, text in summaries(fits).items():
        (directory / "summaries" / f"{name}.txt").write_text(f"formula: {fits[name].formula}\n\n{text}\n")
    table = pd.concat([f.coefficient_table() for f in fits.values()], ignore_index=True)
    table.to_csv(directory / "coefficients.csv", index=False)
    roofline = dataclasses.asdict(fit.energy.roofline)
    (directory / "additive_roofline.json").write_text(json.dumps(roofline, indent=2))
    (directory / "speedup_laws.json").write_text(
        json.dumps({s: {**f.law.to_dict(), "fixed": f.fixed} for s, f in fit.speedup.items()}, indent=2)
    )
    (directory / "fitted_law.json").write_text(fit.law.to_json())
    (directory / "fit_report.txt").write_text(run_data.summary() + "\n" + fit.report() + "\n")
    (directory / "dropped_runs.json").write_text(
        json.dumps({"pull": run_data.dropped, "hardware": fit.dropped, "n_found": run_data.n_found}, indent=2)
    )


def write_artifacts(fit: HardwareFit, directory: Path, run_data: RunData) -> None:
    """Every file of one hardware's fit run into ``directory`` (the plots are logged as figures)."""
    _write_tables(fit, directory, run_data)
