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
- ``lightning.pytorch.Trainer.fit`` (``pytorch_lightning.Trainer.fit`` where only that package
  is installed, or where it was imported before ``autolog``): every ``fit`` gets a
  :class:`~mlflow_roofline.integrations.lightning.AutologCallback` (none when the user passed
  a Lightning ``RooflineCallback``). It opens or joins its run at ``on_train_start``, inside
  ``fit``: by then ``mlflow.pytorch.autolog()`` has opened its run around ``fit`` (whichever
  of the two patches is outside), and Lightning's ``MLFlowLogger`` gives its run, so one run
  holds Lightning's metrics and ours. The Trainer's ``__init__`` too: on a rank other than 0
  (a process Lightning's launcher or torchrun started), under ``mlflow.pytorch.autolog()``,
  the instance's ``fit`` runs without MLflow's autologging, which would leave an empty run
  per rank (:mod:`~mlflow_roofline.tracking.autologging`).

Every patch and the callback's hooks run our code through the safety net of
:mod:`~mlflow_roofline.integrations.safety`: the user's original function runs outside
our ``try`` (its exceptions and result are the user's), and a failure of ours (the meter,
the tracking store, the forecast) is one warning; the job then trains on unmeasured, its
own run ended FAILED with the reason in ``roofline.error``.

Importing this module imports neither transformers, accelerate nor Lightning; ``autolog``
patches each only where it is installed.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import importlib.util
import logging
import sys
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

from mlflow_roofline.integrations.options import LIGHTNING_PACKAGES, TrackOptions
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
    patched: Callable[..., Any]

    def undo(self) -> None:
        """Put the original back, unless another patch (``mlflow.pytorch.autolog``'s) was laid over
        ours since: removing ours would remove that one too, so ours stays, inert without a config."""
        if self.owner.__dict__.get(self.name) is self.patched:
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
    """Measure every Hugging Face ``Trainer`` job, Accelerate loop and Lightning ``fit`` this process runs.

    Args:
        disable: undo the patches (jobs already running keep being measured).
        log_every_n_steps: log energy (and the forecast) every this many optimizer steps;
            None: the Trainer's own ``logging_steps`` (Lightning's ``log_every_n_steps``), and every
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
    patched = _patch_transformers() + _patch_accelerate() + _patch_lightning()
    if not silent:
        measured = ", ".join(patched) or "nothing (no library it patches is installed)"
        logger.info("roofline autolog: measuring %s", measured)


def enabled() -> bool:
    """Whether :func:`autolog` is on in this process."""
    return _config is not None


def _replace(owner: type, name: str, patched: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace ``owner.name`` by ``patched(original)`` (an :func:`~mlflow_roofline.integrations.safety.around`)."""
    original = owner.__dict__[name]
    replacement = patched(original)
    setattr(owner, name, replacement)
    _patches.append(_Patch(owner, name, original, replacement))


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


# -- lightning --------------------------------------------------------------------------
def _patch_lightning() -> list[str]:
    """Patch ``fit`` (and ``__init__``) of ``lightning.pytorch.Trainer`` and ``pytorch_lightning.Trainer``
    when each is imported: now for one already imported, else at its import (importing Lightning costs
    seconds that a Hugging Face job must not pay); the names of those installed."""
    from mlflow_roofline.tracking.autologging import when_imported

    installed: list[str] = []
    for package in LIGHTNING_PACKAGES:
        if importlib.util.find_spec(package.split(".")[0]) is None:
            continue
        when_imported(package, _patch_lightning_trainer)
        installed.append(f"{package}.Trainer")
    return installed


def _patch_lightning_trainer(module: ModuleType) -> None:
    """The post-import hook of a Lightning package: patch its ``Trainer`` while autolog is on."""
    if _config is None or any(p.owner is module.Trainer for p in _patches):
        return
    _replace(module.Trainer, "fit", _fit_patch(f"{module.__name__}.Trainer.fit"))
    _replace(
        module.Trainer,
        "__init__",
        lambda original: around(original, "Lightning's Trainer.__init__", after=_quiet_other_ranks),
    )


def _fit_patch(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return lambda original: around(original, what, before=_before_fit)


def _before_fit(trainer: Any, *args: Any, **kwargs: Any) -> None:
    """Add a Lightning :class:`~mlflow_roofline.integrations.lightning.AutologCallback` (none if the user
    passed one)."""
    from mlflow_roofline.integrations.lightning import AutologCallback, RooflineCallback

    config = _config
    if config is None or any(isinstance(c, RooflineCallback) for c in trainer.callbacks):
        return
    trainer.callbacks.append(AutologCallback(log_every_n_steps=config.log_every_n_steps, **config.options))


def _quiet_other_ranks(_result: None, trainer: Any, *args: Any, **kwargs: Any) -> None:
    """On a rank other than 0, run this Trainer's ``fit`` without MLflow's autologging (one run per job).

    Set on the instance, so it runs before MLflow's patch of the class's ``fit`` whichever patched last.
    """
    if _config is None or "mlflow" not in sys.modules:  # without mlflow imported, its autologging is off
        return
    from mlflow_roofline.integrations.lightning import lightning_rank
    from mlflow_roofline.tracking.autologging import mlflow_autologging_on, without_mlflow_autologging

    if lightning_rank() != 0 and mlflow_autologging_on("pytorch"):
        trainer.fit = without_mlflow_autologging(trainer.fit)


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
