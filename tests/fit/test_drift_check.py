"""``fit --if-drifted``: the champion scored by the ``roofline`` evaluator on the train runs measured
since it was registered; a refit only on ``refit`` (or with nothing registered)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from click.testing import CliRunner
from law_factory import make_law, synthetic_frame
from support.cli_in_process import run_cli
from support.module_store import module_store

from mlflow_roofline.cli import cli
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.fit.drift_check import check_drift
from mlflow_roofline.law.fleet import FleetLaw, FleetRoute
from mlflow_roofline.serve.pyfunc_model import log_law_model
from mlflow_roofline.testing.synthetic import log_runs
from mlflow_roofline.tracking.client import TrackingClient

MODEL = "roofline-energy-drift"
URI = f"models:/{MODEL}@champion"
OTHER = "not-a-roofline-law"  # @trivial: a pyfunc answering energy_j alone; @fleet: a fleet law of two other GPUs
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
        _register_other_champions(client)
        log_runs(client, client.create_experiment("same"), runs)
        log_runs(client, client.create_experiment("dearer"), runs.assign(energy_j=runs["energy_j"] * 1.3))
        broken = runs.head(5).assign(energy_j=[-1.0, -1.0, -1.0, 1e308, 1e308])
        log_runs(client, client.create_experiment("broken"), broken)
        yield TrackingClient()


class EnergyOnly(mlflow.pyfunc.PythonModel):
    """A pyfunc that is no roofline law: an energy per row, no interval."""

    def predict(self, context, model_input, params=None):
        return pd.DataFrame({"energy_j": [1.0] * len(model_input)})


def _register_other_champions(client: mlflow.MlflowClient) -> None:
    law = make_law()
    route = FleetRoute("own", math.nan, math.nan)
    fleet = FleetLaw(
        hardware_laws={gpu: dataclasses.replace(law, hardware=gpu) for gpu in ("GPU A", "GPU B")},
        routes={"GPU A": route, "GPU B": route},
        unmeasured_refusal="no pooled law was fitted",
    )
    with mlflow.start_run():
        trivial = mlflow.pyfunc.log_model(name="trivial", python_model=EnergyOnly())
        fleet_info = log_law_model(fleet)
    for alias, info in (("trivial", trivial), ("fleet", fleet_info)):
        version = mlflow.register_model(info.model_uri, OTHER)
        client.set_registered_model_alias(OTHER, alias, version.version)


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
    assert (
        old.reason
        == f"no usable train run since version 1 of {URI}: 0 newer than it (4 older not judged): not refitting"
    )
    none = check_drift(store, ["same"], MODEL, "challenger")
    assert none.refit and none.reason == f"nothing is registered as models:/{MODEL}@challenger: fitting"


def test_the_fit_command_stops_when_the_check_says_not_to_refit(store: TrackingClient) -> None:
    result = CliRunner().invoke(cli, ["fit", "--if-drifted", "--experiment", "before", "--model-name", MODEL])
    assert result.exit_code == 0, result.output
    nothing_new = f"no usable train run since version 1 of {URI}: 0 newer than it (4 older not judged): not refitting"
    assert result.output == f"drift check: {nothing_new}\n"
    experiment_id = store.experiment_by_name("before").experiment_id  # type: ignore[union-attr]
    assert store.search_runs([experiment_id], "tags.`roofline.run_type` = 'fit'") == []


def test_no_usable_run_says_how_many_were_dropped_and_why(store: TrackingClient) -> None:
    check = check_drift(store, ["broken"], MODEL, "champion")
    assert (check.refit, check.run_id) == (False, None)
    assert check.reason == (
        f"no usable train run since version 1 of {URI}: 5 newer than it, dropped 5: "
        "3 with NaN or non-positive energy_j, 2 with energy_j implying an average power outside [0.001, 5000] W per "
        "device (0 older not judged): not refitting"
    )


@pytest.mark.parametrize(
    ("alias", "why"),
    [
        ("trivial", "roofline evaluator: model: its output lacks ['energy_j_lower', 'energy_j_upper', 'extrapolated']"),
        ("fleet", "roofline evaluator: the model refused the runs: hardware (row 0 and 39 more): unknown hardware"),
    ],
)
def test_a_champion_that_is_no_roofline_law_is_one_line_and_a_failed_check(
    store: TrackingClient, alias: str, why: str
) -> None:
    uri = f"models:/{OTHER}@{alias}"
    experiment_id = store.experiment_by_name("same").experiment_id  # type: ignore[union-attr]
    failed_checks = "tags.`roofline.run_type` = 'drift_check' and status = 'FAILED'"
    before = {r.info.run_id for r in store.search_runs([experiment_id], failed_checks)}
    with pytest.raises(RooflineError) as raised:
        check_drift(store, ["same"], OTHER, alias)
    version = store.version_by_alias(OTHER, alias).version  # type: ignore[union-attr]
    assert str(raised.value).startswith(f"drift check: version {version} of {uri} cannot be scored: {why}")
    (failed,) = [r for r in store.search_runs([experiment_id], failed_checks) if r.info.run_id not in before]
    assert str(raised.value).endswith(failed.data.tags["roofline.error"])

    result = run_cli("fit", "--if-drifted", "--experiment", "same", "--model-name", OTHER, "--alias", alias)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"Error: drift check: version {version} of {uri} cannot be scored: {why}")
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
