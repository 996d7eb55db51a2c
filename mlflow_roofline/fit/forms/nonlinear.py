"""What the roofline-shaped forms share: scaled design, multi-start ``least_squares`` on log residuals, covariance.

A roofline-shaped form is ``log E = log(cost(theta_cost; C, M, T)) + alpha_eta*log_eta +
psi[strategy]``. Its fit works in scaled units (each proxy divided by its median, energy
by its median) so that every cost coefficient is of order one; it runs
``scipy.optimize.least_squares`` (trf, bounded) from every start of the form and keeps
the best optimum. With more than :data:`START_ROWS` runs the starts are tried on an
evenly spaced subset of that many and the best of them is polished on every run.
``alpha_eta`` is estimated only where eta varies within a strategy (elsewhere the
strategy dummies absorb it), a ``psi`` only for the strategies present beyond the first.
A form in the complete proxies (:mod:`fit.forms.roofline_complete`) reads its costs from
other features and adds a dummy per kind level beyond the paper's, for each kind measured
at both levels (:func:`measured_kinds`).

The covariance of the coefficients is ``s^2 (J'J)^+`` at the optimum (J the Jacobian of
the log residuals, ``s^2`` their variance on ``n - p`` degrees of freedom), mapped back
to physical units; a coefficient on its bound keeps the covariance of the unconstrained
problem there (the interval is then slightly conservative).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.optimize import OptimizeResult

from mlflow_roofline.fit.forms.describe import roofline_formula
from mlflow_roofline.fit.forms.fitted_form import FittedForm, adjusted_r2
from mlflow_roofline.fit.multistart import Vector, best_of_starts
from mlflow_roofline.law.log_features import KIND_FEATURES, KIND_LEVELS
from mlflow_roofline.law.roofline_efficiency import ALPHA_ETA, COST_FEATURES, RooflineLaw, dummy_term

START_ROWS = 1000
"""Runs (rows) above which the starts are first tried on an evenly strided subset of at most this many."""
MAX_EVALUATIONS = 300
"""Residual evaluations (count) one start may spend: a start crawling along a flat ridge (the smooth
form's sharpness on its bound) stops there, at the optimum to the fourth digit, instead of after 800."""

CostModel = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``cost(theta_cost, scaled_costs)``: the scaled cost part of each row and its gradient (rows x cost params)."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class RooflineFormFit(FittedForm):
    """A roofline-shaped law fitted on all runs, with its held-out errors (:class:`fit.forms.fitted_form.FittedForm`).

    Attributes:
        law: the law as plain data.
        fitted: in-sample log E of each run (log joules).
        actual: measured log E of each run (log joules).
        refit: the form's fit function, to refit it on other runs (CV folds, the extrapolation check).
    """

    law: RooflineLaw
    fitted: np.ndarray
    actual: np.ndarray
    refit: Callable[[pd.DataFrame], RooflineFormFit] = dataclasses.field(repr=False, compare=False)

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
        return adjusted_r2(self.actual, self.fitted, len(self.actual) - self.n_params)

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

    def heldout_log_e(self, data: pd.DataFrame, held_out: np.ndarray) -> np.ndarray:
        """The form refitted on the other rows (from its own starts: nothing of the held-out rows enters)."""
        test = data.loc[held_out]
        return self.refit(data.loc[~held_out]).law.mean({c: test[c].to_numpy() for c in test.columns})

    def describe(self) -> str:
        """``(ε_c·C + ε_m·M + e_0·T) · η^a · Ψ(strategy)`` (the smooth form's k-norm) with the fitted values."""
        return roofline_formula(self.law)

    def summary_text(self) -> str:
        lines = [f"{self.formula}", f"runs {len(self.actual)}, rmse_log {self.rmse_log:.4f}, adj_R2 {self.adj_r2:.4f}"]
        lines += [
            f"{row.term:22s} {row.estimate: .6g} (se {row.std_error_jacobian:.3g})"
            for row in self.coefficient_table().itertuples()
        ]
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class ScaledDesign:
    """The runs as the solver sees them.

    Attributes:
        cost_terms: the cost coefficients estimated: those of the form's cost features that some run has (a
            finite log) and that are not a constant multiple of one listed before in every run.
        costs: each of those costs of each run (C, M, T...) divided by its median over the runs that have it
            (rows x cost terms; 0 where a run has none, as fp32's tensor-core FLOPs).
        cost_scales: those medians (FLOPs, elements or bytes, tokens...).
        extra_terms: ``alpha_eta`` and the strategy dummies estimated.
        extra: their columns (rows x extra terms).
        target: log E minus log of the median energy.
        e_scale: the median energy (joules).
        y: log E (log joules).
    """

    cost_terms: list[str]
    costs: np.ndarray
    cost_scales: np.ndarray
    extra_terms: list[str]
    extra: np.ndarray
    target: np.ndarray
    e_scale: float
    y: np.ndarray


def measured_kinds(data: pd.DataFrame) -> list[str]:
    """The kind categoricals with both levels among ``data``'s runs (none where a column is absent)."""
    return [name for name in KIND_FEATURES if name in data and data[name].nunique() > 1]


def _dummies(data: pd.DataFrame, kinds: Sequence[str]) -> tuple[list[str], list[np.ndarray]]:
    """The strategy dummies (levels present beyond the first) and each kind's (levels beyond the paper's)."""
    strategy = data["strategy"].astype(str).to_numpy()
    present = set(strategy)
    if isinstance(data["strategy"].dtype, pd.CategoricalDtype):
        ordered = [str(c) for c in data["strategy"].cat.categories if str(c) in present]
    else:
        ordered = sorted(present)
    terms = [dummy_term("strategy", level) for level in ordered[1:]]
    columns = [(strategy == level).astype(float) for level in ordered[1:]]
    for kind in kinds:
        values = data[kind].astype(str).to_numpy()
        for level in (lv for lv in KIND_LEVELS[kind][1:] if lv in set(values)):
            terms.append(dummy_term(kind, level))
            columns.append((values == level).astype(float))
    return terms, columns


def _proportional(logs: np.ndarray, other: np.ndarray) -> bool:
    """Whether two costs (logs; -inf: none in that run) are a constant multiple of each other in every run."""
    both = np.isfinite(logs) & np.isfinite(other)
    return bool(np.array_equal(np.isfinite(logs), np.isfinite(other)) and np.ptp((logs - other)[both]) <= 1e-9)


def scaled_design(
    data: pd.DataFrame,
    cost_features: Mapping[str, str] = COST_FEATURES,
    kinds: Sequence[str] = (),
    response: str = "log_E",
) -> ScaledDesign:
    """The scaled design of ``data`` (features of :func:`fit.runs.feature_frame.feature_frame`).

    ``cost_features``: the log feature of each cost term, in the order the fit estimates them (the paper's
    proxies by default); ``kinds``: the kind categoricals to give dummies (their levels beyond the paper's
    present in ``data``); ``response``: the log the costs add up to (joules by default; ``log_t``, seconds,
    for a time law).
    """
    present: dict[str, str] = {}
    for term, column in cost_features.items():  # a cost nowhere, or proportional to one kept, is not estimable
        logs = data[column].to_numpy(dtype=float)
        if np.isfinite(logs).any() and not any(
            _proportional(logs, data[kept].to_numpy(dtype=float)) for kept in present.values()
        ):
            present[term] = column
    raw = np.column_stack([np.exp(data[column].to_numpy(dtype=float)) for column in present.values()])
    scales = np.array([np.median(column[column > 0]) for column in raw.T])
    log_eta = data["log_eta"].to_numpy(dtype=float)
    strategy = data["strategy"].astype(str).to_numpy()
    # With eta constant within every strategy, the strategy dummies absorb any alpha_eta
    # (e.g. a CV fold left with one run per parallel strategy): leave it out, as OLS drops
    # a collinear column, rather than let the solver wander along it.
    varies = any(np.ptp(log_eta[strategy == level]) > 1e-12 for level in set(strategy))
    dummy_terms, dummy_columns = _dummies(data, kinds)
    terms = [ALPHA_ETA] * varies + dummy_terms
    columns = [log_eta] * varies + dummy_columns
    extra = np.column_stack(columns) if columns else np.empty((len(data), 0))
    y = data[response].to_numpy(dtype=float)
    e_scale = float(np.exp(np.median(y)))
    return ScaledDesign(list(present), raw / scales, scales, terms, extra, y - np.log(e_scale), e_scale, y)


def _best(
    residuals: Vector, jacobian: Vector, starts: Sequence[np.ndarray], bounds: tuple[np.ndarray, np.ndarray]
) -> OptimizeResult:
    """The best optimum from ``starts``, steps scaled by the Jacobian's columns, each start at most
    :data:`MAX_EVALUATIONS` evaluations."""
    return best_of_starts(residuals, jacobian, starts, bounds, x_scale="jac", max_nfev=MAX_EVALUATIONS)


def fit_log_least_squares(
    design: ScaledDesign,
    cost: CostModel,
    cost_starts: Sequence[Sequence[float]],
    cost_bounds: tuple[Sequence[float], Sequence[float]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The optimum ``theta`` (scaled cost coefficients, then the extra terms), its Jacobian and residuals."""
    k = len(cost_bounds[0])
    n_extra = design.extra.shape[1]

    def problem(rows: np.ndarray) -> tuple[Vector, Vector]:
        def residuals(theta: np.ndarray) -> np.ndarray:
            total, _ = cost(theta[:k], design.costs[rows])
            return np.log(np.maximum(total, 1e-300)) + design.extra[rows] @ theta[k:] - design.target[rows]

        def jacobian(theta: np.ndarray) -> np.ndarray:
            total, grad = cost(theta[:k], design.costs[rows])
            return np.column_stack([grad / np.maximum(total, 1e-300)[:, None], design.extra[rows]])

        return residuals, jacobian

    lower = np.r_[np.asarray(cost_bounds[0], dtype=float), np.full(n_extra, -np.inf)]
    upper = np.r_[np.asarray(cost_bounds[1], dtype=float), np.full(n_extra, np.inf)]
    starts = [np.r_[np.asarray(s, dtype=float), np.zeros(n_extra)] for s in cost_starts]
    every = np.arange(len(design.y))
    if len(every) > START_ROWS:
        subset = every[:: len(every) // START_ROWS + 1]
        starts = [_best(*problem(subset), starts, (lower, upper)).x]
    residuals, jacobian = problem(every)
    theta = np.asarray(_best(residuals, jacobian, starts, (lower, upper)).x)
    return theta, jacobian(theta), residuals(theta)


def physical_covariance(
    theta: np.ndarray, jac: np.ndarray, resid: np.ndarray, to_physical: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Coefficients and their covariance in physical units (``theta * to_physical``), residual variance, df."""
    n, p = jac.shape
    df_resid = max(n - p, 1)
    resid_var = float(np.sum(resid**2) / df_resid)
    cov_scaled = resid_var * np.linalg.pinv(jac.T @ jac)
    return theta * to_physical, cov_scaled * np.outer(to_physical, to_physical), resid_var, float(df_resid)
