"""A measurement table as the fit's run frame, without a tracking store: for benchmarks and fast tests.

``mlflow-roofline import`` turns each row of a table (the columns of docs/import.md) into a finished
run, and the fit pulls those runs back as a frame of params, hashes, proxies and measurements. This
module builds that frame directly, the job-kind columns (``arch``, ``vocab_size``, ``peft``,
``lora_rank``, ``grad_checkpointing``) where the table has them and the paper's defaults where not, as
the import does, so a benchmark or a test can refit one table many times (each GPU left out in turn)
in seconds;
``benchmarks/public_tables.py`` and ``tests/e2e/test_public_table.py`` take the real path through
the store.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import proxy_flops, proxy_mem_traffic
from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S, TRAIN_PARAM_NAMES
from mlflow_roofline.testing.roofline_generator import finish_runs


def train_params(row: dict[str, object]) -> dict[str, object]:
    """The train params a table row gives (not missing), 0 warm-up steps: what :meth:`TrainConfig.from_mapping`
    parses, as it parses an imported row's or a logged run's."""
    given = {
        name: value
        for name, value in row.items()
        if name in TRAIN_PARAM_NAMES and not (value is None or (isinstance(value, float) and np.isnan(value)))
    }
    return {**given, "warmup_steps": 0}


def runs_from_table(table: pd.DataFrame) -> pd.DataFrame:
    """The fit's frame of ``table``'s rows: each row's train params (0 warm-up steps), ``hardware``,
    hashes, the paper's proxies (``log_C``, ``log_M``), ``time_s`` (s), ``energy_j`` (J), ``energy_source``,
    the measured speedup and eta.

    Raises:
        ConfigError: naming the field of a row the config rules refuse.
    """
    rows = []
    for row in table.to_dict("records"):
        config = TrainConfig.from_mapping(train_params(row))
        config.validate()
        sizes = (config.num_layers, config.hidden_size, config.seq_len, config.batch_size, config.num_steps)
        hardware = str(row["hardware"])
        rows.append(
            {
                **config.to_params(),
                "hardware": hardware,
                "config_hash": config.config_hash(hardware),
                "workload_hash": config.workload_hash(hardware),
                "log_C": float(np.log(proxy_flops(*sizes))),
                "log_M": float(np.log(proxy_mem_traffic(*sizes))),
                M_TIME_S: float(row[M_TIME_S]),
                M_ENERGY_J: float(row[M_ENERGY_J]),
                "energy_source": str(row["energy_source"]),
            }
        )
    return finish_runs(pd.DataFrame(rows))
