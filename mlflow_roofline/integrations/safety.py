"""The safety net of ``mlflow_roofline.autolog()``: a failure of ours is a warning, never the user's training's.

Autolog runs its code inside the user's calls (``Trainer.__init__``, ``Accelerator.prepare``,
a prepared optimizer's ``step``, ``end_training``, the Trainer callback's hooks, a forward
pre-hook). Two rules, learnt from MLflow's ``safe_patch``:

- a patch calls the user's original function outside any ``try`` of ours that could change
  its outcome (:func:`around`): what it raises reaches the user unchanged (an ``on_error``
  hook only looks at it on its way, to end the job's run), what it returns is returned;
- our code runs through a :class:`JobGuard`, one per measured job: the first ``Exception``
  it raises (the meter, the tracking store, the forecast, our own bug) is one warning
  naming it, the job's measurement is abandoned (the run it opened ends FAILED with the
  reason in ``roofline.error``), and none of our code runs for that job again. A
  ``KeyboardInterrupt`` or ``SystemExit`` goes through. A budget stop is no exception: it
  sets the Trainer's ``should_training_stop`` or Accelerate's trigger.

In a job of several processes a measurement cannot be abandoned on one process alone (the
others would wait for it at the next gathering of samples, and their collectives would
meet the training's): there the warning is followed by the exception, as without the net.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = ["FAILURE_WARNING", "JobGuard", "around", "describe"]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

FAILURE_WARNING = "mlflow_roofline.autolog: measuring this job failed in %s (%s); training continues unmeasured"
"""The one warning of a failure: where (our step that raised) and what (``Type: first line``)."""

_REPORTED = "_roofline_reported"
"""Attribute set on an exception a :class:`JobGuard` reported and re-raised (several processes)."""


def describe(exc: BaseException) -> str:
    """``Type: first line of the message`` (the type alone when the message is empty)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class JobGuard:
    """Runs one job's measurement code: its first failure is one warning and abandons the job.

    Args:
        abandon: called once with the reason (one line) after the first failure; it ends the
            job's measurement (closes the meter, ends the run). What it raises is only logged.
    """

    def __init__(self, abandon: Callable[[str], None] | None = None) -> None:
        self.failure: str | None = None
        """Why the measurement was abandoned (None while it goes on)."""
        self._abandon = abandon

    @property
    def failed(self) -> bool:
        """True once a failure abandoned the job: nothing of ours runs for it any more."""
        return self.failure is not None

    def run(self, what: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R | None:
        """``fn(*args, **kwargs)``, or None when it raised (``what``: our step, for the warning) or the job failed."""
        if self.failure is not None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            self.fail(what, exc)
            return None

    def fail(self, what: str, exc: Exception) -> None:
        """Report ``exc``, raised by our ``what``, and abandon the job (once; re-raised with several processes)."""
        if self.failure is not None:
            return
        self.failure = f"measuring failed in {what} ({describe(exc)}); training went on unmeasured"
        logger.warning(FAILURE_WARNING, what, describe(exc))
        logger.debug("mlflow_roofline.autolog: the failure in %s", what, exc_info=exc)
        if _several_processes():
            setattr(exc, _REPORTED, True)
            raise exc  # abandoning on this process alone would leave the others waiting for it
        if self._abandon is None:
            return
        try:
            self._abandon(self.failure)
        except Exception as second:  # the store or the meter is broken: nothing more to end
            logger.debug("mlflow_roofline.autolog: abandoning the job failed too", exc_info=second)


def around(
    original: Callable[..., R],
    what: str,
    *,
    before: Callable[..., object] | None = None,
    after: Callable[..., object] | None = None,
    on_error: Callable[..., object] | None = None,
) -> Callable[..., R]:
    """``original`` with our ``before(*args, **kwargs)`` and ``after(result, *args, **kwargs)`` around it.

    The original's exceptions and its result are the caller's: what it raises (a
    ``KeyboardInterrupt`` included) is shown to ``on_error(exc, *args, **kwargs)`` and raised
    on unchanged, whatever ``on_error`` does (what it raises is one warning, never raised).
    What ``before``/``after`` raise is one warning each time (a job's own code reports
    through its :class:`JobGuard`, so this catches only what runs outside any job); with
    several processes it is raised after the warning, as :meth:`JobGuard.fail` does.
    """

    def ours(fn: Callable[..., object], *args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception as exc:
            if not getattr(exc, _REPORTED, False):  # a JobGuard's, re-raised: reported already
                logger.warning(FAILURE_WARNING, what, describe(exc))
                logger.debug("mlflow_roofline.autolog: the failure in %s", what, exc_info=exc)
            if _several_processes():
                raise

    @functools.wraps(original)
    def patched(*args: Any, **kwargs: Any) -> R:
        if before is not None:
            ours(before, *args, **kwargs)
        try:
            result = original(*args, **kwargs)  # the user's: what it raises goes on unchanged
        except BaseException as exc:
            if on_error is not None:
                _looking(on_error, what, exc, *args, **kwargs)
            raise
        if after is not None:
            ours(after, result, *args, **kwargs)
        return result

    return patched


def _looking(on_error: Callable[..., object], what: str, exc: BaseException, *args: Any, **kwargs: Any) -> None:
    """``on_error(exc, ...)`` while the user's ``exc`` is on its way: what it raises is one warning, never raised."""
    try:
        on_error(exc, *args, **kwargs)
    except Exception as ours:
        logger.warning(FAILURE_WARNING, what, describe(ours))
        logger.debug("mlflow_roofline.autolog: the failure in %s", what, exc_info=ours)


def _several_processes() -> bool:
    """True inside a ``torch.distributed`` job of more than one process."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
