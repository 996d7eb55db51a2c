"""``track_training``: measure and forecast a hand-written Accelerate loop in MLflow.

>>> model, optimizer, data = accelerator.prepare(model, optimizer, data)
>>> with track_training(accelerator, model, total_steps=1000, energy_budget_kwh=2.0) as tracker:
...     for batch in data:
...         with accelerator.accumulate(model):
...             accelerator.backward(model(**batch).loss)
...             optimizer.step()
...             optimizer.zero_grad()
...         if tracker.step():        # True once the energy budget says stop
...             break

Call :meth:`AccelerateHook.step` after every batch: it counts optimizer steps only where
Accelerate synchronises gradients (``accelerator.sync_gradients``), so it is right with
or without gradient accumulation. The configuration is read from what ran: the shape
from ``model.config``, the padded sequence length and per-process rows of the batches
the model received, the global batch (rows x processes x accumulation steps), the
precision (``accelerator.mixed_precision``, else the weights' dtype), and the strategy
and device count from ``torch.distributed`` and the prepared model's own types (an
Accelerate FSDP or TP request that fell back to DDP is recorded as ``ddp``). The run
is logged as for the Trainer callback, with ``roofline.source=accelerate``. A loop that
runs past ``total_steps`` gets one warning and is measured to its end (the forecast and
the budget cover the planned steps); one that raises ends its own run FAILED, or KILLED
on a ``KeyboardInterrupt``, with the reason (:mod:`~mlflow_roofline.integrations.run_log`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

import torch
from torch.utils.hooks import RemovableHandle

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import SOURCE_ACCELERATE
from mlflow_roofline.integrations.job_facts import (
    JobFacts,
    batch_shape,
    device_of,
    model_kind,
    model_label,
    model_shape,
    precision_of,
    tf32_matmuls,
)
from mlflow_roofline.integrations.measurement import JobMeasurement
from mlflow_roofline.integrations.options import TrackOptions
from mlflow_roofline.integrations.parallel_probe import probe
from mlflow_roofline.tracking.api_options import check_options

DEFAULT_LOGGING_STEPS = 10


class Accelerator(Protocol):
    """What the hook reads of ``accelerate.Accelerator`` (``sync_gradients`` and
    ``gradient_accumulation_steps`` too, when it has them)."""

    @property
    def mixed_precision(self) -> str: ...

    @property
    def device(self) -> torch.device: ...

    def unwrap_model(self, model: torch.nn.Module) -> torch.nn.Module: ...


class AccelerateHook:
    """The handle :func:`track_training` yields: call :meth:`step` after each batch."""

    def __init__(
        self,
        accelerator: Accelerator,
        model: torch.nn.Module,
        total_steps: int | None,
        logging_steps: int,
        options: TrackOptions,
    ) -> None:
        self.accelerator = accelerator
        self.model = model
        self.total_steps = total_steps
        self.logging_steps = logging_steps
        self.tracker = JobMeasurement(options, SOURCE_ACCELERATE)
        self.global_step = 0
        self.should_stop = False
        self._rows = 0
        self._hook: RemovableHandle | None = None

    def begin(self) -> None:
        """Read the job and open the measurement (every process)."""
        inner = self.accelerator.unwrap_model(self.model)
        shape, _ = model_shape(inner)
        kind, kind_unknown = model_kind(inner)
        parallel = probe([self.model])
        facts = JobFacts(
            shape=shape,
            rows_per_step=None,  # known from the first batch
            planned_steps=self.total_steps,
            precision=precision_of(
                inner,
                str(self.accelerator.mixed_precision),
                tf32=self.accelerator.device.type == "cuda" and tf32_matmuls(),
            ),
            device=device_of(inner) or self.accelerator.device.type,
            parallel=parallel,
            kind=kind,
            kind_unknown=kind_unknown,
            model=model_label(inner),
        )
        self.tracker.begin(facts)
        self._hook = inner.register_forward_pre_hook(self._batch_hook, with_kwargs=True)

    def step(self) -> bool:
        """Count an optimizer step (if gradients were synchronised); True once the budget says stop."""
        if not getattr(self.accelerator, "sync_gradients", True) or self.should_stop:
            return self.should_stop
        self.global_step += 1
        facts = self.tracker.facts
        if facts is not None and facts.rows_per_step is None and self._rows:
            accumulation = int(getattr(self.accelerator, "gradient_accumulation_steps", 1) or 1)
            facts.rows_per_step = self._rows * accumulation
        should_log = self.global_step % self.logging_steps == 0
        self.should_stop = self.tracker.step_end(self.global_step, should_log)
        return self.should_stop

    def close(self, failed: bool, error: BaseException | None = None) -> None:
        """Close the window and log the run (after the loop raised ``error``: only end the run)."""
        self._unhook()
        if failed:
            self.tracker.abort(error)
        else:
            self.tracker.end()

    def abandon(self, reason: str) -> None:
        """Our own code failed (not the loop): stop measuring; an own run ends FAILED with ``reason``."""
        self._unhook()
        self.tracker.abandon(reason)

    def _unhook(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _batch_hook(self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        if not module.training:
            return
        batch = batch_shape(args, kwargs)
        if batch is not None:
            self._rows = max(self._rows, batch[0])
            self.tracker.batch_seen(*batch)


def track_training(
    accelerator: Accelerator,
    model: torch.nn.Module,
    *,
    total_steps: int | None = None,
    logging_steps: int = DEFAULT_LOGGING_STEPS,
    **options: Any,
) -> contextlib.AbstractContextManager[AccelerateHook]:
    """Measure the training loop in the block; log it to MLflow from the main process.

    Args:
        accelerator: the ``Accelerator`` the loop runs under.
        model: the model as returned by ``accelerator.prepare``.
        total_steps: optimizer steps the job plans, warm-up included (needed for the
            forecast and the budget; without it neither is computed).
        logging_steps: log energy (and the forecast) every this many optimizer steps.
        options: the fields of :class:`~mlflow_roofline.integrations.options.TrackOptions`.
    Raises:
        ConfigTypeError: an unknown option or one of the wrong type, naming it (at the call).
        ConfigError: an option out of range, naming it and what it takes.
    """
    check_options("track_training", {"total_steps": total_steps, "logging_steps": logging_steps, **options})
    if total_steps is None and options.get("energy_budget_kwh") is not None:
        raise ConfigError("total_steps", "is needed with energy_budget_kwh (the forecast covers the planned steps)")
    return _tracking(AccelerateHook(accelerator, model, total_steps, logging_steps, TrackOptions(**options)))


@contextlib.contextmanager
def _tracking(handle: AccelerateHook) -> Iterator[AccelerateHook]:
    """The block of :func:`track_training`: the measurement begins at its start and ends with it."""
    handle.begin()
    try:
        yield handle
    except BaseException as exc:
        handle.close(failed=True, error=exc)
        raise
    handle.close(failed=False)
