"""Walking a launcher's process tree while it changes under the test."""

from __future__ import annotations

import psutil


def descendants_running(
    parent: psutil.Process, command_part: str, not_named: str | None = None
) -> list[psutil.Process]:
    """``parent``'s descendants whose command line holds ``command_part`` (and whose name is not ``not_named``).

    A child that ends between the listing and the look (gone, or a zombie not yet reaped:
    psutil raises ``NoSuchProcess`` or its ``ZombieProcess``) is left out.
    """
    found = []
    for child in parent.children(recursive=True):
        try:
            if command_part in " ".join(child.cmdline()) and (not_named is None or child.name() != not_named):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def descendants_running_exactly(parent: psutil.Process, argv: list[str]) -> list[psutil.Process]:
    """``parent``'s descendants whose command line is ``argv``, word for word.

    Stricter than :func:`descendants_running`: between its fork and its exec, a child has its
    parent's command line, so a launcher whose own arguments hold the command matches a substring
    in every child it is just starting (a watchdog, a probe) before the command itself runs.
    """
    found = []
    for child in parent.children(recursive=True):
        try:
            if child.cmdline() == argv:
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found
