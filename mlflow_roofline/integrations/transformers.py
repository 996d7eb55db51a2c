"""``RooflineCallback``: measure and forecast a Hugging Face ``Trainer`` job in MLflow.

>>> trainer = Trainer(model=model, args=args, train_dataset=data,
...                   callbacks=[RooflineCallback(energy_budget_kwh=2.0)])
>>> trainer.train()

The run's configuration comes from what the job is: the shape from ``model.config``
(:mod:`~mlflow_roofline.integrations.job_facts`), the padded sequence length of the
training batches the model really received (a forward pre-hook), the global batch
(per-device batch x processes x gradient accumulation; one process's batch under tensor
parallel, where every rank sees the same rows), the planned steps
(``state.max_steps``), the precision (``bf16``/``fp16`` flags, else the weights' dtype; ``tf32`` for fp32
weights under ``tf32=True``),
and the strategy and device count that ran: the world size of ``torch.distributed``
and the wrappers that called the model's forward during the first step (DDP, FSDP) or
its parameters' types (FSDP2, tensor parallel DTensors).

Every process runs the callback; only the main one talks to MLflow. It logs into the
Trainer's MLflow run when MLflow's ``MLflowCallback`` opened one (``report_to="mlflow"``),
else into its own. The run is never left RUNNING when training stops early (an exception,
Ctrl-C, SIGTERM, SIGKILL): :mod:`~mlflow_roofline.integrations.run_log` says how. A
tracking store that fails is one warning, and training goes on unmeasured.
``transformers`` is imported here only, when this module is.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.hooks import RemovableHandle
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from mlflow_roofline.core.schema import SOURCE_TRAINER
from mlflow_roofline.integrations.job_facts import (
    JobFacts,
    batch_shape,
    device_of,
    model_kind,
    model_label,
    model_shape,
    precision_of,
)
from mlflow_roofline.integrations.measurement import JobMeasurement
from mlflow_roofline.integrations.options import TrackOptions
from mlflow_roofline.integrations.parallel_probe import WrapperSpy, probe
from mlflow_roofline.integrations.safety import JobGuard
from mlflow_roofline.tracking.api_options import check_options


class RooflineCallback(TrainerCallback):
    """Logs energy per logging step, the forecast of the whole job and the train-run schema.

    Args:
        log_every_n_steps: log energy (and the forecast) every this many optimizer steps;
            None (the default): at the Trainer's own logging steps (``logging_steps``).
        options: the fields of :class:`~mlflow_roofline.integrations.options.TrackOptions`
            (``meter``, ``warmup_steps``, ``forecast_after_steps``, ``sample_steps``, ``model_uri``,
            ``energy_budget_kwh``, ``experiment``, ``run_name``, ``forecast``).

    Raises:
        ConfigTypeError: an unknown option or one of the wrong type, naming it (at construction, before training).
        ConfigError: an option out of range, naming it and what it takes.
    """

    def __init__(self, log_every_n_steps: int | None = None, **options: Any) -> None:
        check_options("RooflineCallback", {"log_every_n_steps": log_every_n_steps, **options})
        self.log_every_n_steps = log_every_n_steps
        self.options = TrackOptions(**options)
        self.tracker: JobMeasurement | None = None
        self._spy = WrapperSpy()
        self._hook: RemovableHandle | None = None
        self._model: torch.nn.Module | None = None

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: torch.nn.Module | None = None,
        **kwargs: object,
    ) -> None:
        """Read the job, build the meter, open or join the run."""
        self.tracker = None  # a new job: not the last one's
        if model is None:
            raise TypeError("RooflineCallback needs the Trainer's model (on_train_begin got none)")
        shape, _missing = model_shape(model)
        kind, kind_unknown = model_kind(model)
        mixed = "bf16" if args.bf16 else "fp16" if args.fp16 else None
        facts = JobFacts(
            shape=shape,
            rows_per_step=args.per_device_train_batch_size * max(1, args.n_gpu) * args.gradient_accumulation_steps,
            planned_steps=state.max_steps if state.max_steps and state.max_steps > 0 else None,
            precision=precision_of(model, mixed, tf32=bool(getattr(args, "tf32", False))),
            device=device_of(model),
            parallel=probe([model]),
            kind=kind,
            kind_unknown=kind_unknown,
            model=model_label(model),
        )
        self._model = model
        self.tracker = JobMeasurement(self.options, SOURCE_TRAINER, step_begins=True)
        self.tracker.begin(facts)
        self._hook = model.register_forward_pre_hook(self._batch_hook, with_kwargs=True)
        self._spy.arm()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        """Open the energy window at the first measured step's beginning; resume it after a pause."""
        if self.tracker is not None:
            self.tracker.step_begin()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        """Cut the energy window; at logging steps log energy and forecast; stop on the budget.

        The window pauses until the next step's beginning when the Trainer logs, evaluates or
        saves after this step (``DefaultFlowCallback`` has set those flags by now): that
        bookkeeping runs after every callback's ``on_step_end`` and is no step's energy.
        """
        tracker = self.tracker
        if tracker is None:
            return
        if self._spy.armed:  # the first step has shown which wrappers called the model
            self._spy.disarm()
            if tracker.facts is not None and self._model is not None:
                tracker.facts.parallel = probe([self._model, *self._spy.wrappers])
        every = self.log_every_n_steps
        should_log = bool(control.should_log) if every is None else state.global_step % every == 0
        bookkeeping = bool(control.should_log or control.should_evaluate or control.should_save)
        if tracker.step_end(state.global_step, should_log, bool(control.should_training_stop), pause=bookkeeping):
            control.should_training_stop = True

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        """Close the window at the last step and log the run."""
        self._spy.disarm()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.tracker is not None:
            self.tracker.end()

    def train_raised(self, error: BaseException) -> None:
        """Training raised ``error`` (the Trainer calls no callback then: ``autolog`` calls this): close the
        meter and end the run, KILLED after a Ctrl-C, else FAILED, with the reason
        (:meth:`~mlflow_roofline.integrations.run_log.RunLog.finish`). Without it, that happens at exit."""
        self._spy.disarm()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.tracker is not None:
            self.tracker.abort(error)

    def _batch_hook(self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        if not module.training or self.tracker is None:
            return
        batch = batch_shape(args, kwargs)
        if batch is not None:
            self.tracker.batch_seen(*batch)


class AutologCallback(RooflineCallback):
    """The :class:`RooflineCallback` ``mlflow_roofline.autolog()`` attaches: its hooks run through a
    :class:`~mlflow_roofline.integrations.safety.JobGuard`, so a failure of ours (meter, store,
    forecast) is one warning, the job's own run ends FAILED with the reason, and training goes on
    unmeasured. Same arguments as :class:`RooflineCallback`."""

    def __init__(self, log_every_n_steps: int | None = None, **options: Any) -> None:
        super().__init__(log_every_n_steps, **options)
        self.guard = JobGuard(self._abandon)

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: torch.nn.Module | None = None,
        **kwargs: object,
    ) -> None:
        """As :meth:`RooflineCallback.on_train_begin`, guarded (each ``train()`` is a job of its own)."""
        self.guard = JobGuard(self._abandon)
        begin = super().on_train_begin
        self.guard.run("the Trainer callback's on_train_begin", begin, args, state, control, model=model, **kwargs)

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        """As :meth:`RooflineCallback.on_step_begin`, guarded."""
        self.guard.run("the Trainer callback's on_step_begin", super().on_step_begin, args, state, control, **kwargs)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        """As :meth:`RooflineCallback.on_step_end` (a budget stop included), guarded."""
        self.guard.run("the Trainer callback's on_step_end", super().on_step_end, args, state, control, **kwargs)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        """As :meth:`RooflineCallback.on_train_end`, guarded."""
        self.guard.run("the Trainer callback's on_train_end", super().on_train_end, args, state, control, **kwargs)

    def train_raised(self, error: BaseException) -> None:
        """As :meth:`RooflineCallback.train_raised`, guarded."""
        self.guard.run("ending the run after training raised", super().train_raised, error)

    def _batch_hook(self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        self.guard.run("the model's forward pre-hook", super()._batch_hook, module, args, kwargs)

    def _abandon(self, reason: str) -> None:
        """Stop measuring this job: no hook left in the model, the meter closed, the run ended."""
        self._spy.disarm()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.tracker is not None:
            self.tracker.abandon(reason)
