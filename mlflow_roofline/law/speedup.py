"""Speedup laws S(N) of the parallel strategies, and hardware efficiency eta = S(N) / N.

Every law has S(1) = 1:

- tensor parallel, a saturating exponential:  S(N) = 1 + (s_max - 1) (1 - exp(-k (N - 1)))
  (s_max is the asymptotic speedup, k > 0 how fast it is approached);
- data parallel (DDP, FSDP), a generalized Amdahl law:
  S(N) = 1 / ((1 - p) + p / N + c (N - 1))
  (p in [0, 1] the parallel fraction, c >= 0 the per-extra-device communication cost,
  as a fraction of the single-device time);
- single device: S = 1;
- any parallel strategy, the workload-aware communication-time law of :mod:`law.comm_time`
  (``comm_time``): S(N) from the job's single-device step time and the bytes the strategy
  moves, so that efficiency depends on the model as well as on N.

The N-only laws ignore the job; the ``comm_time`` law needs it (a :class:`ParallelJob`) and,
called with N alone, answers for its ``reference`` job: the median workload it was fitted on
(the plots and the sanity checks draw it so). The laws are evaluated here; they are fitted in
:mod:`mlflow_roofline.fit.speedup_fit`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from mlflow_roofline.core.schema import BASELINE_PER_DEVICE
from mlflow_roofline.law.coefficients import JsonObject
from mlflow_roofline.law.comm_time import COMM_TIME, ParallelJob, comm_time_speedup

SATURATING_EXP = "saturating_exp"
AMDAHL = "amdahl"
CONSTANT = "constant"

GLOBAL_BASELINE = "global"
"""S relative to one device running the job's global batch (:attr:`SpeedupLaw.baseline`)."""
PER_DEVICE_BASELINE = BASELINE_PER_DEVICE
"""S relative to N times one device running the per-device batch (:attr:`SpeedupLaw.baseline`)."""

LAW_FORM_BY_STRATEGY: dict[str, str] = {
    "single": CONSTANT,
    "ddp": AMDAHL,
    "fsdp": AMDAHL,
    "tp": SATURATING_EXP,
}


def saturating_exp(n: np.ndarray, s_max: float, k: float) -> np.ndarray:
    """Tensor-parallel speedup 1 + (s_max - 1)(1 - exp(-k (N - 1))); dimensionless."""
    n = np.asarray(n, dtype=float)
    return 1.0 + (s_max - 1.0) * (1.0 - np.exp(-k * (n - 1.0)))


def amdahl(n: np.ndarray, p: float, c: float) -> np.ndarray:
    """Data-parallel speedup 1 / ((1 - p) + p / N + c (N - 1)); dimensionless."""
    n = np.asarray(n, dtype=float)
    return 1.0 / ((1.0 - p) + p / n + c * (n - 1.0))


@dataclasses.dataclass(frozen=True)
class SpeedupLaw:
    """A fitted speedup law of one strategy.

    Attributes:
        strategy: the strategy it describes.
        form: ``saturating_exp``, ``amdahl``, ``comm_time`` or ``constant``.
        params: the law's parameters by name (``s_max``, ``k``; ``p``, ``c``; or ``p``,
            ``s_per_element``, ``latency_s``, ``overlap`` of :mod:`law.comm_time`).
        n_points: measured (N, S) points it was fitted on.
        rmse: root mean square error of the fit, in speedup units.
        reference: the job a ``comm_time`` law answers for when called with N alone
            (:class:`ParallelJob` fields, one number each); empty for the N-only laws.
        baseline: what S is relative to: ``global``, one device running the job's global
            batch (strong scaling), or ``per_device``, N times one device running the
            per-device batch B/N (weak scaling: most of the runs it was fitted on had a
            per-device baseline). The served time divides that single-device time by S.
    """

    strategy: str
    form: str
    params: dict[str, float]
    n_points: int = 0
    rmse: float = float("nan")
    reference: dict[str, float] = dataclasses.field(default_factory=dict)
    baseline: str = GLOBAL_BASELINE

    @property
    def workload_aware(self) -> bool:
        """True when the speedup depends on the job, not on N alone."""
        return self.form == COMM_TIME

    def __call__(self, num_devices: np.ndarray, job: ParallelJob | None = None) -> np.ndarray:
        """Speedup at ``num_devices`` devices (dimensionless) of ``job`` (used by ``comm_time`` only)."""
        if self.form == COMM_TIME:
            n = np.asarray(num_devices, dtype=float)
            return comm_time_speedup(
                self.strategy, n, job or ParallelJob.of(self.reference, self.reference["single_step_s"]), self.params
            )
        if self.form == SATURATING_EXP:
            return saturating_exp(num_devices, self.params["s_max"], self.params["k"])
        if self.form == AMDAHL:
            return amdahl(num_devices, self.params["p"], self.params["c"])
        if self.form == CONSTANT:
            return np.ones_like(np.asarray(num_devices, dtype=float))
        raise ValueError(f"unknown speedup law form {self.form!r}")

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: JsonObject) -> SpeedupLaw:
        """Inverse of :meth:`to_dict`."""
        return cls(
            strategy=str(data["strategy"]),
            form=str(data["form"]),
            params={k: float(v) for k, v in data["params"].items()},
            n_points=int(data.get("n_points", 0)),
            rmse=float(data.get("rmse", float("nan"))),
            reference={k: float(v) for k, v in (data.get("reference") or {}).items()},
            baseline=str(data.get("baseline") or GLOBAL_BASELINE),
        )


REFERENCE_LINK = "link_bytes_per_s"
"""The key of a pooled comm-time law's ``reference``: the interconnect its ``s_per_element`` is at (bytes/s)."""
LINK_RANGE = ("link_min_bytes_per_s", "link_max_bytes_per_s")
"""The keys of a pooled comm-time law's ``reference``: the slowest and fastest interconnect it was fitted on."""
LINK_REACH = 2.0
"""How far past the fitted interconnects (a factor either way) a pooled comm-time law is trusted."""


def within_reach(law: SpeedupLaw, link: float) -> bool:
    """True when ``link`` (bytes/s) lies within :data:`LINK_REACH` of the interconnects ``law`` was fitted on."""
    low, high = (law.reference.get(key, math.nan) for key in LINK_RANGE)
    return low / LINK_REACH <= link <= high * LINK_REACH


def on_link(law: SpeedupLaw, link: float) -> SpeedupLaw:
    """A comm-time law pooled over GPUs (:mod:`fit.pooled_speedup`) on a GPU whose interconnect moves
    ``link`` bytes/s: seconds per element moved scale with the inverse of the bandwidth."""
    scale = law.reference[REFERENCE_LINK] / link
    return dataclasses.replace(law, params={**law.params, "s_per_element": law.params["s_per_element"] * scale})
