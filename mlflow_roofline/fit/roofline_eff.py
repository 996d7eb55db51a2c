"""The roofline x efficiency form, fitted with ``scipy.optimize.least_squares`` on log residuals.

``log E = log(eps_c*C + eps_m*M + e_0*T) + alpha_eta*log_eta + psi[strategy]`` with
``eps_c, eps_m, e_0 >= 0`` (bounds of the solver; see :mod:`law.roofline`). The costs
are fitted in scaled units (each proxy divided by its median, energy by its median) so
that every coefficient is of order one, from four starts (balanced, compute-, memory-
and token-dominated); the best optimum is kept. Cross-validation folds and the
extrapolation check refit the form from these same starts (no information from the
held-out runs enters a start). ``alpha_eta`` is estimated only where
eta varies, a ``psi`` only for the strategies present beyond the first.

The covariance of the coefficients is ``s^2 (J'J)^+`` at the optimum (J the Jacobian
of the log residuals, ``s^2`` their variance on ``n - p`` degrees of freedom), mapped
back to physical units; a cost sitting on its bound 0 keeps the covariance of the
unconstrained problem there (the interval is then slightly conservative).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from mlflow_roofline.law.roofline import ALPHA_ETA, COST_FEATURES, COST_TERMS, STRATEGY_PREFIX, RooflineLaw

ROOFLINE_EFF = "roofline_eff"
FORMULA = "E = (eps_c*C + eps_m*M + e0*T) * eta^alpha_eta * exp(psi[strategy])"
START_ROWS = 1000
STARTS = ((1 / 3, 1 / 3, 1 / 3), (0.9, 0.05, 0.05), (0.05, 0.9, 0.05), (0.05, 0.05, 0.9))


@dataclasses.dataclass
class RooflineFormFit:
    """The roofline x efficiency law fitted on all runs, with its held-out errors.

    Attributes mirror :class:`fit.ols.FormFit`: ``name``, ``formula``, ``law``,
    ``dropped_terms``, ``cv_mape``/``cv_se`` and ``extrap_mape``/``extrap_se`` (%),
    plus ``fitted`` (in-sample log E) and ``actual`` (measured log E).
    """

    name: str
    formula: str
    law: RooflineLaw
    dropped_terms: list[str]
    fitted: np.ndarray
    actual: np.ndarray
    cv_mape: float = float("nan")
    cv_se: float = float("nan")
    extrap_mape: float = float("nan")
    extrap_se: float = float("nan")

    @property
    def n_params(self) -> int:
        return len(self.law.terms)

    @property
    def fitted_log(self) -> np.ndarray:
        return self.fitted

    @property
    def rmse_log(self) -> float:
        return float(np.sqrt(np.mean((self.actual - self.fitted) ** 2)))

    @property
    def adj_r2(self) -> float:
        n = len(self.actual)
        ssr = float(np.sum((self.actual - self.fitted) ** 2))
        sst = float(np.sum((self.actual - self.actual.mean()) ** 2))
        return 1.0 - (ssr / max(n - self.n_params, 1)) / (sst / (n - 1)) if sst > 0 else float("nan")

    def coefficient_table(self) -> pd.DataFrame:
        """Estimate, standard error (Jacobian covariance) and normal 95 % interval of each coefficient."""
        est = np.asarray(self.law.coef)
        se = np.sqrt(np.maximum(np.diag(np.asarray(self.law.cov)), 0.0))
        return pd.DataFrame(
            {
                "form": self.name,
                "term": self.law.terms,
                "estimate": est,
                "std_error_jacobian": se,
                "ci95_lower": est - 1.96 * se,
                "ci95_upper": est + 1.96 * se,
            }
        )

    def summary_text(self) -> str:
        lines = [f"{self.formula}", f"runs {len(self.actual)}, rmse_log {self.rmse_log:.4f}, adj_R2 {self.adj_r2:.4f}"]
        lines += [
            f"{row.term:22s} {row.estimate: .6g} (se {row.std_error_jacobian:.3g})"
            for row in self.coefficient_table().itertuples()
        ]
        return "\n".join(lines)


def _design(data: pd.DataFrame) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Scaled costs (rows x 3), the extra terms, their columns, and the cost scales."""
    raw = np.column_stack([np.exp(data[COST_FEATURES[t]].to_numpy(dtype=float)) for t in COST_TERMS])
    scales = np.median(raw, axis=0)
    log_eta = data["log_eta"].to_numpy(dtype=float)
    terms: list[str] = [ALPHA_ETA] if np.ptp(log_eta) > 1e-12 else []
    columns = [log_eta] if terms else []
    strategy = data["strategy"].astype(str).to_numpy()
    present = set(strategy)
    if isinstance(data["strategy"].dtype, pd.CategoricalDtype):
        ordered = [str(c) for c in data["strategy"].cat.categories if str(c) in present]
    else:
        ordered = sorted(present)
    for level in ordered[1:]:
        terms.append(f"{STRATEGY_PREFIX}{level}]")
        columns.append((strategy == level).astype(float))
    extra = np.column_stack(columns) if columns else np.empty((len(data), 0))
    return raw / scales, terms, extra, scales


def _solve(residuals: Any, jacobian: Any, starts: list[np.ndarray], lower: np.ndarray) -> np.ndarray:
    """The best optimum of bounded least squares from each start."""
    best = None
    for x0 in starts:
        result = least_squares(residuals, x0, jac=jacobian, bounds=(lower, np.inf), method="trf", x_scale="jac")
        if best is None or result.cost < best.cost:
            best = result
    assert best is not None
    return np.asarray(best.x)


def fit_roofline_eff(data: pd.DataFrame, name: str = ROOFLINE_EFF) -> RooflineFormFit:
    """Fit the roofline x efficiency law on ``data`` (features of :func:`fit.features.feature_frame`).

    With more than :data:`START_ROWS` runs the starts are tried on an evenly spaced
    subset of that many, and the best of them is polished on every run.
    """
    costs, extra_terms, extra, scales = _design(data)
    y = data["log_E"].to_numpy(dtype=float)
    e_scale = float(np.exp(np.median(y)))
    target = y - np.log(e_scale)
    k = costs.shape[1]

    def problem(rows: np.ndarray) -> tuple[Any, Any]:
        def residuals(theta: np.ndarray) -> np.ndarray:
            return np.log(np.maximum(costs[rows] @ theta[:k], 1e-300)) + extra[rows] @ theta[k:] - target[rows]

        def jacobian(theta: np.ndarray) -> np.ndarray:
            total = np.maximum(costs[rows] @ theta[:k], 1e-300)
            return np.column_stack([costs[rows] / total[:, None], extra[rows]])

        return residuals, jacobian

    lower = np.r_[np.zeros(k), np.full(extra.shape[1], -np.inf)]
    starts = [np.r_[s, np.zeros(extra.shape[1])] for s in STARTS]
    every = np.arange(len(y))
    if len(y) > START_ROWS:
        starts = [_solve(*problem(every[:: len(y) // START_ROWS + 1]), starts, lower)]
    residuals, jacobian = problem(every)
    theta = _solve(residuals, jacobian, starts, lower)
    return _as_form_fit(name, theta, jacobian(theta), residuals(theta), scales, e_scale, extra_terms, y)


def _as_form_fit(
    name: str,
    theta: np.ndarray,
    jac: np.ndarray,
    resid: np.ndarray,
    scales: np.ndarray,
    e_scale: float,
    extra_terms: list[str],
    y: np.ndarray,
) -> RooflineFormFit:
    """The optimum in physical units, with its Jacobian covariance."""
    n, p = jac.shape
    df_resid = max(n - p, 1)
    resid_var = float(np.sum(resid**2) / df_resid)
    cov_scaled = resid_var * np.linalg.pinv(jac.T @ jac)
    to_physical = np.r_[e_scale / scales, np.ones(len(extra_terms))]
    coef = theta * to_physical
    cov = cov_scaled * np.outer(to_physical, to_physical)
    law = RooflineLaw(
        FORMULA, [*COST_TERMS, *extra_terms], [float(v) for v in coef], cov.tolist(), resid_var, float(df_resid)
    )
    return RooflineFormFit(name, FORMULA, law, [], y + resid, y)
