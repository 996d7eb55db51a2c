"""Walking a launcher's process tree while it changes under the test."""

from __future__ import annotations

from collections.abc import Callable

import psutil


def descendants_running(parent: psutil.Process, command_part: str) -> list[psutil.Process]:
    """``parent``'s descendants whose command line holds ``command_part``."""
    return _descendants(parent, lambda argv: command_part in " ".join(argv))


def descendants_running_exactly(parent: psutil.Process, argv: list[str]) -> list[psutil.Process]:
    """``parent``'s descendants whose command line is ``argv``, word for word.

    Stricter than :func:`descendants_running`: between its fork and its exec, a child has its
    parent's command line, so a launcher whose own arguments hold the command matches a substring
    in every child it is just starting (a watchdog, a probe) before the command itself runs.
    """
    return _descendants(parent, lambda cmdline: cmdline == argv)


def _descendants(parent: psutil.Process, matches: Callable[[list[str]], bool]) -> list[psutil.Process]:
    """``parent``'s descendants whose command line ``matches``.

    A child that ends between the listing and the look (gone, or a zombie not yet reaped:
    psutil raises ``NoSuchProcess`` or its ``ZombieProcess``) is left out.
    """
    found = []
    for child in parent.children(recursive=True):
        try:
            if matches(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found
