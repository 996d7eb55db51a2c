"""Signal handling in one place: SIGTERM and SIGINT as exceptions (so that whatever was in
flight can end its runs KILLED), held back over a step that must not be cut in two, and
ignoring them during cleanup. (``measure`` passes them on to its command's process tree:
:mod:`mlflow_roofline.measure.command_process`.)"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def raising_on_signals(make_error: Callable[[int], BaseException]) -> Iterator[None]:
    """Inside the block, SIGTERM or SIGINT raises ``make_error(signal number)``.

    The previous handlers come back afterwards. Outside the main thread, where Python
    lets no one set handlers, the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise make_error(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def holding_stop_signals() -> Iterator[None]:
    """Inside the block, a SIGTERM or SIGINT waits; once the block is done, it is delivered to
    the handler in place again (:func:`raising_on_signals`' raises there).

    For work that must not be cut in two, such as a few store calls that create a run,
    log into it and end it: an exception raised in the middle of a database call can
    leave the store's connection unusable, and the run could then not be ended. A second
    signal during the block is not held: it goes to the handler in place at once (a
    user who insists, a store that hangs). Outside the main thread the block runs
    unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous: dict[signal.Signals, Any] = {}

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) > 1:
            for sig, old in previous.items():
                signal.signal(sig, old)
            signal.raise_signal(signum)

    previous.update({sig: signal.signal(sig, hold) for sig in STOP_SIGNALS})
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if len(received) == 1:
            signal.raise_signal(received[0])


def ignore_stop_signals() -> None:
    """From now on SIGTERM and SIGINT are ignored: cleanup that must end runs is not cut short.

    Outside the main thread this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


DEFERRED_SIGNALS_LIMIT = 4
"""Stop signals :func:`deferring_stop_signals` holds back in one block; the next goes through (a user who insists)."""


@contextlib.contextmanager
def deferring_stop_signals(limit: int = DEFERRED_SIGNALS_LIMIT) -> Iterator[list[int]]:
    """Inside the block, SIGTERM and SIGINT are only noted (the list yielded, in order of arrival).

    For ending a run: a second and a third Ctrl-C while MLflow flushes and ends the run must
    not leave it RUNNING. Past ``limit`` signals the previous handlers come back and the
    signal is delivered to them at once. Nothing is delivered afterwards: the caller decides
    (:func:`deliver_noted`). Outside the main thread the block runs unchanged.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous: dict[signal.Signals, Any] = {}

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) > limit:
            for sig, old in previous.items():
                signal.signal(sig, old)
            signal.raise_signal(signum)

    previous.update({sig: signal.signal(sig, note) for sig in STOP_SIGNALS})
    try:
        yield received
    finally:
        if len(received) <= limit:
            for sig, old in previous.items():
                signal.signal(sig, old)


def deliver_noted(received: list[int]) -> None:
    """Deliver the first signal :func:`deferring_stop_signals` noted to the handler in place now (if any)."""
    if received:
        signal.raise_signal(received[0])
