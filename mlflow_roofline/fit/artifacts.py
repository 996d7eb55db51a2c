"""The files of a fit run: summaries, coefficient table, law JSON, speedup laws, report, plots."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from mlflow_roofline.fit import plots
from mlflow_roofline.fit.forms import BASELINE, PAPER
from mlflow_roofline.fit.ols import summaries
from mlflow_roofline.fit.roofline_eff import ROOFLINE_EFF
from mlflow_roofline.fit.run_data import RunData
from mlflow_roofline.fit.speedup_fit import laws_of

if TYPE_CHECKING:
    from mlflow_roofline.fit.hardware import HardwareFit


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


def _write_plots(fit: HardwareFit, plot_dir: Path) -> None:
    """The diagnostic plots of :mod:`fit.plots` into ``plot_dir``."""
    plot_dir.mkdir()
    fitted = {
        "baseline": fit.energy.forms[BASELINE].fitted_log,
        "paper (efficiency-aware)": fit.energy.forms[PAPER].fitted_log,
    }
    if fit.energy.chosen not in (BASELINE, PAPER):
        fitted[f"{fit.energy.chosen} (registered)"] = fit.energy.forms[fit.energy.chosen].fitted_log
    plots.measured_vs_predicted(fit.data, fitted, plot_dir / "measured_vs_predicted.png")
    plots.residuals(fit.data, fitted, plot_dir / "residuals.png")
    laws = laws_of(fit.speedup)
    plots.speedup_vs_n(fit.frame, laws, plot_dir / "speedup_vs_n.png")
    plots.energy_vs_n(fit.frame, laws, fit.metrics()["alpha_eta"], fit.psi, plot_dir / "energy_vs_n.png")
    check = fit.energy.extrapolation
    if check is not None:
        shown = dict.fromkeys([PAPER, ROOFLINE_EFF, fit.energy.chosen])
        predicted = {f"{n}: extrap_mape {fit.energy.forms[n].extrap_mape:.1f}%": check.predicted[n] for n in shown}
        plots.measured_vs_predicted(fit.data[check.held_out], predicted, plot_dir / "extrapolation.png")


def write_artifacts(fit: HardwareFit, directory: Path, run_data: RunData) -> None:
    """Every file of one hardware's fit run into ``directory`` (plots under ``plots/``)."""
    _write_tables(fit, directory, run_data)
    _write_plots(fit, directory / "plots")
