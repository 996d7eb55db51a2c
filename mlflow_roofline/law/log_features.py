"""The law's features of arrays of configurations, all natural logs.

- ``log_C``   log proxy_flops of the job (FLOPs)
- ``log_M``   log proxy_mem_traffic of the job (activation elements)
- ``log_T``   log tokens of the job (batch_size * seq_len * num_steps)
- ``log_steps`` log num_steps (optimizer steps)
- ``log_eta`` log hardware efficiency S(N)/N (dimensionless)
- ``log_N``   log num_devices
- ``strategy`` the strategy name (categorical)

The fit and the served model both call :func:`law_features`, so a law sees the same
features at prediction time as at fit time.
"""

from __future__ import annotations

import numpy as np

from mlflow_roofline.core.proxies import proxy_flops, proxy_mem_traffic


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
) -> dict[str, np.ndarray]:
    """The law's features for arrays of configurations (one entry per row).

    The fit and the served model both call this, so a law sees the same features at
    prediction time as at fit time.
    """
    layers, hidden, seq, batch, steps = (
        np.asarray(v, dtype=float) for v in (num_layers, hidden_size, seq_len, batch_size, num_steps)
    )
    n = np.asarray(num_devices, dtype=float)
    c = proxy_flops(layers, hidden, seq, batch, steps)
    m = proxy_mem_traffic(layers, hidden, seq, batch, steps)
    eta = np.asarray(speedup, dtype=float) / n
    tokens = batch * seq * steps
    return {
        "log_C": np.log(c),
        "log_M": np.log(m),
        "log_T": np.log(tokens),
        "log_steps": np.log(steps),
        "log_eta": np.log(eta),
        "log_N": np.log(n),
        "strategy": np.asarray(strategy, dtype=object),
    }
