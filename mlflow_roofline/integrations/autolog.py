"""``mlflow_roofline.autolog()``: measure every training job of the process, in the shape of
MLflow's ``mlflow.<flavor>.autolog``.

>>> import mlflow_roofline
>>> mlflow_roofline.autolog(budget_kwh=2.0)          # once, before the Trainer is built
>>> Trainer(model=model, args=args, train_dataset=data).train()   # no other change

What it patches (each patch is undone by ``autolog(disable=True)``; calling ``autolog``
again only changes the options the next jobs get):

- ``transformers.Trainer.__init__``: every Trainer gets a
  :class:`~mlflow_roofline.integrations.transformers.RooflineCallback` as its last callback
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

Importing this module imports neither transformers nor accelerate; ``autolog`` patches
each only where it is installed.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import logging
import sys
import weakref
from collections.abc import Callable
from typing import Any

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.integrations.options import TrackOptions

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
        ConfigError: an option out of range, naming it (checked here, before any job).
    """
    global _config
    if disable:
        for patch in reversed(_patches):
            patch.undo()
        _patches.clear()
        _config = None
        return
    if log_every_n_steps is not None and (
        isinstance(log_every_n_steps, bool) or not isinstance(log_every_n_steps, int) or log_every_n_steps < 1
    ):
        raise ConfigError("log_every_n_steps", f"must be a positive integer, got {log_every_n_steps!r}")
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


def _replace(owner: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = owner.__dict__[name]
    replacement = functools.wraps(original)(make(original))
    setattr(owner, name, replacement)
    _patches.append(_Patch(owner, name, original))


# -- transformers -----------------------------------------------------------------------
def _patch_transformers() -> list[str]:
    try:
        from transformers import Trainer
    except ImportError:
        return []

    def make_init(original: Callable[..., None]) -> Callable[..., None]:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            _add_callback(self)

        return __init__

    def make_create_accelerator(original: Callable[..., None]) -> Callable[..., None]:
        def create_accelerator_and_postprocess(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            setattr(self.accelerator, IN_TRAINER, True)

        return create_accelerator_and_postprocess

    _replace(Trainer, "__init__", make_init)
    _replace(Trainer, "create_accelerator_and_postprocess", make_create_accelerator)
    return ["transformers.Trainer"]


def _add_callback(trainer: Any) -> None:
    from mlflow_roofline.integrations.transformers import RooflineCallback

    config = _config
    if config is None or any(isinstance(c, RooflineCallback) for c in trainer.callback_handler.callbacks):
        return
    trainer.add_callback(RooflineCallback(log_every_n_steps=config.log_every_n_steps, **config.options))


# -- accelerate -------------------------------------------------------------------------
@dataclasses.dataclass
class _Loop:
    """The measurement of one Accelerator's hand-written loop."""

    hook: Any = None  # AccelerateHook once a model was prepared
    warned_stop: bool = False
    closed: bool = False

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


_loops: weakref.WeakKeyDictionary[Any, _Loop] = weakref.WeakKeyDictionary()


def _patch_accelerate() -> list[str]:
    try:
        from accelerate import Accelerator
    except ImportError:
        return []

    def make_prepare(original: Callable[..., Any]) -> Callable[..., Any]:
        def prepare(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            if _config is not None and not getattr(self, IN_TRAINER, False):
                _prepared(self, result if isinstance(result, tuple) else (result,))
            return result

        return prepare

    def make_end_training(original: Callable[..., Any]) -> Callable[..., Any]:
        def end_training(self: Any, *args: Any, **kwargs: Any) -> Any:
            loop = _loops.get(self)
            if loop is not None:
                loop.close(failed=False)
            return original(self, *args, **kwargs)

        return end_training

    _replace(Accelerator, "prepare", make_prepare)
    _replace(Accelerator, "end_training", make_end_training)
    return ["accelerate.Accelerator"]


def _prepared(accelerator: Any, objects: tuple[Any, ...]) -> None:
    """Start measuring at the first prepared model; count the steps of every prepared optimizer."""
    import torch

    from mlflow_roofline.integrations.accelerate import AccelerateHook

    config = _config
    assert config is not None
    loop = _loops.setdefault(accelerator, _Loop())
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
    original = optimizer.step
    accelerator_ref = weakref.ref(accelerator)

    @functools.wraps(original)
    def step(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        owner = accelerator_ref()
        if owner is not None:
            loop.step(owner)
        return result

    optimizer.step = step
    optimizer._roofline_counted = True


def _close_at_exit(loop: _Loop) -> None:
    """At exit, a loop ``end_training`` never closed: log it, FAILED when an exception ended the process."""
    error = getattr(sys, "last_value", None)  # set when an uncaught exception ends the interpreter
    try:
        loop.close(failed=error is not None, error=error)
    except Exception:  # the interpreter is exiting; nothing more to do
        logger.exception("roofline autolog: could not log the loop at exit")
