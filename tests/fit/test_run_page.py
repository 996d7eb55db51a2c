"""What the MLflow UI shows of a fit run: figures, the measured-vs-predicted table, the Markdown description."""

from __future__ import annotations

import math
import re

import mlflow
import numpy as np
import pytest
from mlflow import MlflowClient
from PIL import Image

from mlflow_roofline.core.schema import TAG_NOTE
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.fit.pipeline import run_fit
from mlflow_roofline.fit.report.markdown import PAPER_FIGURES, PLOTS, TABLE_ARTIFACT, fit_markdown
from mlflow_roofline.testing.synthetic import generate_synthetic_runs, log_synthetic_runs


def test_fit_run_logs_figures_a_table_and_a_markdown_description(tracking_uri: str) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")
    logged = log_synthetic_runs(client, experiment_id, 12, seed=5)
    outcome = run_fit(["roofline-bert"], model_name="", alias="", register=False, echo=lambda _: None)
    (fit,) = outcome.fits
    run = client.get_run(fit.run_id)
    metrics = run.data.metrics

    for path in PLOTS:  # real PNG images, logged as figures
        local = mlflow.artifacts.download_artifacts(run_id=fit.run_id, artifact_path=path)
        with Image.open(local) as image:
            assert image.format == "PNG" and image.size[0] > 300
    assert "fit_report.txt" in {f.path for f in client.list_artifacts(fit.run_id)}

    table = client.load_table(experiment_id, TABLE_ARTIFACT, run_ids=[fit.run_id])  # as the UI finds it
    assert len(table) == len(logged.frame) == metrics["n_runs"]
    chosen = fit.energy.forms[fit.energy.chosen]
    by_run = table.set_index("run_id").loc[fit.frame["run_id"]]
    np.testing.assert_allclose(by_run["predicted_j_registered"], np.exp(chosen.fitted_log), rtol=1e-9)
    np.testing.assert_allclose(by_run["energy_j"], fit.frame["energy_j"], rtol=1e-9)

    note = run.data.tags[TAG_NOTE]
    assert note.startswith(f"## Energy law for `{fit.hardware}`") and "```" not in note  # Markdown, not a text dump
    # the registered law written out: one form, or each of the forms that tie (averaged), with its coefficients
    members = fit.energy.registered_forms
    heads = ["**E = κ"] if members == [fit.energy.chosen] else [f"**E<sub>{name}</sub> = κ" for name in members]
    lines = note.splitlines()
    for name, head in zip(members, heads):
        law = fit.energy.forms[name].law
        at = next(i for i, line in enumerate(lines) if line.startswith(head))
        exponents = {symbol: float(x) for symbol, x in re.findall(r"(\w+)<sup>(-?[\d.e+-]+)</sup>", lines[at])}
        for symbol, term in (("C", "log_C"), ("M", "log_M")):
            assert exponents[symbol] == pytest.approx(float(f"{law.coefficient(term):.3g}")), lines[at]
        row = next(line for line in lines[at:] if line.startswith("| α<sub>η</sub> |"))
        low, high = (float(x) for x in re.search(r"\[(\S+), (\S+)\]", row).groups())
        assert low < law.coefficient("log_eta") < high
    compared = next(line for line in note.splitlines() if line.startswith("| adjusted R², efficiency-aware"))
    assert f"| {metrics['adj_r2']:.3f} | {PAPER_FIGURES['adj_r2']:.3f} |" in compared
    assert f"`{fit.energy.chosen}` (registered)" in note and f"{chosen.cv_mape:.3g} ±" in note
    assert all(f"`{path}`" in note for path in PLOTS)


def test_extrapolation_errors_appear_when_logged() -> None:
    _, frame = generate_synthetic_runs(10, seed=3)
    fit = fit_hardware(frame, "synthetic-gpu")
    metrics = fit.metrics()
    # The fit's own size-extrapolation check shows when it ran; more extrap_mape metrics are listed too.
    assert ("Extrapolation" in fit_markdown(fit, metrics, len(frame))) == any(
        k.startswith("extrap_mape") for k in metrics
    )
    text = fit_markdown(fit, {**metrics, "extrap_mape_depth": 7.25, "extrap_mape_width": math.pi}, len(frame))
    assert "| `extrap_mape_depth` | 7.25 |" in text and "| `extrap_mape_width` | 3.14 |" in text


def test_a_figure_that_fails_in_its_thread_fails_the_fit_run(tracking_uri: str, monkeypatch) -> None:
    """The plots are drawn beside the rest of the logging; their failure is still the fit's, never lost."""
    from matplotlib.figure import Figure

    from mlflow_roofline.core.errors import RooflineError

    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")  # a small store: the fit only has to reach its plots
    log_synthetic_runs(client, experiment_id, 3, seed=6, strategies=("single", "ddp"), device_counts=(2,))

    def broken_savefig(self, *args, **kwargs):
        raise OSError("disk full while writing a plot")

    monkeypatch.setattr(Figure, "savefig", broken_savefig)
    with pytest.raises(RooflineError, match="disk full while writing a plot"):
        run_fit(["roofline-bert"], model_name="", alias="", register=False, echo=lambda _: None)
    (run,) = client.search_runs(
        [client.get_experiment_by_name("roofline-bert").experiment_id], "tags.`roofline.run_type` = 'fit'"
    )
    assert run.info.status == "FAILED"
