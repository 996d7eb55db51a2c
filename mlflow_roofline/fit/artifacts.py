"""The files of a fit run: summaries, coefficient table, law JSON, speedup laws, report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from mlflow_roofline.fit.ols import summaries
from mlflow_roofline.fit.run_data import RunData

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


def write_artifacts(fit: HardwareFit, directory: Path, run_data: RunData) -> None:
    """Every file of one hardware's fit run into ``directory`` (the plots are logged as figures:
    :mod:`mlflow_roofline.fit.run_page`)."""
    _write_tables(fit, directory, run_data)
