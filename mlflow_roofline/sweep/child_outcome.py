"""How a fresh train process ended: the outcome of its run, and why it died when it did not end the run.

:func:`settle` reads the run once its ``mlflow-roofline train`` process ended: train ended
it FINISHED or FAILED itself, or the process died without doing so (SIGKILL, OOM killer,
timeout) and the run is marked FAILED here, ``roofline.error`` saying how it died and
the last lines of its output (:func:`death_reason`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from mlflow_roofline.core.schema import MAX_TAG_CHARS, TAG_ERROR
from mlflow_roofline.sweep.status import RUN_STATES, Outcome

ERROR_TAIL_LINES = 20
"""Lines of a dead train process's output kept in ``roofline.error``."""

LOG_ARTIFACT_DIR = "sweep"
"""Artifact folder of a failed run's output: ``sweep/<run id>.log``."""


def settle(
    client: Any,
    run_id: str,
    returncode: int | None,
    timed_out: bool,
    timeout_s: float | None,
    log_path: Path,
    wall_s: float,
) -> Outcome:
    """The outcome of run ``run_id`` once its train process ended; the run is sure to be ended.

    Train ended the run itself (FINISHED or FAILED, its own error in ``roofline.error``),
    or the process died without doing so and the run is marked FAILED here with
    :func:`death_reason`. A run that finished just as the timeout struck stays FINISHED.
    """
    status = client.get_run(run_id).info.status
    if status == "FINISHED":
        return Outcome(run_id, "FINISHED", "", wall_s, returncode)
    reason = death_reason(returncode, timed_out, timeout_s, log_path)
    summary = reason.splitlines()[0]
    if status in RUN_STATES or timed_out:
        client.set_tag(run_id, TAG_ERROR, _head_and_tail(reason, summary))
        client.set_terminated(run_id, "FAILED")
        status = "FAILED"
    else:
        # train ended the run itself; its error's last line says what happened
        reason = client.get_run(run_id).data.tags.get(TAG_ERROR) or reason
        lines = [line.strip() for line in reason.splitlines() if line.strip()]
        summary = lines[-1] if lines else status
    with contextlib.suppress(Exception):
        client.log_artifact(run_id, str(log_path), artifact_path=LOG_ARTIFACT_DIR)
    return Outcome(run_id, status, reason, wall_s, returncode, summary)


def _head_and_tail(reason: str, summary: str) -> str:
    """``reason`` within MAX_TAG_CHARS: its first line and as much of its end as fits."""
    if len(reason) <= MAX_TAG_CHARS:
        return reason
    return f"{summary}\n...\n{reason[-(MAX_TAG_CHARS - len(summary) - 5) :]}"


def death_reason(returncode: int | None, timed_out: bool, timeout_s: float | None, log_path: Path) -> str:
    """Why a train process ended without ending its run: timeout, signal or exit code, then its output's tail."""
    if timed_out:
        head = f"train process timed out after {timeout_s:g} s and was killed"
    elif returncode is not None and returncode < 0:
        head = f"train process killed by {signal.Signals(-returncode).name} without ending its run"
    else:
        head = f"train process exited with code {returncode} without ending its run"
    tail = _tail(log_path, ERROR_TAIL_LINES)
    return f"{head}\n{tail}" if tail else head


def _tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of the file at ``path`` (at most its last 16 KiB)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
