"""Fit the speedup laws of :mod:`mlflow_roofline.law.speedup` to measured (N, S) points with SciPy.

Each strategy's law is fitted by bounded least squares in speedup units
(``scipy.optimize.least_squares``, several starts, the best kept); S(1) = 1 holds by
the form of every law. Bounds:

- Amdahl (ddp, fsdp): 0 <= p <= 1, 0 <= c <= 10;
- saturating exponential (tp): 0.01 <= s_max <= 1000, 0.001 <= k <= 20.

Two parameters need at least two distinct device counts above one. With a single one
(say only N = 2), the law is underdetermined and one parameter is fixed, as the fit
reports in :attr:`SpeedupFit.fixed`:

- Amdahl: ``c = 0`` (pure Amdahl) when the mean speedup is at least 1, else ``p = 0``
  (a pure communication cost explains a slowdown);
- saturating exponential: ``k = 1`` (the rate is not identified by one N).

Beside each parallel strategy's N-only law, the workload-aware ``comm_time`` law
(:mod:`law.comm_time`, fitted by :mod:`fit.comm_time_fit`) is fitted where the runs span
enough points and model shapes. Both are scored the same two ways on speedup (MAPE, %):
grouped cross-validation with a model shape's runs in one fold (``cv_mape``), and the
size extrapolation, fitted on the shapes with ``L*d^2`` up to the 75th percentile and
predicting the larger ones (``extrap_mape``). The law with the lower CV error is the
strategy's law (the N-only law on a tie or where the other could not be scored). A law
fitted mostly on runs with a per-device baseline (weak scaling) says so
(:attr:`SpeedupLaw.baseline`), so the served time is N times the per-device batch's
single-device time over S.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.core.schema import BASELINE_PER_DEVICE, BASELINE_TIME_LAW
from mlflow_roofline.fit.comm_time_fit import SHAPE_COLUMNS, fit_comm_time, fittable, job_of
from mlflow_roofline.fit.forms.cv import CV_FOLDS, workload_folds
from mlflow_roofline.fit.forms.extrapolation import EXTRAP_QUANTILE
from mlflow_roofline.fit.multistart import best_of_starts
from mlflow_roofline.law.speedup import (
    AMDAHL,
    COMM_TIME,
    CONSTANT,
    LAW_FORM_BY_STRATEGY,
    PER_DEVICE_BASELINE,
    SATURATING_EXP,
    SpeedupLaw,
    amdahl,
    saturating_exp,
)

PARAM_NAMES_BY_FORM: dict[str, tuple[str, ...]] = {AMDAHL: ("p", "c"), SATURATING_EXP: ("s_max", "k")}
BOUNDS: dict[str, dict[str, tuple[float, float]]] = {
    AMDAHL: {"p": (0.0, 1.0), "c": (0.0, 10.0)},
    SATURATING_EXP: {"s_max": (0.01, 1000.0), "k": (0.001, 20.0)},
}
STARTS: dict[str, list[dict[str, float]]] = {
    AMDAHL: [{"p": 0.9, "c": 0.01}, {"p": 0.5, "c": 0.1}, {"p": 0.99, "c": 0.0}, {"p": 0.1, "c": 1.0}],
    SATURATING_EXP: [
        {"s_max": 2.0, "k": 0.5},
        {"s_max": 8.0, "k": 0.1},
        {"s_max": 1.5, "k": 2.0},
        {"s_max": 0.5, "k": 1.0},
    ],
}
FIXED_TP_K = 1.0
_FUNCS: dict[str, Callable[..., np.ndarray]] = {AMDAHL: amdahl, SATURATING_EXP: saturating_exp}


def _amdahl_partials(n: np.ndarray, p: float, c: float) -> dict[str, np.ndarray]:
    """dS/dp and dS/dc of :func:`amdahl` at ``n`` (S = 1/D, D = (1 - p) + p/N + c (N - 1))."""
    inv_d2 = amdahl(n, p, c) ** 2
    return {"p": (1.0 - 1.0 / n) * inv_d2, "c": -(n - 1.0) * inv_d2}


def _saturating_exp_partials(n: np.ndarray, s_max: float, k: float) -> dict[str, np.ndarray]:
    """dS/ds_max and dS/dk of :func:`saturating_exp` at ``n``."""
    decay = np.exp(-k * (n - 1.0))
    return {"s_max": 1.0 - decay, "k": (s_max - 1.0) * (n - 1.0) * decay}


_PARTIALS: dict[str, Callable[..., dict[str, np.ndarray]]] = {
    AMDAHL: _amdahl_partials,
    SATURATING_EXP: _saturating_exp_partials,
}
"""Each N-only form's derivatives by parameter, the solver's Jacobian: a finite-difference one
costs two more evaluations and SciPy's bookkeeping per step, and the grouped CV refits every law
dozens of times per fit (about half of a pooled fit's speedup time)."""


@dataclasses.dataclass(frozen=True)
class SpeedupFit:
    """A fitted law and how it was obtained.

    Attributes:
        law: the strategy's law (``n_points`` measured runs, ``rmse`` in speedup units):
            the candidate with the lowest ``cv_mape``.
        fixed: parameters of the N-only law held fixed because the data cannot determine
            them, by name.
        device_counts: the distinct N (> 1) of the measured points.
        candidates: every law fitted, by form (the N-only law, and ``comm_time`` where fittable).
        cv_mape: grouped-CV MAPE of speedup (%) of each candidate, by form.
        extrap_mape: size-extrapolation MAPE of speedup (%) of each candidate, by form.
    """

    law: SpeedupLaw
    fixed: dict[str, float]
    device_counts: tuple[int, ...]
    candidates: dict[str, SpeedupLaw] = dataclasses.field(default_factory=dict)
    cv_mape: dict[str, float] = dataclasses.field(default_factory=dict)
    extrap_mape: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def underdetermined(self) -> bool:
        """True when a parameter of the chosen law had to be fixed."""
        return bool(self.fixed) and self.law.form != COMM_TIME

    def describe(self) -> str:
        """One line for people: the law, its parameters, fit quality and what was fixed."""
        params = ", ".join(f"{k}={v:.4g}" for k, v in self.law.params.items())
        text = f"{self.law.strategy}: {self.law.form}({params}), {self.law.n_points} runs, rmse {self.law.rmse:.4g}"
        if len(self.cv_mape) > 1:
            text += "; speedup CV MAPE " + ", ".join(f"{form} {mape:.1f} %" for form, mape in self.cv_mape.items())
        if self.underdetermined:
            text += (
                f"; only N={','.join(map(str, self.device_counts))} measured, so "
                + ", ".join(f"{k}={v:g}" for k, v in self.fixed.items())
                + " was fixed"
            )
        return text


def fit_speedup_law(strategy: str, num_devices: np.ndarray, speedup: np.ndarray) -> SpeedupFit:
    """Fit ``strategy``'s law form to measured speedups (dimensionless) at ``num_devices``.

    Raises:
        ValueError: no finite point with N > 1 for a parallel strategy.
    """
    form = LAW_FORM_BY_STRATEGY[strategy]
    n = np.asarray(num_devices, dtype=float)
    s = np.asarray(speedup, dtype=float)
    keep = np.isfinite(s) & np.isfinite(n) & (s > 0)
    n, s = n[keep], s[keep]
    if form == CONSTANT:
        rmse = float(np.sqrt(np.mean((s - 1.0) ** 2))) if len(s) else float("nan")
        return SpeedupFit(SpeedupLaw(strategy, CONSTANT, {}, len(s), rmse), {}, (1,) if len(s) else ())
    counts = tuple(sorted({int(v) for v in n if v > 1}))
    if not counts:
        raise ValueError(f"{strategy}: no measured speedup with num_devices > 1 to fit its law on")
    names = PARAM_NAMES_BY_FORM[form]
    fixed = _fixed_params(form, n, s) if len(counts) < 2 else {}
    free = [name for name in names if name not in fixed]
    func, partials = _FUNCS[form], _PARTIALS[form]

    def residuals(x: np.ndarray) -> np.ndarray:
        params = {**fixed, **dict(zip(free, x))}
        return func(n, **params) - s

    def jacobian(x: np.ndarray) -> np.ndarray:
        by_name = partials(n, **{**fixed, **dict(zip(free, x))})
        return np.column_stack([by_name[name] for name in free])

    lower = [BOUNDS[form][name][0] for name in free]
    upper = [BOUNDS[form][name][1] for name in free]
    starts = [np.clip([start[name] for name in free], lower, upper) for start in STARTS[form]]
    best = best_of_starts(residuals, jacobian, starts, (lower, upper))
    params = {**fixed, **{name: float(v) for name, v in zip(free, best.x)}}
    params = {name: params[name] for name in names}
    rmse = float(np.sqrt(np.mean(residuals(best.x) ** 2)))
    return SpeedupFit(SpeedupLaw(strategy, form, params, len(s), rmse), fixed, counts)


def _fixed_params(form: str, n: np.ndarray, s: np.ndarray) -> dict[str, float]:
    if form == AMDAHL:
        return {"c": 0.0} if float(np.mean(s[n > 1])) >= 1.0 else {"p": 0.0}
    return {"k": FIXED_TP_K}


def fit_speedup_laws(frame: pd.DataFrame, *, workload_aware: bool = True, seed: int = 0) -> dict[str, SpeedupFit]:
    """Fit and choose one law per strategy of ``frame`` on its runs with a measured speedup.

    ``frame`` needs ``strategy``, ``num_devices``, ``speedup`` and ``eta_source``
    (:func:`mlflow_roofline.fit.runs.measured_speedup.measure_speedup`); only ``single`` and
    ``measured`` rows are used (a measured single run at the same global or per-device
    batch). A parallel strategy without any such point is fitted on its runs whose
    baseline is the time law (``baseline`` ``time_law``), where the frame has them; else
    it gets no law. ``workload_aware=False`` fits the N-only laws alone (what the fit did
    before the ``comm_time`` law existed).
    """
    fits: dict[str, SpeedupFit] = {}
    usable = frame[frame["eta_source"].isin(["single", "measured"])]
    by_time_law = frame[frame["baseline"] == BASELINE_TIME_LAW] if "baseline" in frame else frame.iloc[:0]
    for strategy in sorted(frame["strategy"].unique()):
        rows = usable[usable["strategy"] == strategy]
        if strategy != "single" and rows.empty:
            rows = by_time_law[by_time_law["strategy"] == strategy]
        if strategy != "single" and rows.empty:
            continue
        fit = fit_speedup_law(strategy, rows["num_devices"].to_numpy(), rows["speedup"].to_numpy())
        if strategy != "single" and workload_aware:
            fit = _with_comm_time(fit, rows, seed)
        fits[strategy] = _with_baseline(fit, rows)
    return fits


def _with_baseline(fit: SpeedupFit, rows: pd.DataFrame) -> SpeedupFit:
    """``fit`` whose laws say what their speedups are relative to: ``per_device`` where most of
    ``rows`` had a per-device baseline (weak scaling), else ``global``."""
    per_device = "baseline" in rows and float((rows["baseline"] == BASELINE_PER_DEVICE).mean()) > 0.5
    if not per_device:
        return fit
    candidates = {form: dataclasses.replace(law, baseline=PER_DEVICE_BASELINE) for form, law in fit.candidates.items()}
    return dataclasses.replace(
        fit, law=dataclasses.replace(fit.law, baseline=PER_DEVICE_BASELINE), candidates=candidates
    )


def _with_comm_time(n_only: SpeedupFit, rows: pd.DataFrame, seed: int) -> SpeedupFit:
    """``n_only`` with the comm-time law fitted beside it, both scored, the better one chosen."""
    strategy = n_only.law.strategy
    rows = rows[(rows["num_devices"] > 1) & np.isfinite(rows["speedup"]) & (rows["speedup"] > 0)]
    if "t1_per_sample" not in rows or not fittable(rows):
        return n_only
    rows = rows[np.isfinite(rows["t1_per_sample"])]
    candidates = {n_only.law.form: n_only.law, COMM_TIME: fit_comm_time(strategy, rows)}
    cv = {form: _cv_mape(strategy, form, rows, seed) for form in candidates}
    extrap = {form: _extrap_mape(strategy, form, rows) for form in candidates}
    comm_wins = np.isfinite(cv[COMM_TIME]) and cv[COMM_TIME] < cv[n_only.law.form]
    law = candidates[COMM_TIME] if comm_wins else n_only.law
    return dataclasses.replace(n_only, law=law, candidates=candidates, cv_mape=cv, extrap_mape=extrap)


def _predicted(strategy: str, form: str, train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """Speedup of ``test`` rows by ``form`` fitted on ``train`` rows (NaN where it cannot be fitted)."""
    try:
        if form == COMM_TIME:
            law = fit_comm_time(strategy, train)
            return np.asarray(law(test["num_devices"].to_numpy(dtype=float), job_of(test)), dtype=float)
        law = fit_speedup_law(strategy, train["num_devices"].to_numpy(), train["speedup"].to_numpy()).law
    except ValueError:
        return np.full(len(test), np.nan)
    return np.asarray(law(test["num_devices"].to_numpy(dtype=float)), dtype=float)


def _mape(predicted: np.ndarray, actual: np.ndarray) -> float:
    if not np.isfinite(predicted).all():
        return float("nan")
    return float(100.0 * np.mean(np.abs(predicted - actual) / actual))


def _shape_groups(rows: pd.DataFrame) -> np.ndarray:
    """Each row's model shape as text, ``L/d/ff/S``, a column at a time (row-wise: seconds at 10,000 runs)."""
    text = [rows[column].astype(str).to_numpy(dtype=object) for column in SHAPE_COLUMNS]
    joined = text[0]
    for column in text[1:]:
        joined = joined + "/" + column
    return np.asarray(joined, dtype=object)


def _cv_mape(strategy: str, form: str, rows: pd.DataFrame, seed: int) -> float:
    """Grouped-CV MAPE (%) of speedup, a model shape's runs in one fold."""
    folds = workload_folds(_shape_groups(rows), CV_FOLDS, seed)
    if len(folds) < 2:
        return float("nan")
    predicted = np.empty(len(rows))
    for test in folds:
        train = np.ones(len(rows), dtype=bool)
        train[test] = False
        predicted[test] = _predicted(strategy, form, rows[train], rows.iloc[test])
    return _mape(predicted, rows["speedup"].to_numpy(dtype=float))


def _extrap_mape(strategy: str, form: str, rows: pd.DataFrame) -> float:
    """MAPE (%) of speedup on the shapes above the 75th percentile of ``L*d^2``, fitted on the rest."""
    size = rows["num_layers"].to_numpy(dtype=float) * rows["hidden_size"].to_numpy(dtype=float) ** 2
    held_out = size > np.quantile(size, EXTRAP_QUANTILE) * (1 + 1e-12)
    if not held_out.any() or held_out.all():
        return float("nan")
    predicted = _predicted(strategy, form, rows[~held_out], rows[held_out])
    return _mape(predicted, rows.loc[held_out, "speedup"].to_numpy(dtype=float))


def n_only_laws_of(fits: Mapping[str, SpeedupFit]) -> dict[str, SpeedupLaw]:
    """The N-only law fitted beside each workload-aware law, by strategy (only where one was chosen)."""
    return {
        strategy: next(law for law in fit.candidates.values() if not law.workload_aware)
        for strategy, fit in fits.items()
        if fit.law.workload_aware
    }


def laws_of(fits: Mapping[str, SpeedupFit]) -> dict[str, SpeedupLaw]:
    """The :class:`SpeedupLaw` of each fit, by strategy."""
    return {strategy: fit.law for strategy, fit in fits.items()}
