"""The fit's frame of law features: one row per run, logs of the proxies, energy and time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_roofline.core.schema import KIND_PARAM_NAMES, M_ENERGY_J, M_TIME_S, present_strategies
from mlflow_roofline.fit.runs.precisions import PRECISION, run_precisions
from mlflow_roofline.law.log_features import FLOPS_SCALE, KIND_FEATURES, KIND_LEVELS, law_features


def feature_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The law's features of each run (:func:`law.log_features.law_features`), ``log_E``, ``log_t`` and ``log_Ld2``.

    ``log_Ld2`` is the log model size ``num_layers * hidden_size^2`` the size-extrapolation
    check splits on.

    ``frame`` needs the train params, ``speedup``, ``energy_j`` (joules), ``time_s``
    (seconds) and ``workload_hash``; the kind params (``arch``, ``vocab_size``, ``peft``,
    ``lora_rank``, ``grad_checkpointing``) where it has them, their defaults where not (a
    frame of runs logged before they existed); ``flops_scale`` where the runs' precisions differ in peak
    (:func:`fit.runs.precisions.flops_scale`). ``strategy`` becomes a categorical of the
    strategies present, ``single`` first; ``arch``, ``peft`` and ``grad_checkpointing`` categoricals of
    the levels present, the paper's default first (the reference level of a law's dummy).
    """
    kind = {name: frame[name].to_numpy() for name in KIND_PARAM_NAMES if name in frame}
    kind[PRECISION] = run_precisions(frame)  # the job table's default where a run lacks it, as its FLOPs scale reads it
    feats = law_features(
        num_layers=frame["num_layers"].to_numpy(),
        hidden_size=frame["hidden_size"].to_numpy(),
        seq_len=frame["seq_len"].to_numpy(),
        batch_size=frame["batch_size"].to_numpy(),
        num_steps=frame["num_steps"].to_numpy(),
        num_devices=frame["num_devices"].to_numpy(),
        speedup=frame["speedup"].to_numpy(),
        strategy=frame["strategy"].to_numpy(),
        ffn_size=frame["ffn_size"].to_numpy() if "ffn_size" in frame else None,
        flops_scale=frame[FLOPS_SCALE].to_numpy(dtype=float) if FLOPS_SCALE in frame else None,
        **kind,
    )
    categorical = ("strategy", *KIND_FEATURES)
    out = pd.DataFrame({k: v for k, v in feats.items() if k not in categorical}, index=frame.index)
    out["strategy"] = pd.Categorical(frame["strategy"], categories=present_strategies(frame["strategy"]))
    for name in KIND_FEATURES:
        present = set(feats[name])
        out[name] = pd.Categorical(feats[name], categories=[lv for lv in KIND_LEVELS[name] if lv in present])
    out["log_E"] = np.log(frame[M_ENERGY_J].to_numpy(dtype=float))
    out["log_t"] = np.log(frame[M_TIME_S].to_numpy(dtype=float))
    out["log_Ld2"] = np.log(frame["num_layers"].to_numpy(dtype=float) * frame["hidden_size"].to_numpy(dtype=float) ** 2)
    out["workload_hash"] = frame["workload_hash"].to_numpy()
    if "hardware" in frame:
        out["hardware"] = frame["hardware"].to_numpy()
    return out
