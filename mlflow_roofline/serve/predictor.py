"""Energy and time predictions, and strategy recommendations, from a :class:`FittedLaw`.

Pure numpy over whole columns: the served pyfunc model and the ``predict`` command both
call :func:`predict_frame` and :func:`recommend_frame`. Every row is validated first; a
bad one raises :class:`mlflow.exceptions.MlflowException` with ``INVALID_PARAMETER_VALUE``
(the scoring server answers HTTP 400) and a message naming the field and the row.

Units: energies in joules (``energy_kwh`` in kilowatt-hours), times in seconds, speedup
and efficiency dimensionless. ``energy_j`` and ``time_s`` are the exponentials of the
laws' log-space means, i.e. median predictions; ``energy_j_lower``/``energy_j_upper`` are
the 95 % prediction interval of a single new run, transformed to joules.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from mlflow_roofline.core.config import INT_FIELDS
from mlflow_roofline.law.fitted import JOULES_PER_KWH, FittedLaw, law_features
from mlflow_roofline.core.schema import DATA_PARALLEL_STRATEGIES, STRATEGIES

SIZE_COLUMNS: tuple[str, ...] = tuple(f for f in INT_FIELDS if f not in ("warmup_steps", "num_devices"))
"""Integer model inputs that describe the job (every one must be >= 1)."""

INPUT_COLUMNS: tuple[str, ...] = SIZE_COLUMNS + ("strategy", "num_devices")
"""Required model inputs in predict mode (DESIGN.md); ``speedup`` is optional."""

SPEEDUP_COLUMN = "speedup"

PREDICT_OUTPUT_COLUMNS: tuple[str, ...] = (
    "energy_j",
    "energy_j_lower",
    "energy_j_upper",
    "energy_kwh",
    "time_s",
    "speedup",
    "eta",
    "extrapolated",
)

MODES: tuple[str, ...] = ("predict", "recommend")
OBJECTIVES: tuple[str, ...] = ("energy", "time", "edp")
DEFAULT_MODE = "predict"
DEFAULT_OBJECTIVE = "energy"
DEFAULT_MAX_DEVICES = 8
MAX_DEVICES_LIMIT = 1024
MAX_EXACT_INT = 2**53  # the largest integer a float64 holds exactly

_RECOMMEND_CHUNK = 250_000  # rows x candidates evaluated at once (bounds memory)


def invalid(field: str, rule: str, rows: np.ndarray | None = None) -> MlflowException:
    """The 400-mapped error naming ``field`` (and the first offending row, 0-based)."""
    where = ""
    if rows is not None and len(rows):
        where = f" (row {int(rows[0])}" + (f" and {len(rows) - 1} more)" if len(rows) > 1 else ")")
    return MlflowException(f"{field}{where}: {rule}", error_code=INVALID_PARAMETER_VALUE)


def show(value: object) -> str:
    """A value as a user wrote it: 12 not 12.0, 'fsdp' quoted (nan for a missing number)."""
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, np.integer):
        return str(int(value))
    return repr(value)


def check_params(mode: object, max_devices: object, objective: object) -> tuple[str, int, str]:
    """Validate the inference params; returns them typed.

    Raises:
        MlflowException: INVALID_PARAMETER_VALUE naming the param.
    """
    if mode not in MODES:
        raise invalid("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    if objective not in OBJECTIVES:
        raise invalid("objective", f"must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if isinstance(max_devices, bool) or not isinstance(max_devices, (int, np.integer)):
        raise invalid("max_devices", f"must be an integer, got {max_devices!r}")
    if not 1 <= int(max_devices) <= MAX_DEVICES_LIMIT:
        raise invalid("max_devices", f"must be between 1 and {MAX_DEVICES_LIMIT}, got {max_devices}")
    return str(mode), int(max_devices), str(objective)


# ---------------------------------------------------------------------------------------
# Column validation


def _numeric_column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """The column as float64 (NaN where missing); raises if any value is not a number."""
    column = frame[name]
    if pd.api.types.is_bool_dtype(column.dtype):
        raise invalid(name, f"must be a number, got {show(column.iloc[0])}", np.arange(len(column)))
    if pd.api.types.is_numeric_dtype(column.dtype) and column.dtype.kind != "c":
        return column.to_numpy(dtype=float, na_value=np.nan, copy=True)
    values = column.to_numpy(dtype=object)
    is_number = np.fromiter(
        (
            (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)))
            or v is None
            or v is pd.NA
            for v in values
        ),
        dtype=bool,
        count=len(values),
    )
    if not is_number.all():
        bad = np.flatnonzero(~is_number)
        raise invalid(name, f"must be a number, got {show(values[bad[0]])}", bad)
    return np.array([_as_float(v) for v in values], dtype=float)


def _as_float(value: object) -> float:
    """A number (or None/NA) as a float; Python ints beyond float range become +-inf."""
    if value is None or value is pd.NA:
        return np.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")  # type: ignore[operator]


def _integer_column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """A positive-integer column as float64 (exact up to 2**53)."""
    values = _numeric_column(frame, name)
    checks = (
        (np.isnan(values), "is missing; expected a positive integer"),
        (~np.isfinite(values), "must be a finite integer"),
        (values != np.round(values), "must be an integer"),
        (values < 1, "must be a positive integer"),
        (values > MAX_EXACT_INT, f"must be at most 2**53 = {MAX_EXACT_INT}"),
    )
    for bad, rule in checks:
        if bad.any():
            rows = np.flatnonzero(bad)
            raise invalid(name, f"{rule}, got {show(values[rows[0]])}", rows)
    return values


def _require(frame: pd.DataFrame, columns: tuple[str, ...]) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise invalid("model_input", f"must be a table (pandas DataFrame), got {type(frame).__name__}")
    for name in columns:
        if name not in frame.columns:
            raise invalid(name, f"missing column; the model needs {', '.join(columns)}")
    if len(frame) == 0:
        raise invalid("model_input", "has no rows")


def _integer_columns(frame: pd.DataFrame, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Several positive-integer columns at once (one block conversion when all are plain numbers)."""
    raw = [frame[name].to_numpy() for name in names]
    if all(values.dtype.kind in "iu" for values in raw):  # the common case: plain integers
        block = np.stack(raw).astype(float)
        if block.min() >= 1 and block.max() <= MAX_EXACT_INT:
            return dict(zip(names, block))
    return {name: _integer_column(frame, name) for name in names}


def _sizes(frame: pd.DataFrame, extra: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    sizes = _integer_columns(frame, SIZE_COLUMNS + extra)
    bad = np.flatnonzero(np.fmod(sizes["hidden_size"], sizes["num_heads"]) != 0)
    if len(bad):
        i = bad[0]
        raise invalid(
            "hidden_size",
            f"must be divisible by num_heads ({sizes['hidden_size'][i]:.0f} % {sizes['num_heads'][i]:.0f} != 0)",
            bad,
        )
    return sizes


def _strategies(frame: pd.DataFrame, law: FittedLaw) -> np.ndarray:
    values = frame["strategy"].to_numpy(dtype=object)
    unknown = np.flatnonzero(~np.isin(values, np.array(STRATEGIES, dtype=object)))
    if len(unknown):
        raise invalid(
            "strategy", f"must be one of {', '.join(STRATEGIES)}, got {show(values[unknown[0]])}", unknown
        )
    unfitted = np.flatnonzero(~np.isin(values, np.array(law.strategies, dtype=object)))
    if len(unfitted):
        raise invalid(
            "strategy",
            f"the law was fitted on {', '.join(law.strategies)} only, got {show(values[unfitted[0]])}",
            unfitted,
        )
    return values


def _check_devices(sizes: Mapping[str, np.ndarray], strategy: np.ndarray, n: np.ndarray) -> None:
    """The rules of issue 3 between strategy and device count (as TrainConfig.validate)."""
    single = strategy == "single"
    tp = strategy == "tp"
    dp = np.isin(strategy, np.array(DATA_PARALLEL_STRATEGIES, dtype=object))
    rules = (
        ("num_devices", single & (n != 1), lambda i: f"must be 1 under strategy single, got {n[i]:.0f}"),
        (
            "num_devices",
            ~single & (n < 2),
            lambda i: f"must be at least 2 under strategy {strategy[i]}, got {n[i]:.0f}",
        ),
        (
            "num_heads",
            tp & (np.fmod(sizes["num_heads"], n) != 0),
            lambda i: f"must be divisible by num_devices under tp ({sizes['num_heads'][i]:.0f} % {n[i]:.0f} != 0)",
        ),
        (
            "ffn_size",
            tp & (np.fmod(sizes["ffn_size"], n) != 0),
            lambda i: f"must be divisible by num_devices under tp ({sizes['ffn_size'][i]:.0f} % {n[i]:.0f} != 0)",
        ),
        (
            "batch_size",
            dp & (np.fmod(sizes["batch_size"], n) != 0),
            lambda i: f"must be divisible by num_devices under {strategy[i]} "
            f"({sizes['batch_size'][i]:.0f} % {n[i]:.0f} != 0)",
        ),
    )
    for field, bad, rule in rules:
        if bad.any():
            rows = np.flatnonzero(bad)
            raise invalid(field, rule(rows[0]), rows)


def _measured_speedup(frame: pd.DataFrame, strategy: np.ndarray) -> np.ndarray:
    """The optional measured ``speedup`` column (NaN where absent: use the law)."""
    if SPEEDUP_COLUMN not in frame.columns:
        return np.full(len(frame), np.nan)
    speedup = _numeric_column(frame, SPEEDUP_COLUMN)
    given = ~np.isnan(speedup)
    bad = np.flatnonzero(given & (~np.isfinite(speedup) | (speedup <= 0)))
    if len(bad):
        raise invalid(SPEEDUP_COLUMN, f"must be a positive finite number, got {show(speedup[bad[0]])}", bad)
    bad = np.flatnonzero(given & (strategy == "single") & (speedup != 1.0))
    if len(bad):
        raise invalid(SPEEDUP_COLUMN, f"must be 1 under strategy single, got {show(speedup[bad[0]])}", bad)
    return speedup


# ---------------------------------------------------------------------------------------
# Evaluation


def _law_speedup(law: FittedLaw, strategy: np.ndarray, n: np.ndarray) -> np.ndarray:
    """S(N) from each strategy's speedup law (one vectorised call per strategy)."""
    speedup = np.full(len(n), np.nan)
    for name, speedup_law in law.speedup_laws.items():
        mask = strategy == name
        if mask.any():
            speedup[mask] = speedup_law(n[mask])
    bad = np.flatnonzero(~np.isfinite(speedup) | (speedup <= 0))
    if len(bad):
        i = bad[0]
        raise invalid(
            "num_devices",
            f"the fitted {strategy[i]} speedup law gives no positive speedup at {n[i]:.0f} devices",
            bad,
        )
    return speedup


def _evaluate(
    law: FittedLaw, sizes: Mapping[str, np.ndarray], strategy: np.ndarray, n: np.ndarray, speedup: np.ndarray
) -> dict[str, np.ndarray]:
    """Energy (with interval), time, speedup, eta and the extrapolation flag of each row."""
    features = law_features(
        num_layers=sizes["num_layers"],
        hidden_size=sizes["hidden_size"],
        seq_len=sizes["seq_len"],
        batch_size=sizes["batch_size"],
        num_steps=sizes["num_steps"],
        num_devices=n,
        speedup=speedup,
        strategy=strategy,
    )
    log_e, log_e_lo, log_e_hi = law.energy_law.predict(features)
    log_t1 = law.time_law.mean(features)
    with np.errstate(over="ignore"):
        energy, lower, upper = np.exp(log_e), np.exp(log_e_lo), np.exp(log_e_hi)
        time_s = np.exp(log_t1) / speedup
    eta = speedup / n
    known = {**sizes, "num_devices": n, "speedup": speedup, "eta": eta, **features}
    extrapolated = np.zeros(len(n), dtype=bool)
    for key, (lo, hi) in law.ranges.items():
        values = known.get(key)
        if values is None or isinstance(values, np.ndarray) and values.dtype == object:
            continue
        tol = 1e-9 * max(1.0, abs(lo), abs(hi))
        extrapolated |= (values < lo - tol) | (values > hi + tol)
    return {
        "energy_j": energy,
        "energy_j_lower": lower,
        "energy_j_upper": upper,
        "energy_kwh": energy / JOULES_PER_KWH,
        "time_s": time_s,
        "speedup": speedup,
        "eta": eta,
        "extrapolated": extrapolated,
    }


def _check_finite(out: Mapping[str, np.ndarray], rows: np.ndarray | None = None) -> None:
    finite = np.isfinite(out["energy_j_upper"]) & (out["energy_j_lower"] > 0) & np.isfinite(out["time_s"])
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise invalid(
            "model_input",
            "the predicted energy or time overflows float64: the configuration lies far "
            "outside the ranges the law was fitted on",
            bad if rows is None else rows[bad],
        )


def predict_frame(law: FittedLaw, frame: pd.DataFrame) -> pd.DataFrame:
    """Predict each row's energy, interval, time, speedup and efficiency.

    Args:
        law: the fitted law.
        frame: one row per job, with :data:`INPUT_COLUMNS` and optionally ``speedup``
            (a measured S(N); NaN or absent means: use the strategy's speedup law).

    Returns:
        A frame with :data:`PREDICT_OUTPUT_COLUMNS`, one row per input row.

    Raises:
        MlflowException: INVALID_PARAMETER_VALUE naming the field and row of bad input.
    """
    _require(frame, INPUT_COLUMNS)
    sizes = _sizes(frame, ("num_devices",))
    n = sizes.pop("num_devices")
    strategy = _strategies(frame, law)
    _check_devices(sizes, strategy, n)
    speedup = _measured_speedup(frame, strategy)
    use_law = np.isnan(speedup)
    if use_law.any():
        speedup[use_law] = _law_speedup(law, strategy[use_law], n[use_law])
    out = _evaluate(law, sizes, strategy, n, speedup)
    _check_finite(out)
    return _as_frame(out)


def _as_frame(out: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The predict outputs as a frame, in column order, without copying the arrays."""
    return pd.DataFrame({c: out[c] for c in PREDICT_OUTPUT_COLUMNS}, copy=False)


def candidate_grid(law: FittedLaw, max_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (strategy, N) the law can evaluate with at most ``max_devices`` devices.

    ``single`` with N = 1; every other strategy with 2 <= N <= max_devices. Row-specific
    divisibility (tp: heads and ffn; ddp/fsdp: batch) is applied in :func:`recommend_frame`.
    """
    strategies: list[str] = []
    devices: list[int] = []
    for name in law.strategies:
        counts = [1] if name == "single" else list(range(2, max_devices + 1))
        strategies += [name] * len(counts)
        devices += counts
    return np.array(strategies, dtype=object), np.array(devices, dtype=float)


def _valid_candidates(sizes: Mapping[str, np.ndarray], strategy: np.ndarray, n: np.ndarray) -> np.ndarray:
    tp = strategy == "tp"
    dp = np.isin(strategy, np.array(DATA_PARALLEL_STRATEGIES, dtype=object))
    heads_ok = np.fmod(sizes["num_heads"], n) == 0
    ffn_ok = np.fmod(sizes["ffn_size"], n) == 0
    batch_ok = np.fmod(sizes["batch_size"], n) == 0
    return np.where(tp, heads_ok & ffn_ok, np.where(dp, batch_ok, True))


def recommend_frame(
    law: FittedLaw, frame: pd.DataFrame, max_devices: int = DEFAULT_MAX_DEVICES, objective: str = DEFAULT_OBJECTIVE
) -> pd.DataFrame:
    """For each row's job, the best strategy and device count for ``objective``.

    The row's own ``strategy``, ``num_devices`` and ``speedup`` are ignored; every valid
    (strategy, N <= max_devices) the law knows is evaluated with the speedup laws.

    Returns:
        One row per input row: the chosen ``strategy``, ``num_devices`` and its
        :data:`PREDICT_OUTPUT_COLUMNS`, the ``objective``, the number of ``candidates``
        evaluated, and the energy-optimal and time-optimal choices side by side
        (``energy_optimal_*``, ``time_optimal_*``: strategy, num_devices, energy_j, time_s).

    Raises:
        MlflowException: INVALID_PARAMETER_VALUE for bad rows or params.
    """
    _, max_devices, objective = check_params("recommend", max_devices, objective)
    _require(frame, SIZE_COLUMNS)
    sizes = _sizes(frame)
    cand_strategy, cand_n = candidate_grid(law, max_devices)
    n_rows, n_cand = len(frame), len(cand_n)
    if n_cand == 0:
        raise invalid("max_devices", f"no strategy the law knows ({', '.join(law.strategies)}) runs on {max_devices} device(s)")
    chunk = max(1, _RECOMMEND_CHUNK // n_cand)
    parts = [
        _recommend_rows(law, {k: v[start : start + chunk] for k, v in sizes.items()}, cand_strategy, cand_n, objective, start)
        for start in range(0, n_rows, chunk)
    ]
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def _recommend_rows(
    law: FittedLaw,
    sizes: Mapping[str, np.ndarray],
    cand_strategy: np.ndarray,
    cand_n: np.ndarray,
    objective: str,
    first_row: int,
) -> pd.DataFrame:
    n_rows, n_cand = len(sizes["num_layers"]), len(cand_n)
    grid_sizes = {k: np.repeat(v, n_cand) for k, v in sizes.items()}
    strategy = np.tile(cand_strategy, n_rows)
    n = np.tile(cand_n, n_rows)
    valid = _valid_candidates(grid_sizes, strategy, n).reshape(n_rows, n_cand)
    none_valid = np.flatnonzero(~valid.any(axis=1))
    if len(none_valid):
        raise invalid(
            "max_devices",
            f"no valid configuration of {', '.join(np.unique(cand_strategy))} with at most "
            f"{int(cand_n.max())} devices divides this row's heads, ffn and batch",
            none_valid + first_row,
        )
    speedup = _law_speedup(law, strategy, n)
    out = _evaluate(law, grid_sizes, strategy, n, speedup)
    _check_finite(out, np.repeat(np.arange(n_rows) + first_row, n_cand))
    grid = {k: v.reshape(n_rows, n_cand) for k, v in out.items()}
    scores = {"energy": grid["energy_j"], "time": grid["time_s"], "edp": grid["energy_j"] * grid["time_s"]}

    def best(score: np.ndarray) -> np.ndarray:
        return np.argmin(np.where(valid, score, np.inf), axis=1)

    rows = np.arange(n_rows)
    pick, pick_e, pick_t = best(scores[objective]), best(scores["energy"]), best(scores["time"])
    result: dict[str, np.ndarray] = {
        "strategy": cand_strategy[pick],
        "num_devices": cand_n[pick].astype(np.int64),
    }
    result.update({k: grid[k][rows, pick] for k in PREDICT_OUTPUT_COLUMNS})
    result["objective"] = np.full(n_rows, objective, dtype=object)
    result["candidates"] = valid.sum(axis=1).astype(np.int64)
    for prefix, choice in (("energy_optimal", pick_e), ("time_optimal", pick_t)):
        result[f"{prefix}_strategy"] = cand_strategy[choice]
        result[f"{prefix}_num_devices"] = cand_n[choice].astype(np.int64)
        result[f"{prefix}_energy_j"] = grid["energy_j"][rows, choice]
        result[f"{prefix}_time_s"] = grid["time_s"][rows, choice]
    return pd.DataFrame(result)


RECOMMEND_OUTPUT_COLUMNS: tuple[str, ...] = (
    ("strategy", "num_devices")
    + PREDICT_OUTPUT_COLUMNS
    + ("objective", "candidates")
    + tuple(
        f"{prefix}_{what}"
        for prefix in ("energy_optimal", "time_optimal")
        for what in ("strategy", "num_devices", "energy_j", "time_s")
    )
)
