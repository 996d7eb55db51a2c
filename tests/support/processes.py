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
