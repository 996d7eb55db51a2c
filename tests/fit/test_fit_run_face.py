"""What a user meets of a fit in the MLflow UI: the named runs table, the dataset it learned from, a
description that fits and names every plot, one value per coefficient, and a described model."""

from __future__ import annotations

import re

import pytest
from mlflow import MlflowClient

from mlflow_roofline.core.schema import MAX_NOTE_CHARS, TAG_NOTE
from mlflow_roofline.fit.pipeline import run_fit
from mlflow_roofline.fit.registration import MODEL_DESCRIPTION
from mlflow_roofline.fit.report.markdown import TABLE_ARTIFACT
from mlflow_roofline.fit.report.run_page import TRAIN_RUNS_DATASET
from mlflow_roofline.testing.synthetic import log_synthetic_runs
from mlflow_roofline.tracking.notes import CUT_LINE


def test_a_registered_fit_reads_like_the_product(tracking_uri: str, capfd: pytest.CaptureFixture[str]) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")
    logged = log_synthetic_runs(client, experiment_id, 12, seed=5)
    lines: list[str] = []
    outcome = run_fit(["roofline-bert"], model_name="energy-law", alias="champion", echo=lines.append)
    (fit,) = outcome.fits
    run = client.get_run(fit.run_id)
    assert run.info.run_name == "fit-roofline-bert"
    assert lines[-1].startswith("MLflow UI (Model training view): http://127.0.0.1:5000/#/experiments/")
    assert f"/#/experiments/{experiment_id}/runs?workflowType=machine_learning" in lines[-1]
    assert "already exists" not in capfd.readouterr().err  # a new store: nothing to say about an existing model

    (dataset,) = run.inputs.dataset_inputs  # the train runs it learned from
    assert dataset.dataset.name == f"{TRAIN_RUNS_DATASET} on {fit.hardware}"
    assert {t.key: t.value for t in dataset.tags}["mlflow.data.context"] == "training"
    assert '"num_rows": ' + str(len(logged.frame)) in dataset.dataset.profile
    assert "run_name" in dataset.dataset.schema and "energy_j" in dataset.dataset.schema

    table = client.load_table(experiment_id, TABLE_ARTIFACT, run_ids=[fit.run_id])
    names = {r.info.run_id: r.info.run_name for r in client.search_runs([experiment_id]) if r.info.run_name}
    assert list(table["run_name"]) == [names[i] for i in table["run_id"]]

    note = run.data.tags[TAG_NOTE]
    assert len(note) <= MAX_NOTE_CHARS and CUT_LINE.strip() not in note
    logged_plots = {a.path for a in client.list_artifacts(fit.run_id, "plots")}
    assert logged_plots and all(f"`{path}`" in note for path in logged_plots)
    law = fit.energy.forms[fit.energy.chosen].law
    if "log_C" in law.terms:  # the registered form's alpha_C, the same in the formula, the table and the comparison
        shown = f"{law.coefficient('log_C'):.3g}"
        assert note.count(f"| α<sub>C</sub> | {shown} |") == 2 and f"C<sup>{shown}</sup>" in note
        assert len(set(re.findall(r"\| α<sub>C</sub> \| (\S+) \|", note))) == 1

    model = client.get_registered_model("energy-law")
    assert model.description == MODEL_DESCRIPTION
