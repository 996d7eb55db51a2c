"""The smooth roofline in time as plain data, evaluated with numpy.

Energy is power times time, and a step's time is a smooth maximum of its compute time
and its memory time plus a fixed per-step cost. With the (constant) power folded into
the coefficients and every term proportional to the steps, on job totals:

``E = ( ((eps_c*C)^k + (eps_m*M)^k)^(1/k) + e_0*T ) * eta^alpha_eta * exp(psi[strategy])``

(joules), with ``C`` the job's FLOP proxy, ``M`` its memory-traffic proxy (elements),
``T`` its tokens, ``eps_c, eps_m, e_0 >= 0`` (J/FLOP, J/element, J/token) and the
sharpness ``k >= 1`` (dimensionless): ``k = 1`` is the additive roofline of
:class:`law.roofline.RooflineLaw`, ``k -> inf`` the hard ``max`` of the two terms, so a
change from memory- to compute-bound across model sizes is a shape this law can take.
The ``k``-norm is used rather than a log-sum-exp because it is homogeneous of degree
one: scaling both terms scales the maximum, so twice the steps cost twice the joules
for every ``k``.

Prediction intervals are those of :class:`law.roofline.RooflineLaw` (delta method:
gradient of log E with respect to every coefficient, ``k`` included, through the
coefficients' Jacobian covariance, plus the residual scatter of one new run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from mlflow_roofline.law.roofline import COST_FEATURES, RooflineLaw

SHARPNESS = "k"
SMOOTH_COST_TERMS: tuple[str, ...] = ("eps_c", "eps_m", "e0", SHARPNESS)


def smooth_max(a: np.ndarray, b: np.ndarray, k: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``S = (a^k + b^k)^(1/k)`` for ``a, b >= 0`` and ``k >= 1``, and its partials dS/da, dS/db, dS/dk.

    Computed relative to ``max(a, b)`` so that no power overflows for large ``k``;
    ``S`` has the units of ``a`` and ``b``.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    top = np.maximum(a, b)
    safe_top = np.where(top > 0, top, 1.0)
    ra, rb = a / safe_top, b / safe_top  # in [0, 1]
    pa, pb = ra**k, rb**k
    norm = pa + pb  # in [1, 2] where top > 0
    safe_norm = np.where(norm > 0, norm, 1.0)
    root = safe_norm ** (1.0 / k)
    s = top * root
    qa, qb = ra / root, rb / root  # a/S and b/S, in [0, 1]
    wa, wb = pa / safe_norm, pb / safe_norm  # the weights (a/S)^k and (b/S)^k, summing to 1
    with np.errstate(divide="ignore"):
        la = np.where(qa > 0, np.log(np.where(qa > 0, qa, 1.0)), 0.0)
        lb = np.where(qb > 0, np.log(np.where(qb > 0, qb, 1.0)), 0.0)
    return s, qa ** (k - 1.0), qb ** (k - 1.0), s / k * (wa * la + wb * lb)


class SmoothRooflineLaw(RooflineLaw):
    """The smooth roofline in time (see the module docstring).

    Same attributes as :class:`law.roofline.RooflineLaw`; ``terms`` are ``eps_c``,
    ``eps_m``, ``e0``, ``k``, then ``alpha_eta`` and ``strategy[T.<name>]`` where the
    fit estimated them.
    """

    KIND: ClassVar[str] = "roofline_smooth"

    def _cost(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The cost part (joules) and its gradient with respect to eps_c, eps_m, e0 and k."""
        c, m, t = (np.exp(np.asarray(features[COST_FEATURES[n]], dtype=float)) for n in ("eps_c", "eps_m", "e0"))
        k = max(self.coefficient(SHARPNESS), 1.0)
        s, ds_da, ds_db, ds_dk = smooth_max(self.coefficient("eps_c") * c, self.coefficient("eps_m") * m, k)
        grads = {"eps_c": ds_da * c, "eps_m": ds_db * m, "e0": t, SHARPNESS: ds_dk}
        return s + self.coefficient("e0") * t, grads
