"""The measured command's process tree: this process adopts orphans only while a command runs."""

from __future__ import annotations

import sys

import pytest

from mlflow_roofline.system.process_tree import is_subreaper, subreaping

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are a Linux feature")


def test_this_process_is_a_subreaper_only_inside_the_block() -> None:
    """A long-lived caller (this test runner) must not keep adopting orphans of unrelated process
    groups after ``measure`` ran in it: it would never reap them, and their zombies keep a stopped
    server's group id answering (seen as a scoring-server test failing after an in-process measure)."""
    assert not is_subreaper()
    with subreaping() as followed:
        assert followed and is_subreaper()
    assert not is_subreaper()


def test_a_command_that_cannot_start_leaves_no_subreaper_behind() -> None:
    from mlflow_roofline.measure.command_process import run_command
    from mlflow_roofline.system.watchdog import Watchdog

    with Watchdog() as watchdog, pytest.raises(OSError):
        run_command(["/nonexistent/command"], watchdog)
    assert not is_subreaper()
