"""The law's features of served jobs: one place that maps request columns to :func:`law_features`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mlflow_roofline.law.fitted import law_features


def job_features(
    sizes: Mapping[str, np.ndarray], strategy: np.ndarray, n: np.ndarray, speedup: np.ndarray
) -> dict[str, np.ndarray]:
    """The law's features (proxy FLOPs, memory traffic, eta...) of each job.

    Args:
        sizes: the jobs' integer columns (``num_layers``, ``hidden_size``, ``seq_len``,
            ``batch_size``, ``num_steps``...), one array each.
        strategy: each job's parallel strategy.
        n: each job's device count.
        speedup: each job's speedup S(N) over one device.
    """
    return law_features(
        num_layers=sizes["num_layers"],
        hidden_size=sizes["hidden_size"],
        seq_len=sizes["seq_len"],
        batch_size=sizes["batch_size"],
        num_steps=sizes["num_steps"],
        num_devices=n,
        speedup=speedup,
        strategy=strategy,
    )
