"""The options of the Trainer and Lightning callbacks and the Accelerate hook, checked once, naming the field
(their types and bounds: :data:`~mlflow_roofline.tracking.api_options.OPTIONS`)."""

from __future__ import annotations

import dataclasses

from mlflow_roofline.core.carbon import J_PER_KWH
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import DEFAULT_ALIAS, DEFAULT_MODEL_NAME
from mlflow_roofline.tracking.api_options import OPTIONS, TRACK_OPTION_NAMES

DEFAULT_LAW_URI = f"models:/{DEFAULT_MODEL_NAME}@{DEFAULT_ALIAS}"
"""The law the forecast takes as its prior unless told otherwise: what ``fit`` registers."""

LIGHTNING_PACKAGES: tuple[str, ...] = ("lightning.pytorch", "pytorch_lightning")
"""The two names Lightning's trainer package goes by (``lightning`` since 2.0)."""


@dataclasses.dataclass(frozen=True)
class TrackOptions:
    """How a job is measured and logged.

    Attributes:
        meter: energy meter (``auto``, ``nvml``, ``nvml_power``, ``rapl``, ``estimate``).
        warmup_steps: optimizer steps before the energy window opens.
        forecast_after_steps: K, measured steps before the first forecast.
        sample_steps: optimizer steps per energy sample (raise it when a step is shorter
            than the meter's update period, e.g. NVML's ~0.1 s counter).
        model_uri: the registered law used as the forecast's prior (``None``: none).
        energy_budget_kwh: stop the job once the forecast's lower bound exceeds it (kWh).
        experiment: experiment of the run opened when none is active.
        run_name: name of that run.
        forecast: forecast the whole job's energy and time (False: log the measured energy only;
            an energy budget needs the forecast).
    """

    meter: str = "auto"
    warmup_steps: int = 2
    forecast_after_steps: int = 5
    sample_steps: int = 1
    model_uri: str | None = DEFAULT_LAW_URI
    energy_budget_kwh: float | None = None
    experiment: str | None = None
    run_name: str | None = None
    forecast: bool = True

    def __post_init__(self) -> None:
        for name in TRACK_OPTION_NAMES:
            OPTIONS[name].check(getattr(self, name))
        if self.energy_budget_kwh is not None and not self.forecast:
            raise ConfigError("energy_budget_kwh", "needs the forecast (forecast=False was given)")

    @property
    def budget_j(self) -> float | None:
        """The energy budget in joules, if any."""
        return None if self.energy_budget_kwh is None else float(self.energy_budget_kwh) * J_PER_KWH


def logging_interval(value: object, name: str = "log_every_n_steps") -> int | None:
    """``value`` checked as the optimizer steps between two logging points (None: the framework's own).

    Raises:
        ConfigError: not None and not a positive integer, naming ``name``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(name, f"must be a positive integer, got {value!r}")
    return value
