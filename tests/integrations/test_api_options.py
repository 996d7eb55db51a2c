"""Every option of every entry point of the Python API (``autolog``, ``RooflineCallback``, ``track_training``,
``track_energy``) is checked at the call, by name: a wrong type is a TypeError, a value out of bounds a
ValueError, both naming the option and what it takes; nothing is patched, built or logged first."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

import mlflow_roofline
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import TAG_ENERGY_ERROR
from mlflow_roofline.energy.readings import MeterError
from mlflow_roofline.integrations import autolog as autolog_module
from mlflow_roofline.integrations.accelerate import track_training
from mlflow_roofline.integrations.transformers import RooflineCallback
from mlflow_roofline.tracking.api_options import ENTRY_POINTS, MAX_STEPS, OPTIONS

NAN = float("nan")
BAD: dict[str, list[tuple[Any, type[Exception]]]] = {
    "meter": [(5, TypeError), ("nvidia", ValueError), ("", ValueError)],
    "warmup_steps": [(10**12, ValueError), (-1, ValueError), ("2", TypeError), (2.0, TypeError), (True, TypeError)],
    "forecast_after_steps": [(1, ValueError), (MAX_STEPS + 1, ValueError), (None, TypeError)],
    "sample_steps": [(0, ValueError), (1.5, TypeError)],
    "model_uri": [(5, TypeError), ("", ValueError), (["models:/x@y"], TypeError)],
    "energy_budget_kwh": [(-1, ValueError), (0, ValueError), (NAN, ValueError), (float("inf"), ValueError)],
    "budget_kwh": [("2", TypeError), (-0.5, ValueError), (NAN, ValueError)],
    "experiment": [(123, TypeError), ("  ", ValueError)],
    "run_name": [(["x"], TypeError), ("", ValueError)],
    "forecast": [("yes", TypeError), (None, TypeError), (1, TypeError)],
    "log_every_n_steps": [(0, ValueError), (1.5, TypeError), (10**12, ValueError)],
    "silent": [("no", TypeError)],
    "disable": [(1, TypeError)],
    "total_steps": [(0, ValueError), (10**12, ValueError), ("10", TypeError)],
    "logging_steps": [(0, ValueError), (None, TypeError)],
    "device": [("gpu", ValueError), (0, TypeError)],
    "gpu_indices": [(0, TypeError), ([-1], ValueError), (["0"], ValueError)],
    "carbon": [({"region": "FR"}, TypeError)],
    "sample_hz": [(0, ValueError), (5000, ValueError), ("20", TypeError)],
    "rapl_root": [(5, TypeError), ("", ValueError)],
    "watts_per_core": [(-1, ValueError), (1000, ValueError), ([6], TypeError), ("six", MeterError)],
    "include_self": [("yes", TypeError)],
    "nvml": [("pynvml", TypeError)],
    "amdsmi": [(object(), TypeError)],
}
"""Bad values of every option, with the error they must raise."""


@pytest.fixture(autouse=True)
def autolog_off() -> Iterator[None]:
    mlflow_roofline.autolog(disable=True)
    yield
    mlflow_roofline.autolog(disable=True)


def _call(entry: str) -> Callable[..., object]:
    """The entry point, called with only the option under test (and what it needs besides)."""
    calls: dict[str, Callable[..., object]] = {
        "autolog": lambda **option: mlflow_roofline.autolog(**option),
        "RooflineCallback": lambda **option: RooflineCallback(**option),
        "track_training": lambda **option: track_training(object(), object(), **option),  # type: ignore[arg-type]
        "track_energy": lambda **option: mlflow_roofline.track_energy(**option),
    }
    return calls[entry]


def _shown(value: Any) -> str:
    """A value in a test id, the same in every process (xdist's workers must collect the same ids)."""
    return "object()" if type(value) is object else repr(value)


CASES = [
    pytest.param(entry, name, value, error, id=f"{entry}-{name}={_shown(value)}")
    for entry, names in ENTRY_POINTS.items()
    for name in names
    for value, error in BAD[name]
]


def test_every_option_of_every_entry_point_has_bad_values_under_test() -> None:
    assert {name for names in ENTRY_POINTS.values() for name in names} == set(BAD) == set(OPTIONS)


@pytest.mark.parametrize(("entry", "name", "value", "error"), CASES)
def test_a_bad_option_is_refused_at_the_call_naming_it(
    unopened_tracking_uri: str, entry: str, name: str, value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error) as raised:
        _call(entry)(**{name: value})  # called, not entered: the check is at the call
    message = str(raised.value)
    assert message.startswith(f"{name}: "), message
    if isinstance(raised.value, ConfigError):
        assert raised.value.field == name and "must be" in message and repr(value) in message
    assert not autolog_module.enabled()  # nothing patched
    assert not Path(unopened_tracking_uri.removeprefix("sqlite:///")).exists()  # no store opened, no run


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_an_unknown_option_is_a_type_error_naming_it_and_the_entry_points_options(entry: str) -> None:
    with pytest.raises(TypeError, match=rf"^budget: is not an option of {entry} \(its options: .*\)$"):
        _call(entry)(budget=2)


def test_autolog_calls_the_budget_budget_kwh_and_refuses_the_callbacks_spelling() -> None:
    with pytest.raises(TypeError, match="energy_budget_kwh: is not an option of autolog"):
        mlflow_roofline.autolog(energy_budget_kwh=2.0)  # once silently dropped: the budget was None
    assert not autolog_module.enabled()


@pytest.mark.parametrize(
    ("entry", "options"),
    [
        ("autolog", {"model_uri": None, "experiment": "e", "run_name": "r", "budget_kwh": 1, "warmup_steps": 0}),
        ("RooflineCallback", {"log_every_n_steps": None, "energy_budget_kwh": 0.5, "sample_steps": MAX_STEPS}),
        ("track_training", {"total_steps": 10, "logging_steps": 1, "forecast": False, "meter": "estimate"}),
        ("track_energy", {"meter": "estimate", "device": "cpu", "gpu_indices": None, "watts_per_core": "6"}),
    ],
)
def test_good_options_are_taken(unopened_tracking_uri: str, entry: str, options: dict[str, Any]) -> None:
    _call(entry)(**options)


def test_a_warm_up_that_covers_the_job_is_said_at_its_start_and_on_its_finished_run(
    tracking_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    from integration_jobs import run_trainer, tiny_bert

    callback = RooflineCallback(meter="estimate", warmup_steps=1000, model_uri=None)  # in bounds, past the job
    with caplog.at_level(logging.WARNING, logger="mlflow_roofline"):
        run_trainer(tiny_bert(), callback, max_steps=4)
    assert callback.tracker is not None and callback.tracker.run is not None
    run = MlflowClient().get_run(callback.tracker.run.run_id)
    why = "no step was measured: the job ended after 4 optimizer steps, within warmup_steps=1000"
    assert run.info.status == "FINISHED" and "energy_j" not in run.data.metrics
    assert run.data.tags[TAG_ENERGY_ERROR] == why
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        "roofline: warmup_steps=1000 covers all 4 planned steps: no step will be measured "
        "(the run will hold no energy)",
        f"roofline: {why}; no energy logged",
    ]
