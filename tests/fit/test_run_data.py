"""Pulling train runs from a real SQLite tracking store: filters, paging and drop reasons."""

from __future__ import annotations

import numpy as np
import pytest
from mlflow import MlflowClient

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.core.schema import TAG_ENERGY_ERROR, TAG_RUN_TYPE
from mlflow_roofline.fit.runs import run_data
from mlflow_roofline.testing.synthetic import generate_synthetic_runs, log_runs
from mlflow_roofline.tracking.client import TrackingClient


@pytest.fixture
def client(tracking_uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri)


def test_pull_keeps_finished_train_runs_and_says_why_others_go(client: MlflowClient, monkeypatch) -> None:
    experiment_id = client.create_experiment("roofline-bert")
    _, frame = generate_synthetic_runs(3, seed=0, strategies=("single", "ddp"), device_counts=(2,))
    good = frame.iloc[:5].copy()
    nan_energy = frame.iloc[[5]].copy()
    nan_energy["energy_j"] = np.nan
    zero_energy = frame.iloc[[6]].copy()
    zero_energy["energy_j"] = 0.0
    ids = log_runs(client, experiment_id, good)
    log_runs(client, experiment_id, nan_energy)
    log_runs(client, experiment_id, zero_energy)
    failed_meter = log_runs(client, experiment_id, frame.iloc[[7]].drop(columns=["energy_j", "avg_power_w"]))[0]
    client.set_tag(failed_meter, TAG_ENERGY_ERROR, "RAPL not readable")
    log_runs(client, experiment_id, frame.iloc[[8]], status="FAILED")
    fit_run = client.create_run(experiment_id, tags={TAG_RUN_TYPE: "fit"})
    client.set_terminated(fit_run.info.run_id)
    no_param = client.create_run(experiment_id, tags={TAG_RUN_TYPE: "train"})
    client.set_terminated(no_param.info.run_id)

    monkeypatch.setattr(run_data, "PAGE_SIZE", 2)  # force several pages
    data = run_data.load_train_runs(TrackingClient(client.tracking_uri), ["roofline-bert"])
    assert sorted(data.frame["run_id"]) == sorted(ids)
    assert data.n_found == 9  # FAILED and fit runs are filtered in the store
    assert data.dropped == {
        "with NaN or non-positive energy_j": 2,
        "without metric energy_j (meter failed)": 1,
        "without tag roofline.hardware": 1,
    }
    assert data.frame["num_layers"].dtype == np.int64
    assert data.frame["energy_j"].dtype == float
    assert "5 usable; dropped 4" in data.summary()


def test_hardware_filter_experiment_ids_and_one_line_errors(client: MlflowClient) -> None:
    experiment_id = client.create_experiment("roofline-bert")
    _, a = generate_synthetic_runs(1, seed=0, strategies=("single",), hardware="gpu 'a'")
    _, b = generate_synthetic_runs(1, seed=1, strategies=("single",), hardware="gpu-b")
    ids_a = log_runs(client, experiment_id, a)
    ids_b = log_runs(client, experiment_id, b)
    data = run_data.load_train_runs(TrackingClient(client.tracking_uri), ["roofline-bert"], hardware="gpu 'a'")
    assert sorted(data.frame["run_id"]) == sorted(ids_a)
    by_id = run_data.load_train_runs(TrackingClient(client.tracking_uri), [experiment_id])
    assert sorted(by_id.frame["run_id"]) == sorted(ids_a + ids_b)
    with pytest.raises(RooflineError, match="no experiment named 'nope'"):
        run_data.load_train_runs(TrackingClient(client.tracking_uri), ["nope"])
    client.create_experiment("empty")
    with pytest.raises(RooflineError, match="no FINISHED train runs"):
        run_data.load_train_runs(TrackingClient(client.tracking_uri), ["empty"])
    with pytest.raises(RooflineError, match="on hardware 'gpu-c'"):
        run_data.load_train_runs(TrackingClient(client.tracking_uri), ["roofline-bert"], hardware="gpu-c")


def test_runs_the_law_cannot_use_are_dropped_but_not_those_that_break_only_a_launcher_rule(
    client: MlflowClient,
) -> None:
    """The fit checks what the law needs, not what this project's launcher can start."""
    experiment_id = client.create_experiment("roofline-bert")
    _, frame = generate_synthetic_runs(2, seed=1, strategies=("single", "ddp", "tp"), device_counts=(2,))
    good = frame[frame["strategy"] == "single"].iloc[:2].copy()
    unknown = frame.iloc[[0]].assign(strategy="zero3")
    single_on_two = frame[frame["strategy"] == "single"].iloc[[0]].assign(num_devices=2)
    lone_ddp = frame[frame["strategy"] == "ddp"].iloc[[0]].assign(num_devices=1)  # DDP wrapper on one device
    uneven_tp = frame[frame["strategy"] == "tp"].iloc[[0]].assign(num_heads=1)  # one head cannot split over N=2
    ids = log_runs(client, experiment_id, good)
    log_runs(client, experiment_id, unknown)
    log_runs(client, experiment_id, single_on_two)
    kept = log_runs(client, experiment_id, lone_ddp) + log_runs(client, experiment_id, uneven_tp)

    data = run_data.load_train_runs(TrackingClient(client.tracking_uri), ["roofline-bert"])
    assert sorted(data.frame["run_id"]) == sorted(ids + kept)
    assert data.dropped == {"with invalid param strategy": 1, "with invalid param num_devices": 1}
    assert data.beyond_launcher == {"num_devices": 1, "num_heads": 1}
    assert "kept 2 that this launcher could not start (1 on num_devices, 1 on num_heads)" in data.summary()


def test_fitting_a_deleted_experiment_says_it_is_deleted(client: MlflowClient) -> None:
    experiment_id = client.create_experiment("old-sweep")
    log_runs(client, experiment_id, generate_synthetic_runs(1, seed=0, strategies=("single",))[1])
    client.delete_experiment(experiment_id)
    for name in ("old-sweep", experiment_id):  # by name and by id
        with pytest.raises(RooflineError) as caught:
            run_data.load_train_runs(TrackingClient(client.tracking_uri), [name])
        assert str(caught.value).startswith(f"experiment: {name!r} is deleted (id {experiment_id}); restore it")
