"""``mlflow_roofline.autolog()``: measure every training job of the process, in the shape of
MLflow's ``mlflow.<flavor>.autolog``.

>>> import mlflow_roofline
>>> mlflow_roofline.autolog(budget_kwh=2.0)          # once, before the Trainer is built
>>> Trainer(model=model, args=args, train_dataset=data).train()   # no other change

What it patches (each patch is undone by ``autolog(disable=True)``; calling ``autolog``
again only changes the options the next jobs get):

- ``transformers.Trainer.train``: when training raises (Ctrl-C, an exception), the Trainer
  calls no callback; the patch lets the callback end the run at once, with the reason
  (:meth:`~mlflow_roofline.integrations.transformers.RooflineCallback.train_raised`), the
  exception going on to the user unchanged.
- ``transformers.Trainer.__init__``: every Trainer gets a
  :class:`~mlflow_roofline.integrations.transformers.AutologCallback` (a guarded
  ``RooflineCallback``) as its last callback
  (none when the user passed one). Being last, it runs after HF's ``MLflowCallback``
  (``report_to="mlflow"``), which has opened the run by then: the callback logs into that
  run, so one run holds HF's ``loss`` and the energy, params and forecast.
- ``accelerate.Accelerator.prepare`` and ``end_training``: a hand-written loop is measured
  as :func:`~mlflow_roofline.integrations.accelerate.track_training` measures it, from the
  first prepared model on; the prepared optimizers' ``step`` counts the optimizer steps
  (only where gradients are synchronised). The run ends at ``accelerator.end_training()``,
  else when the process exits (FAILED when an uncaught exception ended it). Without the
  planned steps there is no forecast; a budget stop sets Accelerate's trigger
  (``accelerator.check_trigger()`` is True), since a patch cannot break the user's loop.
  The Trainer's own Accelerator is left alone: its callback measures it.

Every patch and the callback's hooks run our code through the safety net of
:mod:`~mlflow_roofline.integrations.safety`: the user's original function runs outside
our ``try`` (its exceptions and result are the user's), and a failure of ours (the meter,
the tracking store, the forecast) is one warning; the job then trains on unmeasured, its
own run ended FAILED with the reason in ``roofline.error``.

Importing this module imports neither transformers nor accelerate; ``autolog`` patches
each only where it is installed.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import sys
import weakref
from collections.abc import Callable
from typing import Any

from mlflow_roofline.integrations.options import TrackOptions
from mlflow_roofline.integrations.safety import JobGuard, around
from mlflow_roofline.tracking.api_options import check_options

logger = logging.getLogger(__name__)

IN_TRAINER = "_roofline_in_trainer"
"""Attribute set on the Accelerator a Trainer built: its loop is measured by the callback."""

DEFAULT_LOOP_LOGGING_STEPS = 10
"""Optimizer steps between logging points of an Accelerate loop when ``log_every_n_steps`` is None."""


@dataclasses.dataclass(frozen=True)
class AutologConfig:
    """What the next measured jobs get: the callback's options and the logging interval (steps)."""

    options: dict[str, Any]
    log_every_n_steps: int | None
    silent: bool


@dataclasses.dataclass
class _Patch:
    """One attribute replaced on a class, with what to put back."""

    owner: type
    name: str
    original: Callable[..., Any]

    def undo(self) -> None:
        setattr(self.owner, self.name, self.original)


_config: AutologConfig | None = None
_patches: list[_Patch] = []


def autolog(
    disable: bool = False,
    log_every_n_steps: int | None = None,
    forecast: bool = True,
    budget_kwh: float | None = None,
    silent: bool = False,
    **options: Any,
) -> None:
    """Measure every Hugging Face ``Trainer`` job and Accelerate loop this process runs.

    Args:
        disable: undo the patches (jobs already running keep being measured).
        log_every_n_steps: log energy (and the forecast) every this many optimizer steps;
            None: the Trainer's own ``logging_steps``, and every
            :data:`DEFAULT_LOOP_LOGGING_STEPS` steps in an Accelerate loop.
        forecast: forecast the whole job's energy (J) and time (s) from its first steps.
        budget_kwh: stop a job once its forecast's lower bound exceeds this many kWh.
        silent: no log message from ``autolog`` itself.
        options: more fields of :class:`~mlflow_roofline.integrations.options.TrackOptions`
            (``meter``, ``warmup_steps``, ``forecast_after_steps``, ``model_uri``, ``experiment``, ...).

    Raises:
        ConfigTypeError: an unknown option or one of the wrong type, naming it (checked here, before any job).
        ConfigError: an option out of range, naming it and what it takes.
    """
    global _config
    given = {"disable": disable, "log_every_n_steps": log_every_n_steps, "forecast": forecast, "silent": silent}
    check_options("autolog", {**given, "budget_kwh": budget_kwh, **options})
    if disable:
        for patch in reversed(_patches):
            patch.undo()
        _patches.clear()
        _config = None
        return
    merged = {**options, "forecast": forecast, "energy_budget_kwh": budget_kwh}
    TrackOptions(**merged)  # refuse a bad option now, not in the middle of someone's training
    _config = AutologConfig(merged, log_every_n_steps, silent)
    if _patches:
        return  # already patched: idempotent, the new options apply to the next jobs
    patched = _patch_transformers() + _patch_accelerate()
    if not silent:
        logger.info("roofline autolog: measuring %s", ", ".join(patched) or "nothing (neither library is installed)")


def enabled() -> bool:
    """Whether :func:`autolog` is on in this process."""
    return _config is not None


def _replace(owner: type, name: str, patched: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace ``owner.name`` by ``patched(original)`` (an :func:`~mlflow_roofline.integrations.safety.around`)."""
    original = owner.__dict__[name]
    setattr(owner, name, patched(original))
    _patches.append(_Patch(owner, name, original))


# -- transformers -----------------------------------------------------------------------
def _patch_transformers() -> list[str]:
    try:
        from transformers import Trainer
    except ImportError:
        return []
    _replace(Trainer, "__init__", lambda original: around(original, "Trainer.__init__", after=_after_init))
    _replace(Trainer, "train", lambda original: around(original, "Trainer.train", on_error=_train_raised))
    _replace(
        Trainer,
        "create_accelerator_and_postprocess",
        lambda original: around(original, "Trainer.create_accelerator_and_postprocess", after=_mark_in_trainer),
    )
    return ["transformers.Trainer"]


def _after_init(_result: None, trainer: Any, *args: Any, **kwargs: Any) -> None:
    """Attach an :class:`~mlflow_roofline.integrations.transformers.AutologCallback` (none if the user passed one)."""
    from mlflow_roofline.integrations.transformers import AutologCallback, RooflineCallback

    config = _config
    if config is None or any(isinstance(c, RooflineCallback) for c in trainer.callback_handler.callbacks):
        return
    trainer.add_callback(AutologCallback(log_every_n_steps=config.log_every_n_steps, **config.options))


def _train_raised(error: BaseException, trainer: Any, *args: Any, **kwargs: Any) -> None:
    """``Trainer.train`` raised (the Trainer calls no callback then): its measurement ends the run now."""
    from mlflow_roofline.integrations.transformers import RooflineCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, RooflineCallback):
            callback.train_raised(error)


def _mark_in_trainer(_result: None, trainer: Any, *args: Any, **kwargs: Any) -> None:
    setattr(trainer.accelerator, IN_TRAINER, True)


# -- accelerate -------------------------------------------------------------------------
@dataclasses.dataclass
class _Loop:
    """The measurement of one Accelerator's hand-written loop; our code for it runs through ``guard``."""

    hook: Any = None  # AccelerateHook once a model was prepared
    closed: bool = False
    guard: JobGuard = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.guard = JobGuard(self._abandon)

    def step(self, accelerator: Any) -> None:
        if self.hook is None or self.closed:
            return
        was_stopping = self.hook.should_stop
        if self.hook.step() and not was_stopping:
            accelerator.set_trigger()  # the user's loop sees it through accelerator.check_trigger()

    def close(self, failed: bool, error: BaseException | None = None) -> None:
        if self.hook is not None and not self.closed:
            self.closed = True
            self.hook.close(failed=failed, error=error)

    def _abandon(self, reason: str) -> None:
        self.closed = True
        if self.hook is not None:
            self.hook.abandon(reason)


_loops: weakref.WeakKeyDictionary[Any, _Loop] = weakref.WeakKeyDictionary()


def _patch_accelerate() -> list[str]:
    try:
        from accelerate import Accelerator
    except ImportError:
        return []
    _replace(Accelerator, "prepare", lambda original: around(original, "Accelerator.prepare", after=_after_prepare))
    _replace(
        Accelerator,
        "end_training",
        lambda original: around(original, "Accelerator.end_training", before=_before_end_training),
    )
    return ["accelerate.Accelerator"]


def _after_prepare(result: Any, accelerator: Any, *args: Any, **kwargs: Any) -> None:
    if _config is not None and not getattr(accelerator, IN_TRAINER, False):
        objects = result if isinstance(result, tuple) else (result,)
        loop = _loops.setdefault(accelerator, _Loop())
        loop.guard.run("Accelerator.prepare", _prepared, accelerator, objects, loop)


def _before_end_training(accelerator: Any, *args: Any, **kwargs: Any) -> None:
    loop = _loops.get(accelerator)
    if loop is not None:
        loop.guard.run("Accelerator.end_training", loop.close, failed=False)


def _prepared(accelerator: Any, objects: tuple[Any, ...], loop: _Loop) -> None:
    """Start measuring at the first prepared model; count the steps of every prepared optimizer."""
    import torch

    from mlflow_roofline.integrations.accelerate import AccelerateHook

    config = _config
    assert config is not None
    for obj in objects:
        if isinstance(obj, torch.optim.Optimizer) and not getattr(obj, "_roofline_counted", False):
            _count_steps(obj, accelerator, loop)
    model = next((obj for obj in objects if isinstance(obj, torch.nn.Module)), None)
    if model is None or loop.hook is not None:
        return
    every = config.log_every_n_steps or DEFAULT_LOOP_LOGGING_STEPS
    loop.hook = AccelerateHook(accelerator, model, None, every, TrackOptions(**config.options))
    loop.hook.begin()
    # A strong reference: a loop whose Accelerator went out of scope without end_training is still logged at exit.
    atexit.register(_close_at_exit, loop)


def _count_steps(optimizer: Any, accelerator: Any, loop: _Loop) -> None:
    """Wrap this optimizer's ``step`` (on the instance) so that each call counts for ``loop``."""
    accelerator_ref = weakref.ref(accelerator)

    def count(_result: Any, *args: Any, **kwargs: Any) -> None:
        owner = accelerator_ref()
        if owner is not None:
            loop.guard.run("optimizer.step", loop.step, owner)

    optimizer.step = around(optimizer.step, "optimizer.step", after=count)
    optimizer._roofline_counted = True


def _close_at_exit(loop: _Loop) -> None:
    """At exit, a loop ``end_training`` never closed: log it, FAILED when an exception ended the process."""
    if loop.guard.failed:
        return  # abandoned: its run is ended already
    error = getattr(sys, "last_value", None)  # set when an uncaught exception ends the interpreter
    try:
        loop.close(failed=error is not None, error=error)
    except Exception:  # the interpreter is exiting; nothing more to do
        logger.exception("roofline autolog: could not log the loop at exit")
