"""A fit on a real SQLite store: bad measurements counted, failures end with their reason, registry names checked.

- stored infinities (MLflow keeps inf as the largest double) and physically impossible
  times and energies are left out with a reason each, and the counts add up;
- a fit that fails after it started logging ends its run FAILED with ``roofline.error``,
  prints one line, and leaves no registered version behind;
- a model name or alias the registry would refuse is refused before anything happens,
  and the rules match what MLflow itself refuses.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from mlflow_roofline.cli import main
from mlflow_roofline.core.bounds import POWER_BOUND, TIME_BOUND
from mlflow_roofline.core.schema import TAG_ERROR, TAG_RUN_TYPE
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.fit.registration import RegistryLedger
from mlflow_roofline.fit.runs import run_data
from mlflow_roofline.serve.pyfunc_model import log_law_model
from mlflow_roofline.testing.synthetic import generate_synthetic_runs, log_runs, log_synthetic_runs
from mlflow_roofline.tracking.client import TrackingClient


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if " INFO " not in line and line.strip()]  # mlflow's store logs


def test_stored_infinity_and_impossible_values_are_counted_and_add_up(tracking_uri: str) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")
    _, frame = generate_synthetic_runs(4, seed=0, strategies=("single", "ddp"), device_counts=(2,))
    assert len(frame) >= 12
    bad = frame.iloc[:8].copy()
    bad.loc[bad.index[0], "energy_j"] = float("inf")  # the store keeps 1.797e308
    bad.loc[bad.index[1], "energy_j"] = sys.float_info.max
    bad.loc[bad.index[2], "time_s"] = float("inf")
    bad.loc[bad.index[3], "time_s"] = 10 * TIME_BOUND.high
    power = bad["num_devices"] * bad["time_s"]
    bad.loc[bad.index[4], "energy_j"] = 10 * POWER_BOUND.high * power.iloc[4]
    bad.loc[bad.index[5], "energy_j"] = 0.1 * POWER_BOUND.low * power.iloc[5]
    bad.loc[bad.index[6], "energy_j"] = 1e300  # finite, far beyond any device's power
    bad.loc[bad.index[7], "energy_j"] = -5.0
    good_ids = log_runs(client, experiment_id, frame.iloc[8:])
    log_runs(client, experiment_id, bad)

    data = run_data.load_train_runs(TrackingClient(client.tracking_uri), ["roofline-bert"])
    assert sorted(data.frame["run_id"]) == sorted(good_ids)
    stored_inf = "stored as infinity (MLflow keeps inf as the largest double)"
    assert data.dropped == {
        f"with energy_j {stored_inf}": 2,
        f"with time_s {stored_inf}": 1,
        "with time_s outside [1e-06, 3.2e+07] s": 1,
        "with energy_j implying an average power outside [0.001, 5000] W per device": 3,
        "with NaN or non-positive energy_j": 1,
    }
    # The printed line: found = usable + dropped, and the dropped total is the sum of its reasons.
    summary = data.summary()
    found, usable, dropped = map(int, re.match(r"(\d+) finished .* (\d+) usable; dropped (\d+):", summary).groups())
    reasons = [int(n) for n in re.findall(r"(?:: |, )(\d+) with", summary)]
    assert (found, usable, dropped) == (len(frame), len(frame) - 8, 8)
    assert sum(reasons) == dropped == found - usable


def test_a_fit_failing_after_it_started_logging_ends_failed_with_its_reason(
    tracking_uri: str, tmp_path: Path, capsys
) -> None:
    client = MlflowClient()
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the artifact store should be a directory")
    experiment_id = client.create_experiment("roofline-bert", artifact_location=str(blocker / "artifacts"))
    log_synthetic_runs(client, experiment_id, 6, seed=3, strategies=("single", "ddp"), device_counts=(2,))
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--experiment", "roofline-bert", "--model-name", "energy-law"])
    assert exit_info.value.code == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert line.startswith("Error: fit: failed while logging or registering (")
    (fit_run,) = client.search_runs([experiment_id], f"tags.`{TAG_RUN_TYPE}` = 'fit'")
    assert fit_run.info.status == "FAILED"
    assert "Error: " + fit_run.data.tags[TAG_ERROR] == line
    assert "n_runs" in fit_run.data.metrics  # it failed after logging had begun
    assert client.search_registered_models() == []


def _logged_synthetic_fit():
    """A fit of six synthetic runs and the URI of its law model, logged in a run of its own."""
    _, frame = generate_synthetic_runs(6, seed=5, strategies=("single", "ddp"), device_counts=(2,))
    fit = fit_hardware(frame, "Synthetic GPU")
    with mlflow.start_run() as run:
        uri = log_law_model(fit.law).model_uri
    return dataclasses.replace(fit, run_id=run.info.run_id), uri


def test_a_failed_registration_is_undone(tracking_uri: str) -> None:
    client = MlflowClient()
    fit, uri = _logged_synthetic_fit()
    first = RegistryLedger(TrackingClient(), "energy-law")
    first.register(fit, uri, ["champion"])
    second = RegistryLedger(TrackingClient(), "energy-law")
    second.register(fit, uri, ["champion", "champion-gpu"])
    assert str(client.get_model_version_by_alias("energy-law", "champion").version) == "2"
    assert second.rollback() == []
    assert [str(v.version) for v in client.search_model_versions("name = 'energy-law'")] == ["1"]
    assert str(client.get_model_version_by_alias("energy-law", "champion").version) == "1"
    with pytest.raises(MlflowException):
        client.get_model_version_by_alias("energy-law", "champion-gpu")
    assert first.rollback() == []  # it created the model: nothing is left
    assert client.search_registered_models() == []


BAD_ALIASES = ["latest", "Latest", "v3", "V12", "has space", "dot.ted", "slash/ed"]
BAD_NAMES = ["a/b", "a:b", "../up", " "]


@pytest.mark.parametrize(
    "option,value", [("--alias", a) for a in BAD_ALIASES] + [("--model-name", n) for n in BAD_NAMES]
)
def test_names_the_registry_refuses_are_refused_before_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, option: str, value: str
) -> None:
    store = tmp_path / "never-opened.db"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--experiment", "roofline-bert", option, value])
    assert exit_info.value.code == 2
    (line,) = _error_lines(capsys.readouterr().err)
    field = "alias" if option == "--alias" else "model_name"
    assert line.startswith(f"Error: {field}: ")
    assert not store.exists()  # refused before the store was even opened


def test_the_name_rules_match_the_registry(tracking_uri: str) -> None:
    from mlflow_roofline.core.errors import ConfigError
    from mlflow_roofline.fit.registration import check_alias, check_model_name

    client = MlflowClient()
    fit, uri = _logged_synthetic_fit()
    RegistryLedger(TrackingClient(), "ok-model").register(fit, uri, ["champion"])
    for alias in BAD_ALIASES:
        with pytest.raises(ConfigError):
            check_alias(alias)
        with pytest.raises(MlflowException):
            client.set_registered_model_alias("ok-model", alias, "1")
    for alias in ["latest-gpu", "v1x", "champion_2", "x" * 255]:
        check_alias(alias)
        client.set_registered_model_alias("ok-model", alias, "1")
    for name in BAD_NAMES:
        with pytest.raises(ConfigError):
            check_model_name(name)
        with pytest.raises(MlflowException):
            client.create_registered_model(name)
    for name in ["energy law (gpu a)", "x" * 256]:
        check_model_name(name)
        client.create_registered_model(name)
