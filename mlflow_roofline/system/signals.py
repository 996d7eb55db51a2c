"""Signal handling in one place: SIGTERM and SIGINT as exceptions (so that whatever was in
flight can end its runs KILLED), and ignoring them during cleanup. (``measure`` passes them
on to its command's process tree: :mod:`mlflow_roofline.measure.command_process`.)"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

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


def ignore_stop_signals() -> None:
    """From now on SIGTERM and SIGINT are ignored: cleanup that must end runs is not cut short.

    Outside the main thread this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
