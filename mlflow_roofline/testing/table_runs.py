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

from typing import Any

import numpy as np
import pandas as pd

from mlflow_roofline.core import job_table
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.job_table import AUTO
from mlflow_roofline.core.proxies import proxy_flops, proxy_mem_traffic
from mlflow_roofline.core.schema import KIND_PARAM_NAMES, M_ENERGY_J, M_TIME_S
from mlflow_roofline.testing.roofline_generator import finish_runs


def kind_fields(row: dict[str, object]) -> dict[str, Any]:
    """The job-kind fields of a table row as :class:`TrainConfig` takes them: the columns the row gives (not
    missing), integers as integers (``auto`` kept), flags from ``true``/``false`` or booleans."""
    out: dict[str, Any] = {}  # a field's own type (int, str or bool), by the job table's column type
    for name in KIND_PARAM_NAMES:
        value = row.get(name)
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        kind = job_table.column(name).type
        if kind == "int":
            out[name] = AUTO if str(value).strip().lower() == AUTO else int(float(str(value)))
        elif kind == "bool":
            out[name] = value if isinstance(value, bool) else str(value).strip().lower() == "true"
        else:
            out[name] = str(value)
    return out


def runs_from_table(table: pd.DataFrame) -> pd.DataFrame:
    """The fit's frame of ``table``'s rows: each row's train params (0 warm-up steps), ``hardware``,
    hashes, the paper's proxies (``log_C``, ``log_M``), ``time_s`` (s), ``energy_j`` (J), ``energy_source``,
    the measured speedup and eta.

    Raises:
        ConfigError: naming the field of a row the config rules refuse.
    """
    rows = []
    for row in table.to_dict("records"):
        config = TrainConfig(
            num_layers=int(row["num_layers"]),
            hidden_size=int(row["hidden_size"]),
            num_heads=int(row["num_heads"]),
            ffn_size=int(row["ffn_size"]),
            seq_len=int(row["seq_len"]),
            batch_size=int(row["batch_size"]),
            num_steps=int(row["num_steps"]),
            warmup_steps=0,
            strategy=str(row["strategy"]),
            num_devices=int(row["num_devices"]),
            device=str(row["device"]),
            precision=str(row["precision"]),
            **kind_fields(row),
        )
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
