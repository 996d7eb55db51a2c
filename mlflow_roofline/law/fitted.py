"""The fitted law as plain data: everything the served model needs, read back from JSON.

The fit produces a :class:`FittedLaw`; the served model reads it back from JSON and
predicts with vectorised numpy. Its energy law is a :class:`~law.linear.LinearLaw`
(log-linear forms), a :class:`~law.roofline_efficiency.RooflineLaw` (the roofline x
efficiency form), a :class:`~law.roofline_efficiency.SmoothRooflineLaw` (the smooth
roofline in time) or an :class:`~law.averaged.AveragedLaw` (the mean in logs of forms that
tie); all predict the log of joules with an interval from the same features
(:func:`~law.log_features.law_features`). Responses: ``log_E`` (energy, joules) for the
energy laws; ``log_t1`` (seconds the same job takes on one device) for the time law.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterable
from typing import TypeVar

import numpy as np

from mlflow_roofline.core.errors import LawFileError
from mlflow_roofline.core.schema import M_CV_MAPE, M_LOHO_MAPE, M_N_RUNS, PRECISIONS
from mlflow_roofline.law import averaged, roofline_efficiency  # noqa: F401 # the families register on import
from mlflow_roofline.law.coefficients import JsonObject, LawCoefficients, law_from_dict
from mlflow_roofline.law.comm_time import ParallelJob
from mlflow_roofline.law.linear import LinearLaw
from mlflow_roofline.law.speedup import SpeedupLaw

LAW_SCHEMA_VERSION = 1

EnergyLaw = LawCoefficients
"""An energy law: any law of coefficients that predicts log joules with an interval from the features."""


def energy_law_from_dict(data: JsonObject) -> EnergyLaw:
    """The energy law of a law JSON (:func:`~law.coefficients.law_from_dict`): every family is imported here."""
    return law_from_dict(data)


def precisions_of(values: Iterable[object]) -> list[str]:
    """The precisions of fitted runs (job-table levels), the most runs first (ties: the job table's order)."""
    counts = collections.Counter(str(v) for v in values)
    return sorted(counts, key=lambda p: (-counts[p], PRECISIONS.index(p) if p in PRECISIONS else len(PRECISIONS)))


HARDWARE_ORDER = "hardware_order"
"""The JSON key that keeps a law's measured hardware in the fit's order, the most runs first (the JSON is written
with sorted keys, which would put them in alphabetical order): the first is the reference hardware a GPU no run
measured is timed from (:func:`serve.hardware_routing.reference_hardware`)."""

_Law = TypeVar("_Law")


def in_fitted_order(laws: dict[str, _Law], data: JsonObject) -> dict[str, _Law]:
    """``laws`` (by hardware, as read from JSON) in the order ``data[HARDWARE_ORDER]`` lists; as read where the key
    is absent (a law written before it: it was served in that order).

    Raises:
        ValueError: the order does not name each hardware of ``laws`` once.
    """
    order = data.get(HARDWARE_ORDER)
    if not order:
        return laws
    if sorted(order) != sorted(laws):
        raise ValueError(f"{HARDWARE_ORDER} {order} does not name each of {sorted(laws)} once")
    return {str(name): laws[str(name)] for name in order}


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
        hardware_laws: a law pooled over several hardware holds each hardware's own law
            here (its time law, speedup laws and ranges serve that hardware's rows); its
            ``energy_law`` then takes the feature ``hardware`` (and the covariates). Empty
            for a law of one hardware.
        covariates: per known hardware, the covariate values the pooled forms use
            (``log_jpf``: log board watts per peak FLOP/s, J/FLOP; ``log_ridge``: log peak
            FLOP/s per byte/s of memory bandwidth; ``log_peak``: log peak FLOP/s).
        covariate_form, covariate_law: the pooled form that predicts a hardware no run
            measured from its covariates (hardware table), or "" / None.
        loho_mape: that form's leave-one-hardware-out MAPE of energy, %, the error its
            predictions for an unmeasured hardware are widened by (NaN without one).
        n_only_speedup_laws: where a strategy's law is workload-aware (``comm_time``), the
            N-only law fitted beside it, by strategy: what a GPU no run measured is served
            with (:mod:`serve.hardware_routing`). Empty where every law is N-only.
        unmeasured_speedup_laws: a pooled law's comm-time laws fitted over its GPUs, by
            strategy, for a GPU no run measured: their ``s_per_element`` is at the
            interconnect ``reference["link_bytes_per_s"]`` and scales to the GPU's own
            (:mod:`fit.pooled_speedup`). Empty where the N-only law predicted better.
        unmeasured_time_law: a pooled law's roofline in time fitted over its GPUs' single-device runs
            (log seconds, :class:`~law.roofline_efficiency.HardwareRooflineTimeLaw`), the single-device time of
            a GPU no run measured from its datasheet row (:mod:`fit.pooled_time`). None where it could not be
            fitted (fewer than two GPUs with enough single-device runs, a GPU the table lacks) and in laws
            written before it: such a GPU is then timed from the reference, scaled by the roofline.
        precisions: the ``precision`` of the runs fitted, the most runs first: the first is what a
            request without ``precision`` is answered at (:mod:`serve.precision_routing`). Empty for
            a law written before ``precision`` entered the law: it ignores the column, as it did.
        flops_scale: a one-GPU law fitted on runs at precisions of different peaks (fp32 and bf16 on an
            A100): per precision it answers, the table's peak FLOP/s at ``precisions[0]`` over the peak
            at that precision (1 at ``precisions[0]``, 16 for fp32 against bf16 on an A100). The FLOPs
            features ``log_C`` and ``log_C_all`` of a run or request are those FLOPs times its scale:
            FLOPs counted in time at the reference precision's peak (:func:`law.log_features.law_features`).
            Empty where the runs had one peak (and in laws written before it): features unscaled.
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
    hardware_laws: dict[str, FittedLaw] = dataclasses.field(default_factory=dict)
    covariates: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    covariate_form: str = ""
    covariate_law: EnergyLaw | None = None
    loho_mape: float | None = None
    n_only_speedup_laws: dict[str, SpeedupLaw] = dataclasses.field(default_factory=dict)
    unmeasured_speedup_laws: dict[str, SpeedupLaw] = dataclasses.field(default_factory=dict)
    unmeasured_time_law: LawCoefficients | None = None
    precisions: list[str] = dataclasses.field(default_factory=list)
    flops_scale: dict[str, float] = dataclasses.field(default_factory=dict)

    def flops_scale_of(self, precision: np.ndarray) -> np.ndarray | None:
        """Each row's :attr:`flops_scale` at its precision (1 where it has none: the reference precision, or a
        precision the routing answers elsewhere); None for a law without one (its features are unscaled)."""
        if not self.flops_scale:
            return None
        return np.array([self.flops_scale.get(str(p), 1.0) if p is not None else 1.0 for p in precision], dtype=float)

    @property
    def known_hardware(self) -> list[str]:
        """The hardware this law has runs of (several for a pooled law, the reference first)."""
        return list(self.hardware_laws) or [self.hardware]

    @property
    def strategies(self) -> list[str]:
        """Strategies the law can predict."""
        return sorted(self.speedup_laws)

    def speedup(self, strategy: np.ndarray, n: np.ndarray, job: ParallelJob | None = None) -> np.ndarray:
        """S(N) per row from its strategy's speedup law (one vectorised call per strategy); NaN where none.

        ``job`` gives each row's shape and single-device step time (seconds) to a workload-aware
        law (``comm_time``); without it, such a law answers for its reference job.
        """
        speedup = np.full(len(n), np.nan)
        for name, speedup_law in self.speedup_laws.items():
            mask = strategy == name
            if mask.any():
                speedup[mask] = speedup_law(n[mask], None if job is None else job.take(mask))
        return speedup

    def to_data(self) -> dict[str, object]:
        """The law as JSON-ready data (:meth:`to_json` writes it)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["energy_law"] = self.energy_law.to_dict()
        data["time_law"] = self.time_law.to_dict()
        data["speedup_laws"] = {k: v.to_dict() for k, v in self.speedup_laws.items()}
        data["n_only_speedup_laws"] = {k: v.to_dict() for k, v in self.n_only_speedup_laws.items()}
        data["unmeasured_speedup_laws"] = {k: v.to_dict() for k, v in self.unmeasured_speedup_laws.items()}
        data["hardware_laws"] = {k: v.to_data() for k, v in self.hardware_laws.items()}
        if self.hardware_laws:
            data[HARDWARE_ORDER] = list(self.hardware_laws)
        data["covariate_law"] = self.covariate_law.to_dict() if self.covariate_law is not None else None
        data["unmeasured_time_law"] = (
            self.unmeasured_time_law.to_dict() if self.unmeasured_time_law is not None else None
        )
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_data(), indent=2, sort_keys=True)

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
            raise LawFileError(
                f"model: the law JSON has a missing or malformed field ({exc!r}); refit the model"
            ) from exc

    @classmethod
    def _from_data(cls, data: JsonObject) -> FittedLaw:
        return cls(
            hardware=str(data["hardware"]),
            energy_source=str(data["energy_source"]),
            form=str(data["form"]),
            energy_law=energy_law_from_dict(data["energy_law"]),
            time_law=LinearLaw.from_dict(data["time_law"]),
            speedup_laws={k: SpeedupLaw.from_dict(v) for k, v in data["speedup_laws"].items()},
            ranges={k: [float(lo), float(hi)] for k, (lo, hi) in data["ranges"].items()},
            n_runs=int(data[M_N_RUNS]),
            cv_mape=float(data[M_CV_MAPE]),
            hardware_laws=in_fitted_order(
                {k: cls._from_data(v) for k, v in (data.get("hardware_laws") or {}).items()}, data
            ),
            covariates={k: {n: float(x) for n, x in v.items()} for k, v in (data.get("covariates") or {}).items()},
            covariate_form=str(data.get("covariate_form") or ""),
            covariate_law=energy_law_from_dict(data["covariate_law"]) if data.get("covariate_law") else None,
            loho_mape=None if data.get(M_LOHO_MAPE) is None else float(data[M_LOHO_MAPE]),
            n_only_speedup_laws={
                k: SpeedupLaw.from_dict(v) for k, v in (data.get("n_only_speedup_laws") or {}).items()
            },
            unmeasured_speedup_laws={
                k: SpeedupLaw.from_dict(v) for k, v in (data.get("unmeasured_speedup_laws") or {}).items()
            },
            unmeasured_time_law=(
                energy_law_from_dict(data["unmeasured_time_law"]) if data.get("unmeasured_time_law") else None
            ),
            precisions=[str(p) for p in data.get("precisions") or []],
            flops_scale={str(p): float(v) for p, v in (data.get("flops_scale") or {}).items()},
        )
