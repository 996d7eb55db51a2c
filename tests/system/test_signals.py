"""SIGTERM and SIGINT as exceptions that library code cannot swallow.

The sweep and train turn a stop signal into an exception so that the run in flight ends
KILLED. The signal can land inside library code that guards itself with
``except Exception`` (MLflow's system-metrics monitor does, and logs "Failed to start
monitoring system metrics: interrupted by SIGTERM"); the stop must go through it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.system.signals import holding_stop_signals, raising_on_signals

STOP_ERRORS: dict[str, Callable[[int], BaseException]] = {
    "sweep": Interrupted,
    "train": Interrupted,
}


@pytest.mark.parametrize("who", sorted(STOP_ERRORS))
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_goes_through_a_library_except_exception(who: str, signum: signal.Signals) -> None:
    swallowed_by: list[BaseException] = []
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(BaseException) as caught, raising_on_signals(STOP_ERRORS[who]):
        try:  # what a library does around a call it thinks may fail
            os.kill(os.getpid(), signum)
            time.sleep(10)  # the handler runs at the next bytecode, well before this ends
        except Exception as exc:
            swallowed_by.append(exc)
    assert not swallowed_by, f"the {who} stop was swallowed by `except Exception`: {swallowed_by[0]!r}"
    assert not isinstance(caught.value, Exception)
    assert isinstance(caught.value, Interrupted)
    assert caught.value.signum == signum
    assert signal.Signals(signum).name in str(caught.value)
    assert {sig: signal.getsignal(sig) for sig in before} == before  # the old handlers are back


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_held_stop_signal_waits_for_the_block_then_raises(signum: signal.Signals) -> None:
    """A store call that creates or ends a run completes before the stop is raised."""
    steps: list[str] = []
    with pytest.raises(Interrupted) as caught, raising_on_signals(Interrupted):
        with holding_stop_signals():
            os.kill(os.getpid(), signum)
            time.sleep(0.2)  # unheld, the handler would have raised before this returned
            steps.append("the held step completed")
        steps.append("after the block")  # never: the held signal is raised as the block ends
    assert steps == ["the held step completed"]
    assert caught.value.signum == signum


def test_a_second_stop_signal_is_not_held() -> None:
    """A user who insists (or a store call that hangs) is not held back: the second signal raises at once."""
    steps: list[str] = []
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(Interrupted), raising_on_signals(Interrupted):
        with holding_stop_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            steps.append("held")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)  # the second signal raises well before this ends
            steps.append("never")
    assert steps == ["held"]
    assert {sig: signal.getsignal(sig) for sig in before} == before  # the old handlers are back
