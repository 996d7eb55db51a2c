"""A child command's whole process tree, followed from the process that started it.

A command's descendants may detach: a daemon forks twice (or calls ``setsid``) so that
its parent exits and it is left without one. Linux hands such an orphan to the nearest
ancestor that declared itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``),
else to init. :func:`subreaping` makes this process that ancestor while a command runs, so
that every process the command starts stays in this process's tree, detached or not: CPU
meters that walk the tree see it, and :meth:`ProcessTree.stop` reaches it. Afterwards the
process is what it was before: a long-lived caller (a test runner, a notebook calling
``measure`` in-process) must not go on adopting orphans of unrelated process groups, which
it would never reap (their zombies keep a stopped server's group id alive).

An adopted orphan is this process's child: :meth:`ProcessTree.adopt` reaps the ones that
have exited (their CPU time then lands in ``getrusage(RUSAGE_CHILDREN)``, where the
``estimate`` meter reads it) and names the new ones, for the watchdog.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator

import psutil

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, arg: int | ctypes.c_void_p) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def is_subreaper() -> bool:
    """Whether this process adopts the orphans among its descendants now."""
    flag = ctypes.c_int(0)
    return _prctl(PR_GET_CHILD_SUBREAPER, ctypes.cast(ctypes.byref(flag), ctypes.c_void_p)) and bool(flag.value)


@contextlib.contextmanager
def subreaping() -> Iterator[bool]:
    """Inside the block this process adopts the orphans among its descendants; yields False where the
    system cannot (not Linux). Afterwards it is a subreaper again only if it was one before."""
    before = is_subreaper()
    followed = _prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        yield followed
    finally:
        if followed and not before:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)


class ProcessTree:
    """The processes a command started from this process: the command, its descendants and adopted orphans.

    Args:
        root_pid: the command's process (waited for by its ``Popen``, never reaped here).
        foreign: pids of this process's children that are not the command's (the watchdog),
            left out of the tree with their descendants.
    """

    def __init__(self, root_pid: int, foreign: set[int]) -> None:
        self.root_pid = root_pid
        self.foreign = set(foreign)
        self.adopted: set[int] = set()
        self._me = psutil.Process()

    def members(self) -> list[psutil.Process]:
        """The tree's processes now (zombies not yet reaped included); empty if ``/proc`` cannot be read."""
        try:
            children = self._me.children()
            descendants = self._me.children(recursive=True)
        except psutil.Error:
            return []
        foreign = {p.pid for p in children if p.pid in self.foreign}
        for child in children:
            if child.pid in foreign:
                with contextlib.suppress(psutil.Error):
                    foreign.update(p.pid for p in child.children(recursive=True))
        return [p for p in descendants if p.pid not in foreign]

    def adopt(self, thorough: bool = False) -> list[int]:
        """Reap adopted orphans that have exited; return the pids of those adopted since the last call.

        ``thorough``: list this process's children from all of ``/proc`` (milliseconds), not
        from the kernel's per-thread lists (a tenth of that, which may miss a child that is
        being born or reparented at that instant: the next call sees it).
        """
        children = None if thorough else _listed_children()
        if children is None:
            try:
                children = {p.pid for p in self._me.children()}
            except psutil.Error:
                return []
        new: list[int] = []
        for pid in children:
            if pid == self.root_pid or pid in self.foreign:
                continue
            if pid not in self.adopted:
                self.adopted.add(pid)
                new.append(pid)
        for pid in list(self.adopted):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # already reaped
                done = pid
            if done == pid:
                self.adopted.discard(pid)
        return new

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every live process of the tree."""
        for proc in self.members():
            with contextlib.suppress(psutil.Error, OSError):
                proc.send_signal(signum)

    def stop(self, grace_s: float) -> int:
        """End what is left of the tree: SIGTERM, up to ``grace_s`` seconds, then SIGKILL; reap; return how many.

        Call it once the command's own process has been waited for (it reaps this
        process's children, which would take the exit status from the command's ``Popen``).
        """
        left = [p for p in self.members() if p.pid != self.root_pid]
        for proc in left:
            with contextlib.suppress(psutil.Error, OSError):
                proc.terminate()
        _, alive = psutil.wait_procs(left, timeout=grace_s)
        for proc in alive:
            with contextlib.suppress(psutil.Error, OSError):
                proc.kill()
        psutil.wait_procs(alive, timeout=grace_s)
        self.adopt(thorough=True)
        return len(left)


def _listed_children() -> set[int] | None:
    """This process's children from ``/proc/self/task/*/children``; None where the kernel has no such list."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):  # no CONFIG_PROC_CHILDREN, or no /proc
        return None
    found: set[int] = set()
    try:
        tasks = os.listdir("/proc/self/task")
        for tid in tasks:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a thread that just ended
                with open(f"/proc/self/task/{tid}/children") as listing:
                    found.update(int(pid) for pid in listing.read().split())
    except OSError:
        return None
    return found
