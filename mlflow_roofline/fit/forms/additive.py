"""The additive roofline decomposition ``E = eps_comp*C + eps_mem*M + E0`` (non-negative).

Fitted with ``scipy.optimize.nnls`` on relative errors: each row is divided by its
energy so that jobs of every size weigh alike. It reads as the device's cost of a FLOP
(J/FLOP), of an element of traffic (J/element) and a fixed cost per job (J).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from scipy.optimize import nnls


@dataclasses.dataclass(frozen=True)
class AdditiveRoofline:
    """E = eps_comp*C + eps_mem*M + E0 with non-negative coefficients.

    Attributes:
        eps_comp: joules per FLOP of the compute proxy.
        eps_mem: joules per element of the memory-traffic proxy.
        e0: fixed joules per job.
        mape: in-sample mean absolute percentage error, %.
        n_runs: runs it was fitted on.
        scope: which runs (``single`` device runs, or ``all``).
    """

    eps_comp: float
    eps_mem: float
    e0: float
    mape: float
    n_runs: int
    scope: str

    def predict(self, flops: np.ndarray, mem_traffic: np.ndarray) -> np.ndarray:
        """Energy in joules."""
        return self.eps_comp * np.asarray(flops) + self.eps_mem * np.asarray(mem_traffic) + self.e0


def fit_additive_roofline(frame: pd.DataFrame) -> AdditiveRoofline:
    """Non-negative E = eps_comp*C + eps_mem*M + E0 by relative least squares.

    Fitted on single-device runs when at least 3 exist (the device's own cost of a FLOP
    and of traffic), else on all runs.
    """
    singles = frame[frame["strategy"] == "single"]
    use, scope = (singles, "single") if len(singles) >= 3 else (frame, "all")
    c = np.exp(use["log_C"].to_numpy())
    m = np.exp(use["log_M"].to_numpy())
    e = np.exp(use["log_E"].to_numpy())
    scales = np.array([c.mean(), m.mean(), 1.0])
    design = np.column_stack([c, m, np.ones_like(c)]) / scales
    coef, _ = nnls(design / e[:, None], np.ones_like(e))
    coef = coef / scales
    roofline = AdditiveRoofline(float(coef[0]), float(coef[1]), float(coef[2]), float("nan"), len(use), scope)
    mape = float(100.0 * np.mean(np.abs(roofline.predict(c, m) - e) / e))
    return dataclasses.replace(roofline, mape=mape)
