"""``RooflineCallback`` for PyTorch Lightning: measure and forecast a ``Trainer.fit`` job in MLflow.

>>> trainer = lightning.pytorch.Trainer(max_steps=2000, callbacks=[RooflineCallback(energy_budget_kwh=2.0)])
>>> trainer.fit(module, data)

The same measurement as the Hugging Face callback
(:mod:`~mlflow_roofline.integrations.measurement`), driven by Lightning's hooks: the window
(re)opens at ``on_train_batch_start`` and is cut at the ``on_train_batch_end`` of each batch
after which the optimizer stepped (``trainer.global_step`` advanced: micro-batches of
gradient accumulation are no step). It pauses while Lightning does its own bookkeeping
after a step (writing its loggers every ``log_every_n_steps``, validating, checkpointing at
an epoch's end). A budget stop sets ``trainer.should_stop``.

The configuration is read from what ran: the shape from the ``config`` of the
LightningModule or of the first of its submodules that has one (its Hugging Face model,
:func:`~mlflow_roofline.integrations.job_facts.configured_module`); the padded sequence
length and the rows of the batches that model received (a forward pre-hook); the global
batch (rows x ``accumulate_grad_batches`` x processes); the planned steps (``max_steps``,
else Lightning's ``estimated_stepping_batches``); the precision (``16-mixed``/``bf16-mixed``,
else the weights' dtype); the strategy and device count from ``torch.distributed`` and the
model the strategy wraps (DDP, FSDP, FSDP2 in ``configure_model``), never from the
``strategy=`` argument.

The run: Lightning's ``MLFlowLogger``'s when one is attached (in that logger's store), else
the active run (``mlflow.pytorch.autolog()`` opens one around ``fit``), else one of its own;
so Lightning's metrics and these are in one run. Only global rank 0 talks to MLflow. When
``fit`` raises, ``on_exception`` ends an own run FAILED (KILLED after Ctrl-C) with the reason.

Built on ``lightning.pytorch`` where installed, else on ``pytorch_lightning``; either
package's ``Trainer`` runs it (Lightning calls a callback's hooks by name).
"""

from __future__ import annotations

import importlib
import math
import sys
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from mlflow_roofline.core.schema import SOURCE_LIGHTNING
from mlflow_roofline.integrations.job_facts import (
    JobFacts,
    batch_shape,
    configured_module,
    device_of,
    model_kind,
    model_shape,
    precision_of,
    tf32_matmuls,
)
from mlflow_roofline.integrations.measurement import JobMeasurement, RunToJoin
from mlflow_roofline.integrations.options import LIGHTNING_PACKAGES, TrackOptions, logging_interval
from mlflow_roofline.integrations.parallel_probe import probe
from mlflow_roofline.integrations.safety import JobGuard

try:
    from lightning.pytorch import Callback, LightningModule, Trainer
    from lightning.pytorch.utilities.rank_zero import rank_zero_only
except ImportError:  # only the package's older name is installed
    from pytorch_lightning import Callback, LightningModule, Trainer  # type: ignore[assignment]
    from pytorch_lightning.utilities.rank_zero import rank_zero_only

DEFAULT_LOGGING_STEPS = 50
"""Optimizer steps between logging points when the Trainer logs nothing (Lightning's default interval)."""

MIXED_PRECISION: dict[str, str] = {
    "16-mixed": "fp16",
    "bf16-mixed": "bf16",
    "transformer-engine": "fp8",
    "transformer-engine-float16": "fp8",
}
"""Lightning's ``precision`` names that compute below the weights' dtype; for the others
(``32-true``, ``bf16-true``, ...) the weights' dtype is the precision."""


class RooflineCallback(Callback):
    """Logs energy per logging step, the forecast of the whole job and the train-run schema.

    Args:
        log_every_n_steps: log energy (and the forecast) every this many optimizer steps;
            None (the default): the Trainer's own ``log_every_n_steps``.
        options: the fields of :class:`~mlflow_roofline.integrations.options.TrackOptions`
            (``meter``, ``warmup_steps``, ``forecast_after_steps``, ``sample_steps``, ``model_uri``,
            ``energy_budget_kwh``, ``experiment``, ``run_name``, ``forecast``).

    Raises:
        ConfigError: an option out of range, naming it (at construction, before training).
    """

    def __init__(self, log_every_n_steps: int | None = None, **options: Any) -> None:
        super().__init__()
        self.log_every_n_steps = logging_interval(log_every_n_steps)
        self.options = TrackOptions(**options)
        self.tracker: JobMeasurement | None = None
        self._hook: RemovableHandle | None = None
        self._rows = 0  # the most rows one forward call of the model received (one micro-batch)
        self._last_step = 0

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Read the job, build the meter, open or join the run."""
        self.tracker = None  # a new job: not the last one's
        inner = configured_module(pl_module)
        facts = job_facts(trainer, pl_module, inner)
        join = logger_run(trainer) if facts.parallel.is_main else None
        self._rows = 0
        self._last_step = trainer.global_step
        self.tracker = JobMeasurement(self.options, SOURCE_LIGHTNING, step_begins=True, join=join)
        self.tracker.begin(facts)
        self._hook = inner.register_forward_pre_hook(self._batch_hook, with_kwargs=True)

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int) -> None:
        """Open the energy window at the first measured step's beginning; resume it after a pause."""
        if self.tracker is not None:
            self.tracker.step_begin()

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """After an optimizer step: cut the window; at logging steps log energy and forecast; stop on the budget."""
        tracker = self.tracker
        step = trainer.global_step
        if tracker is None or step == self._last_step:
            return  # a micro-batch of gradient accumulation: no optimizer step yet
        self._last_step = step
        facts = tracker.facts
        if facts is not None and facts.rows_per_step is None and self._rows:
            facts.rows_per_step = self._rows * int(trainer.accumulate_grad_batches)
        every = self.log_every_n_steps or lightning_logging_steps(trainer)
        stopping = bool(trainer.should_stop) or 0 < trainer.max_steps <= step
        if tracker.step_end(step, step % every == 0, stopping, pause=bookkeeping_follows(trainer, batch_idx)):
            trainer.should_stop = True

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Close the window at the last step and log the run."""
        self._unhook()
        if self.tracker is not None:
            self.tracker.end()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        """``fit`` raised: end an own run FAILED (KILLED after Ctrl-C) with the reason; no collective."""
        self._unhook()
        if self.tracker is not None:
            self.tracker.abort(exception)

    def _unhook(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _batch_hook(self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        if not module.training or self.tracker is None:
            return
        batch = batch_shape(args, kwargs)
        if batch is not None:
            self._rows = max(self._rows, batch[0])
            self.tracker.batch_seen(*batch)


def job_facts(trainer: Trainer, pl_module: LightningModule, inner: torch.nn.Module) -> JobFacts:
    """What the job is, read from the Trainer, the LightningModule and ``inner`` (the model with the ``config``)."""
    shape, _missing = model_shape(inner)
    kind, kind_unknown = model_kind(inner)
    device = device_of(pl_module) or trainer.strategy.root_device.type
    wrapped = trainer.strategy.model
    return JobFacts(
        shape=shape,
        rows_per_step=None,  # known from the first step's batches
        planned_steps=planned_steps(trainer),
        precision=precision_of(
            inner, MIXED_PRECISION.get(str(trainer.precision)), tf32=device == "cuda" and tf32_matmuls()
        ),
        device=device,
        parallel=probe([pl_module] + ([wrapped] if isinstance(wrapped, torch.nn.Module) else [])),
        kind=kind,
        kind_unknown=kind_unknown,
    )


def planned_steps(trainer: Trainer) -> int | None:
    """Optimizer steps the job plans: ``max_steps``, else Lightning's estimate from the epochs (None: unbounded)."""
    if trainer.max_steps > 0:
        return int(trainer.max_steps)
    estimated = float(trainer.estimated_stepping_batches)
    return int(estimated) if math.isfinite(estimated) and estimated > 0 else None


def lightning_logging_steps(trainer: Trainer) -> int:
    """The Trainer's ``log_every_n_steps``; Lightning's default where its logging is off (0)."""
    return int(getattr(trainer, "log_every_n_steps", 0) or 0) or DEFAULT_LOGGING_STEPS  # set by its logger connector


def bookkeeping_follows(trainer: Trainer, batch_idx: int) -> bool:
    """Whether Lightning does its own work after this batch: writing its loggers, validating, or an
    epoch's end (validation and checkpoint); it runs after every callback's ``on_train_batch_end``."""
    done = batch_idx + 1
    every = int(getattr(trainer, "log_every_n_steps", 0) or 0)  # 0: Lightning logs nothing
    logs = every > 0 and trainer.global_step % every == 0
    validates = isinstance(trainer.val_check_batch, int) and done % max(trainer.val_check_batch, 1) == 0
    return logs or validates or done >= trainer.num_training_batches


def logger_run(trainer: Trainer) -> RunToJoin | None:
    """The run of Lightning's ``MLFlowLogger`` when the Trainer has one (it is opened now if it was not)."""
    loggers = mlflow_logger_types()
    for logger in trainer.loggers:
        run_id = getattr(logger, "run_id", None) if loggers and isinstance(logger, loggers) else None
        if run_id:
            return RunToJoin(str(run_id), getattr(logger, "_tracking_uri", None))  # the logger's own store
    return None


def lightning_rank() -> int:
    """This process's global rank as Lightning knows it before ``fit`` sets up the processes (from
    ``RANK``/``LOCAL_RANK``/``SLURM_PROCID``, which its launcher and torchrun set; 0 without)."""
    return int(getattr(rank_zero_only, "rank", 0) or 0)


def mlflow_logger_types() -> tuple[type, ...]:
    """``MLFlowLogger`` of each Lightning package this process has imported."""
    return tuple(
        importlib.import_module(f"{package}.loggers").MLFlowLogger
        for package in LIGHTNING_PACKAGES
        if package in sys.modules
    )


class AutologCallback(RooflineCallback):
    """The :class:`RooflineCallback` ``mlflow_roofline.autolog()`` adds to a Lightning ``Trainer``: its hooks
    run through a :class:`~mlflow_roofline.integrations.safety.JobGuard`, so a failure of ours (meter,
    store, forecast) is one warning, the job's own run ends FAILED with the reason, and training goes
    on unmeasured. Same arguments as :class:`RooflineCallback`."""

    def __init__(self, log_every_n_steps: int | None = None, **options: Any) -> None:
        super().__init__(log_every_n_steps, **options)
        self.guard = JobGuard(self._abandon)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """As :meth:`RooflineCallback.on_train_start`, guarded (each ``fit()`` is a job of its own)."""
        self.guard = JobGuard(self._abandon)
        self.guard.run("the Lightning callback's on_train_start", super().on_train_start, trainer, pl_module)

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int) -> None:
        """As :meth:`RooflineCallback.on_train_batch_start`, guarded."""
        begin = super().on_train_batch_start
        self.guard.run("the Lightning callback's on_train_batch_start", begin, trainer, pl_module, batch, batch_idx)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """As :meth:`RooflineCallback.on_train_batch_end` (a budget stop included), guarded."""
        end = super().on_train_batch_end
        what = "the Lightning callback's on_train_batch_end"
        self.guard.run(what, end, trainer, pl_module, outputs, batch, batch_idx)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """As :meth:`RooflineCallback.on_train_end`, guarded."""
        self.guard.run("the Lightning callback's on_train_end", super().on_train_end, trainer, pl_module)

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        """As :meth:`RooflineCallback.on_exception`, guarded."""
        self.guard.run("the Lightning callback's on_exception", super().on_exception, trainer, pl_module, exception)

    def _batch_hook(self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        self.guard.run("the model's forward pre-hook", super()._batch_hook, module, args, kwargs)

    def _abandon(self, reason: str) -> None:
        """Stop measuring this job: no hook left in the model, the meter closed, the run ended."""
        self._unhook()
        if self.tracker is not None:
            self.tracker.abandon(reason)
