"""``fit --if-drifted``: the champion scored by the ``roofline`` evaluator on the train runs measured
since it was registered; a refit only on ``refit`` (or with nothing registered)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from click.testing import CliRunner
from law_factory import make_law, synthetic_frame
from support.module_store import module_store

from mlflow_roofline.cli import cli
from mlflow_roofline.fit.drift_check import check_drift
from mlflow_roofline.serve.pyfunc_model import log_law_model
from mlflow_roofline.testing.synthetic import log_runs
from mlflow_roofline.tracking.client import TrackingClient

MODEL = "roofline-energy-drift"
URI = f"models:/{MODEL}@champion"
_, _FRAME = synthetic_frame(seed=0)
RUNS = _FRAME[_FRAME["workload_index"] < 6]  # whole workloads: every parallel run has its single run
N = len(RUNS)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> Iterator[TrackingClient]:
    """Runs of experiment ``before`` logged, then the law registered @champion, then the experiments
    ``same`` (the runs of 6 workloads as the law describes them) and ``dearer`` (the same runs costing
    30 % more)."""
    runs = RUNS
    with module_store(tmp_path_factory.mktemp("drift-store"), store_template):
        client = mlflow.MlflowClient()
        log_runs(client, client.create_experiment("before"), runs.head(4))
        with mlflow.start_run():
            info = log_law_model(make_law())
        version = mlflow.register_model(info.model_uri, MODEL)
        client.set_registered_model_alias(MODEL, "champion", version.version)
        log_runs(client, client.create_experiment("same"), runs)
        log_runs(client, client.create_experiment("dearer"), runs.assign(energy_j=runs["energy_j"] * 1.3))
        yield TrackingClient()


def test_runs_the_champion_describes_need_no_refit(store: TrackingClient) -> None:
    check = check_drift(store, ["same"], MODEL, "champion")
    assert not check.refit
    assert check.reason.startswith(f"version 1 of {URI} on {N} new runs: MAPE ")
    assert check.reason.endswith(f"ok (within the thresholds on {N} runs); not refitting")
    run = store.get_run(str(check.run_id))
    assert run.info.status == "FINISHED" and run.data.tags["roofline.run_type"] == "drift_check"
    assert run.data.metrics["drift_refit"] == 0.0


def test_runs_that_cost_30_percent_more_need_a_refit(store: TrackingClient) -> None:
    check = check_drift(store, ["dearer"], MODEL, "champion")
    assert check.refit and ": refit (" in check.reason
    bias = float(re.search(r"bias ([-+0-9.]+) %", check.reason).group(1))  # type: ignore[union-attr]
    assert bias == pytest.approx(100 * (1 / 1.3 - 1), abs=1.0)  # the law now predicts ~23 % low


def test_nothing_new_or_nothing_registered(store: TrackingClient) -> None:
    old = check_drift(store, ["before"], MODEL, "champion")
    assert (old.refit, old.run_id) == (False, None)
    assert old.reason == f"no usable train run since version 1 of {URI}: not refitting"
    none = check_drift(store, ["same"], MODEL, "challenger")
    assert none.refit and none.reason == f"nothing is registered as models:/{MODEL}@challenger: fitting"


def test_the_fit_command_stops_when_the_check_says_not_to_refit(store: TrackingClient) -> None:
    result = CliRunner().invoke(cli, ["fit", "--if-drifted", "--experiment", "before", "--model-name", MODEL])
    assert result.exit_code == 0, result.output
    assert result.output == f"drift check: no usable train run since version 1 of {URI}: not refitting\n"
    experiment_id = store.experiment_by_name("before").experiment_id  # type: ignore[union-attr]
    assert store.search_runs([experiment_id], "tags.`roofline.run_type` = 'fit'") == []
