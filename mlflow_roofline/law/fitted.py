"""The fitted law as plain data: everything the served model needs, read back from JSON.

The fit produces a :class:`FittedLaw`; the served model reads it back from JSON and
predicts with vectorised numpy. Its energy law is a :class:`~law.linear.LinearLaw`
(log-linear forms) or a :class:`~law.roofline.RooflineLaw` (the roofline x efficiency
form); both predict the log of joules with an interval from the same features
(:func:`~law.features.law_features`). Responses: ``log_E`` (energy, joules) for the
energy laws; ``log_t1`` (seconds the same job takes on one device) for the time law.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mlflow_roofline.core.errors import LawFileError
from mlflow_roofline.law.features import law_features
from mlflow_roofline.law.linear import INTERVAL_LEVEL, LinearLaw, t_quantile
from mlflow_roofline.law.roofline import RooflineLaw
from mlflow_roofline.law.speedup import SpeedupLaw

__all__ = ["INTERVAL_LEVEL", "JOULES_PER_KWH", "FittedLaw", "LinearLaw", "RooflineLaw", "law_features", "t_quantile"]

LAW_SCHEMA_VERSION = 1
JOULES_PER_KWH = 3.6e6

EnergyLaw = LinearLaw | RooflineLaw


def energy_law_from_dict(data: dict[str, Any]) -> EnergyLaw:
    """The energy law of a law JSON: a :class:`RooflineLaw` where ``kind`` says so, else linear.

    Laws written before the roofline form existed carry no ``kind`` and are linear.
    """
    if data.get("kind") == RooflineLaw.KIND:
        return RooflineLaw.from_dict(data)
    return LinearLaw.from_dict(data)


@dataclasses.dataclass(frozen=True)
class FittedLaw:
    """Everything the served model needs, as JSON-ready data.

    Attributes:
        hardware: the ``roofline.hardware`` the runs were measured on.
        energy_source: the ``roofline.energy_source`` of the runs (``estimate`` is labelled).
        form: name of the energy-law form chosen by cross-validation (e.g. ``paper``).
        energy_law: log_E law used for predictions (joules).
        time_law: log_t1 law: seconds the job takes on one device.
        speedup_laws: one law per strategy seen in the fit.
        ranges: [min, max] of each model input (and of log_C, log_M) over the fitted runs;
            a query outside them is flagged ``extrapolated``.
        n_runs: runs the law was fitted on.
        cv_mape: grouped cross-validated mean absolute percentage error of energy, in %.
    """

    hardware: str
    energy_source: str
    form: str
    energy_law: EnergyLaw
    time_law: LinearLaw
    speedup_laws: dict[str, SpeedupLaw]
    ranges: dict[str, list[float]]
    n_runs: int
    cv_mape: float
    schema_version: int = LAW_SCHEMA_VERSION

    @property
    def strategies(self) -> list[str]:
        """Strategies the law can predict."""
        return sorted(self.speedup_laws)

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["energy_law"] = self.energy_law.to_dict()
        data["time_law"] = self.time_law.to_dict()
        data["speedup_laws"] = {k: v.to_dict() for k, v in self.speedup_laws.items()}
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FittedLaw:
        """Inverse of :meth:`to_json`.

        Raises:
            LawFileError: another schema version, or a field missing or malformed.
        """
        data = json.loads(text)
        version = int(data.get("schema_version", 0))
        if version != LAW_SCHEMA_VERSION:
            raise LawFileError(f"model: law schema_version {version} is not {LAW_SCHEMA_VERSION}; refit the model")
        try:
            return cls._from_data(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise LawFileError(f"model: the law JSON has a missing or malformed field ({exc!r}); refit the model") from exc

    @classmethod
    def _from_data(cls, data: dict[str, Any]) -> FittedLaw:
        return cls(
            hardware=str(data["hardware"]),
            energy_source=str(data["energy_source"]),
            form=str(data["form"]),
            energy_law=energy_law_from_dict(data["energy_law"]),
            time_law=LinearLaw.from_dict(data["time_law"]),
            speedup_laws={k: SpeedupLaw.from_dict(v) for k, v in data["speedup_laws"].items()},
            ranges={k: [float(lo), float(hi)] for k, (lo, hi) in data["ranges"].items()},
            n_runs=int(data["n_runs"]),
            cv_mape=float(data["cv_mape"]),
        )
