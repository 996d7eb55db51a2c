"""What a measured job is, as far as it can be read: the train params of its run.

The adapters (Trainer callback, Accelerate hook) fill a :class:`JobFacts` from the model,
the arguments and what ran; :meth:`JobFacts.config` turns it into a
:class:`~mlflow_roofline.core.config.TrainConfig` once the measured steps are known, or
names the fields it lacks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import DEVICES, PARAM_NAMES, PRECISIONS
from mlflow_roofline.integrations.parallel_probe import ParallelRun

DTYPE_PRECISION = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}


@dataclasses.dataclass
class JobFacts:
    """The job's train params as read (None where unknown) and why some are missing.

    ``planned_steps`` counts every optimizer step of the job, warm-up included.
    ``rows_per_step`` is per-device batch x (DataParallel GPUs) x gradient accumulation.
    """

    shape: dict[str, int]
    rows_per_step: int | None  # samples one process trains on per optimizer step (accumulation included)
    planned_steps: int | None
    precision: str | None
    device: str | None
    parallel: ParallelRun
    tokens: int = 0  # this process's training tokens (padded) and rows so far
    rows: int = 0
    job_tokens: int = 0  # every process's, as of the last gathering
    job_rows: int = 0

    @property
    def batch_size(self) -> int | None:
        """Global batch: each process's rows times the processes under data parallel (and one
        process's rows under tensor parallel, where every rank sees the same batch)."""
        if self.rows_per_step is None:
            return None
        replicas = 1 if self.parallel.strategy == "tp" else self.parallel.num_devices
        return self.rows_per_step * replicas

    @property
    def seq_len(self) -> int | None:
        """Mean padded length of the training batches seen (tokens per sample), None before one.

        Over every process once their counts were gathered, else over this process's.
        """
        tokens, rows = (self.job_tokens, self.job_rows) if self.job_rows else (self.tokens, self.rows)
        return round(tokens / rows) if rows else None

    def values(self, num_steps: int, warmup_steps: int) -> dict[str, Any]:
        """Every train param that is known, under its schema name."""
        known: dict[str, Any] = {
            **self.shape,
            "seq_len": self.seq_len,
            "batch_size": self.batch_size,
            "num_steps": num_steps,
            "warmup_steps": warmup_steps,
            "strategy": self.parallel.strategy,
            "num_devices": self.parallel.num_devices,
            "device": self.device if self.device in DEVICES else None,
            "precision": self.precision if self.precision in PRECISIONS else None,
        }
        return {k: v for k, v in known.items() if v is not None}

    def missing(self) -> list[str]:
        """The train params that could not be read (num_steps is always known at the end)."""
        known = self.values(1, 0)
        return [name for name in PARAM_NAMES if name not in known]

    def config(self, num_steps: int, warmup_steps: int) -> tuple[TrainConfig | None, str]:
        """The run's configuration, or None and what is missing or contradictory."""
        missing = self.missing()
        if missing:
            why = f"could not read {', '.join(missing)}"
            if self.parallel.why_unknown and "strategy" in missing:
                why += f" ({self.parallel.why_unknown})"
            return None, why
        try:
            config = TrainConfig.from_mapping(self.values(max(num_steps, 1), warmup_steps))
            config.validate()
        except ConfigError as exc:
            return None, f"the values read break a rule: {exc}"
        return config, ""


def precision_of(model: Any, mixed: str | None) -> str | None:
    """``bf16``/``fp16`` under mixed precision, else the dtype of the model's parameters."""
    if mixed in ("bf16", "fp16"):
        return mixed
    if mixed not in (None, "no", "fp32"):
        return None  # fp8 and the like: not a precision of the schema
    try:
        return DTYPE_PRECISION.get(str(next(model.parameters()).dtype))
    except (StopIteration, AttributeError):
        return None


def device_of(model: Any) -> str | None:
    """The device type of the model's parameters (``cuda``, ``cpu``...)."""
    try:
        return next(model.parameters()).device.type
    except (StopIteration, AttributeError):
        return None
