"""The law's features of arrays of configurations, all natural logs.

The paper's proxies:

- ``log_C``   log proxy_flops of the job (FLOPs)
- ``log_M``   log proxy_mem_traffic of the job (activation elements)
- ``log_T``   log tokens of the job (batch_size * seq_len * num_steps)
- ``log_steps`` log num_steps (optimizer steps)
- ``log_eta`` log hardware efficiency S(N)/N (dimensionless)
- ``log_N``   log num_devices
- ``strategy`` the strategy name (categorical)

The complete proxies (what the paper's leave out, :mod:`mlflow_roofline.core.proxies`), and
the job's kind:

- ``log_C_all`` log (proxy_flops + proxy_flops_head): the vocabulary head included (FLOPs)
- ``log_M_all`` log (proxy_mem_traffic x :data:`~mlflow_roofline.core.proxies.MEM_BYTES_PER_ELEMENT`
  + proxy_opt_traffic): activations and the optimizer's state (bytes)
- ``arch`` ``encoder`` or ``decoder``; ``peft`` ``none`` or ``lora``; ``grad_checkpointing``
  ``false`` or ``true`` (categoricals, as text)

What the roofline forms in the complete proxies charge beside FLOPs and bytes
(:mod:`law.roofline_efficiency`):

- ``log_C_narrow``     log (C_all / w), w the matrix width a device multiplies (``hidden_size``, over N
  under tp): a GEMM's achieved FLOP/s falls as ``w / (w + w_half)`` on narrow matrices (tile
  padding, wave quantisation, the K loop's fixed cost), so its time is ``C/peak`` plus a part
  proportional to ``C / w`` (FLOPs per element of width)
- ``log_device_steps`` log (num_steps x N): a fixed cost per optimizer step on every device (the host's
  part of a step: data loading, the loss read back, the optimizer's launches), device-steps
- ``log_layer_steps``  log (num_layers x num_steps x N): kernel launches, a fixed cost per layer and step
  on every device, layer-steps
- ``log_C_tensor``, ``log_C_vector`` the FLOPs of ``log_C_all`` on the tensor cores and on the vector FP32
  units (``fp32``, :data:`~core.gpu_datasheets.VECTOR_PRECISIONS`): log 0 = -inf where a run has none.
  Without a FLOPs scale (below) every FLOP is on the tensor path's feature.

The precision (:attr:`~law.fitted.FittedLaw.flops_scale`): where a one-GPU law was fitted on runs at
precisions of different peaks, the FLOPs features (:data:`SCALED_FLOPS_FEATURES`) are of the FLOPs
times each row's scale (the GPU's peak at the law's reference precision over its peak at the row's: the FLOPs counted in
time at one peak), ``log_C_tensor`` and ``log_C_vector`` split them by each row's precision (so that a
roofline law gives the two datapaths their own energy per FLOP: the FP32 units' is not the tensor cores'
times the peaks' ratio), and ``log_flops_scale`` is that log scale (absent elsewhere): a law that reads the
FLOPs unscaled (the pooled forms, which see each run's peak through its covariates) subtracts it.

A configuration that does not say its kind (every run and model logged before the kind params
existed) is the paper's: an encoder with V = 30,522, every weight trained, no checkpointing.

The fit and the served model both call :func:`law_features`, so a law sees the same
features at prediction time as at fit time.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mlflow_roofline.core import job_table
from mlflow_roofline.core.gpu_datasheets import VECTOR_PRECISIONS
from mlflow_roofline.core.job_table import JobColumn
from mlflow_roofline.core.membership import FEW_ROWS
from mlflow_roofline.core.proxies import (
    MEM_BYTES_PER_ELEMENT,
    flops_head,
    opt_traffic,
    proxy_flops,
    proxy_mem_traffic,
    trainable_params,
)

FLOPS_SCALE = "flops_scale"
"""Each row's FLOPs scale at its precision (:attr:`law.fitted.FittedLaw.flops_scale`), as a run frame's
column and a served job's array; :func:`law_features` takes it."""
LOG_FLOPS_SCALE = "log_flops_scale"
"""The feature holding each row's log FLOPs scale at its precision (absent where unscaled)."""
SCALED_FLOPS_FEATURES: tuple[str, ...] = ("log_C", "log_C_all", "log_C_narrow", "log_C_tensor", "log_C_vector")
"""The features :data:`LOG_FLOPS_SCALE` is added to."""
KIND_FEATURES: tuple[str, ...] = ("arch", "peft", "grad_checkpointing")
"""The categorical features of a job's kind the laws read, each with its default level first (:data:`KIND_LEVELS`)."""
BOOL_LEVELS: tuple[str, str] = ("false", "true")
"""A flag column's levels as the law's categoricals hold them."""
KIND_LEVELS: dict[str, tuple[str, ...]] = {
    name: BOOL_LEVELS if job_table.column(name).type == "bool" else job_table.levels(name) for name in KIND_FEATURES
}
"""Each kind feature's levels, the default (the paper's: reference level of the law's dummy) first."""
KIND_INDICATORS: dict[str, tuple[str, str]] = {
    f"{name}_{levels[1]}": (name, levels[1]) for name, levels in KIND_LEVELS.items()
}
"""``arch_decoder``, ``peft_lora``, ``grad_checkpointing_true``: 1.0 where a job is not the paper's kind,
by feature and level; their [min, max] over the fitted runs tell which kinds a law has seen."""
KIND_COLUMNS: tuple[JobColumn, ...] = tuple(c for c in job_table.JOB_COLUMNS if c.group == "kind" and c.request)
"""The job table's optional request columns (precision, arch, vocab_size, ...), deciding columns first."""


def kind_indicators(features: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Each of :data:`KIND_INDICATORS` as a 0/1 float array, from the kind features (text levels) of rows."""
    return {
        key: (np.asarray(features[name], dtype=object) == level).astype(float)
        for key, (name, level) in KIND_INDICATORS.items()
    }


def _flags(values: np.ndarray) -> np.ndarray:
    """A flag column as bools: booleans as they are, words (as a table may hold them) true only for ``true``."""
    flags = np.asarray(values)
    if flags.dtype.kind in "OUS":
        flags = np.array([str(v).strip().lower() == "true" for v in flags], dtype=bool)
    return flags.astype(bool)


def _defaults(entry: JobColumn, decided_by: np.ndarray) -> np.ndarray:
    """A ``default_by`` column's default in each row, by the level of the column deciding it (its first level's
    where the level is unknown: the rules refuse that row later)."""
    by_level = job_table.defaults_by_level(entry.name)
    fallback = float(next(iter(by_level.values())))
    levels = np.asarray(decided_by, dtype=object)
    if len(levels) <= FEW_ROWS:  # a served request's few rows: a lookup each, not a numpy call per level
        return np.array([by_level.get(v, fallback) if isinstance(v, str) else fallback for v in levels], dtype=float)
    return np.select([levels == level for level in by_level], [float(v) for v in by_level.values()], fallback)


def kind_columns(n_rows: int, given: Mapping[str, np.ndarray | None] | None = None) -> dict[str, np.ndarray]:
    """Each kind column of the job table as an array of ``n_rows``: as ``given``, defaults where not given
    (absent or None) or missing (NaN in an integer column).

    Text columns are object arrays, integers float64 (``vocab_size`` defaults by arch, ``lora_rank`` by
    peft, as the job table says), flags bool arrays. Values are taken as given (validation is the
    caller's: the run puller, the served model's input check).
    """
    given = given or {}
    out: dict[str, np.ndarray] = {}
    for entry in KIND_COLUMNS:
        values = given.get(entry.name)
        if entry.type == "text":
            out[entry.name] = (
                np.full(n_rows, entry.default, dtype=object) if values is None else np.asarray(values, dtype=object)
            )
        elif entry.type == "bool":
            out[entry.name] = np.full(n_rows, bool(entry.default)) if values is None else _flags(values)
        else:
            numbers = np.full(n_rows, np.nan) if values is None else np.array(values, dtype=float)
            missing = np.isnan(numbers)
            if missing.any():  # the defaults only where some row needs them (each costs a few numpy calls)
                default = (
                    _defaults(entry, out[entry.default_by[0]])
                    if entry.default_by is not None
                    else np.full(n_rows, float(entry.default))  # type: ignore[arg-type] # an int column's default
                )
                numbers = np.where(missing, default, numbers)
            out[entry.name] = numbers
    return out


def law_features(
    *,
    num_layers: np.ndarray,
    hidden_size: np.ndarray,
    seq_len: np.ndarray,
    batch_size: np.ndarray,
    num_steps: np.ndarray,
    num_devices: np.ndarray,
    speedup: np.ndarray,
    strategy: np.ndarray,
    ffn_size: np.ndarray | None = None,
    flops_scale: np.ndarray | None = None,
    **kind: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """The law's features for arrays of configurations (one entry per row).

    ``ffn_size`` None: 4 x hidden_size (the paper's and BERT's ratio); ``flops_scale``: each row's FLOPs
    scale at its precision (module docstring; None: 1); ``kind``: the job table's kind columns given
    (``arch``, ``vocab_size``...), the others their defaults (:func:`kind_columns`). The fit and the
    served model both call this, so a law sees the same features at prediction time as at fit time.
    """
    layers, hidden, seq, batch, steps = (
        np.asarray(v, dtype=float) for v in (num_layers, hidden_size, seq_len, batch_size, num_steps)
    )
    ffn = 4.0 * hidden if ffn_size is None else np.asarray(ffn_size, dtype=float)
    n = np.asarray(num_devices, dtype=float)
    strategies = np.asarray(strategy, dtype=object)
    kinds = kind_columns(len(layers), kind)
    c = proxy_flops(layers, hidden, seq, batch, steps)
    m = proxy_mem_traffic(layers, hidden, seq, batch, steps)
    eta = np.asarray(speedup, dtype=float) / n
    tokens = batch * seq * steps
    head = flops_head(hidden, kinds["vocab_size"], tokens, kinds["arch"])
    trainable = trainable_params(
        layers, hidden, ffn, seq, kinds["arch"], kinds["vocab_size"], kinds["peft"], kinds["lora_rank"]
    )
    optimizer = opt_traffic(trainable, steps, n, strategies)
    log_c_all, log_steps, log_n = np.log(c + head), np.log(steps), np.log(n)
    log_device_steps = log_steps + log_n
    features = {
        "log_C": np.log(c),
        "log_M": np.log(m),
        "log_T": np.log(tokens),
        "log_steps": log_steps,
        "log_eta": np.log(eta),
        "log_N": log_n,
        "strategy": strategies,
        "log_C_all": log_c_all,
        "log_C_tensor": log_c_all,
        "log_C_vector": np.full(len(layers), -np.inf),  # log 0: every FLOP on one path unless scaled below
        "log_C_narrow": log_c_all - np.log(hidden) + (strategies == "tp") * log_n,  # width: d, d/N under tp
        "log_device_steps": log_device_steps,
        "log_layer_steps": log_device_steps + np.log(layers),
        "log_M_all": np.log(m * MEM_BYTES_PER_ELEMENT + optimizer),
        "arch": kinds["arch"],
        "peft": kinds["peft"],
        "grad_checkpointing": np.where(kinds["grad_checkpointing"], "true", "false").astype(object),
    }
    if flops_scale is not None:  # only a GPU's law fitted across peaks: nothing more on every other request
        log_scale = np.log(np.asarray(flops_scale, dtype=float))
        vector = np.isin(kinds["precision"].astype(str), VECTOR_PRECISIONS)
        features["log_C_tensor"] = np.where(vector, -np.inf, log_c_all)
        features["log_C_vector"] = np.where(vector, log_c_all, -np.inf)
        features.update({name: features[name] + log_scale for name in SCALED_FLOPS_FEATURES})
        features[LOG_FLOPS_SCALE] = log_scale
    return features
