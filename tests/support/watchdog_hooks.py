"""A hook for the watchdog tests: it leaves a file saying it was called, and why."""

from __future__ import annotations

from pathlib import Path


def touch(path: str, reason: str) -> None:
    """Write ``reason`` (the watchdog's account of the launcher's death) to ``path``."""
    Path(path).write_text(reason)
