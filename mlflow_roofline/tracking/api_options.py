"""The options of the Python API, declared once: ``mlflow_roofline.autolog()``, the Hugging Face
``RooflineCallback``, the Accelerate ``track_training`` and ``track_energy``.

Each entry point checks what it was given against its rows of :data:`OPTIONS` at the call,
before any job (:func:`check_options`): ``autolog(model_uri=5)`` is a ``ConfigTypeError``
naming ``model_uri`` and what it takes, not a failure at the job's first forecast. No MLflow
is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

from mlflow_roofline.core.carbon import CarbonSettings
from mlflow_roofline.core.option_rules import Option, check_call
from mlflow_roofline.core.schema import DEVICE_CHOICES, P_METER
from mlflow_roofline.energy.estimate import MAX_WATTS_PER_CORE
from mlflow_roofline.energy.nvml_power import MAX_SAMPLE_HZ, MIN_SAMPLE_HZ
from mlflow_roofline.energy.select import METER_NAMES

__all__ = ["ENTRY_POINTS", "MAX_STEPS", "OPTIONS", "TRACK_OPTION_NAMES", "check_options"]

MAX_STEPS = 10**9
"""The most optimizer steps a step count may name: no fine-tuning job runs a billion steps."""

_STEPS = "an integer number of optimizer steps"
_KWH = "a number of kWh"
_BUDGET = Option("energy_budget_kwh", (int, float), _KWH, above=0, optional=True)

OPTIONS: Mapping[str, Option] = {
    row.name: row
    for row in (
        Option(P_METER, (str,), choices=METER_NAMES),
        Option("warmup_steps", (int,), _STEPS, low=0, high=MAX_STEPS),
        Option("forecast_after_steps", (int,), _STEPS, low=2, high=MAX_STEPS),
        Option("sample_steps", (int,), _STEPS, low=1, high=MAX_STEPS),
        Option("model_uri", (str,), "a model URI (models:/NAME@ALIAS, runs:/...)", optional=True),
        _BUDGET,
        Option("budget_kwh", _BUDGET.types, _KWH, above=0, optional=True),
        Option("experiment", (str,), "an experiment name", optional=True),
        Option("run_name", (str,), "a run name", optional=True),
        Option("forecast", (bool,)),
        Option("log_every_n_steps", (int,), _STEPS, low=1, high=MAX_STEPS, optional=True),
        Option("silent", (bool,)),
        Option("disable", (bool,)),
        Option("total_steps", (int,), _STEPS, low=1, high=MAX_STEPS, optional=True),
        Option("logging_steps", (int,), _STEPS, low=1, high=MAX_STEPS),
        Option("device", (str,), choices=DEVICE_CHOICES),
        Option(
            "gpu_indices",
            (list, tuple),
            "a list",
            optional=True,
            items=Option("index", (int,), "GPU indices (integers >= 0)", low=0),
        ),
        Option("carbon", (CarbonSettings,), "a CarbonSettings", optional=True),
        Option("sample_hz", (int, float), "samples per second", low=MIN_SAMPLE_HZ, high=MAX_SAMPLE_HZ, optional=True),
        Option("rapl_root", (str,), "a powercap folder", optional=True),
        Option("watts_per_core", (int, float, str), "watts", above=0, high=MAX_WATTS_PER_CORE, optional=True),
        Option("include_self", (bool,)),
        Option("nvml", (ModuleType,), "a pynvml-compatible module", optional=True),
        Option("amdsmi", (ModuleType,), "an amdsmi-compatible module", optional=True),
    )
}
"""Every option of the Python API by name: type, bounds, choices."""

TRACK_OPTION_NAMES: tuple[str, ...] = (
    P_METER,
    "warmup_steps",
    "forecast_after_steps",
    "sample_steps",
    "model_uri",
    "energy_budget_kwh",
    "experiment",
    "run_name",
    "forecast",
)
"""How a job in the user's loop is measured (the fields of ``TrackOptions``)."""

_AUTOLOG_OWN = ("disable", "log_every_n_steps", "forecast", "budget_kwh", "silent")
ENTRY_POINTS: Mapping[str, tuple[str, ...]] = {
    "autolog": (*_AUTOLOG_OWN, *(name for name in TRACK_OPTION_NAMES if name not in ("forecast", "energy_budget_kwh"))),
    "RooflineCallback": ("log_every_n_steps", *TRACK_OPTION_NAMES),
    "track_training": ("total_steps", "logging_steps", *TRACK_OPTION_NAMES),
    "track_energy": (
        P_METER,
        "device",
        "gpu_indices",
        "carbon",
        "nvml",
        "amdsmi",
        "sample_hz",
        "rapl_root",
        "watts_per_core",
        "include_self",
    ),
}
"""The options each entry point takes (``autolog`` calls the budget ``budget_kwh``)."""


def check_options(entry: str, given: Mapping[str, object]) -> None:
    """Check the options ``given`` to ``entry`` (a key of :data:`ENTRY_POINTS`) at the call.

    Raises:
        ConfigTypeError: an option ``entry`` does not take, or a value of the wrong type (naming it).
        ConfigError: a value out of its bounds or choices (naming it and what it takes).
    """
    check_call(entry, [OPTIONS[name] for name in ENTRY_POINTS[entry]], given)
