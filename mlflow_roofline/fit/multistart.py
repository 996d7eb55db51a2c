"""Bounded nonlinear least squares from several starts, the best optimum kept: the one solver of every nonlinear fit.

The energy forms (:mod:`fit.forms.nonlinear`), the N-only speedup laws (:mod:`fit.speedup_fit`) and
the comm-time law (:mod:`fit.comm_time_fit`) each run ``scipy.optimize.least_squares`` (trf, bounded,
analytic Jacobian) from a few starts and keep the lowest cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.optimize import OptimizeResult, least_squares

Vector = Callable[[np.ndarray], np.ndarray]
"""A function of the parameter vector: the residuals, or their Jacobian (rows x parameters)."""


def best_of_starts(
    residuals: Vector,
    jacobian: Vector,
    starts: Sequence[np.ndarray],
    bounds: tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray],
    *,
    x_scale: str | float = 1.0,
    max_nfev: int | None = None,
) -> OptimizeResult:
    """The optimum of lowest cost (half the sum of squared residuals) over ``starts``.

    ``x_scale`` and ``max_nfev`` are those of ``least_squares`` (``max_nfev`` per start).
    """
    best: OptimizeResult | None = None
    for x0 in starts:
        result = least_squares(
            residuals, x0, jac=jacobian, bounds=bounds, method="trf", x_scale=x_scale, max_nfev=max_nfev
        )
        if best is None or result.cost < best.cost:
            best = result
    if best is None:
        raise ValueError("best_of_starts: no start given")
    return best
