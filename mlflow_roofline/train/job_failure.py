"""Why a training job failed, in one line that names the rank that failed first.

When one rank of a multi-process job dies, the others fail after it (a gloo or NCCL
connection closed by the dead peer) or are stopped by torchrun (SIGTERM). The surviving
ranks' errors are consequences; the line must name the cause. What is known per rank:

- its own traceback (``error-rank<i>.txt``, written by a rank that raised; the file's
  modification time is when it failed);
- its exit code: from the warm launcher, which follows each rank itself
  (:mod:`mlflow_roofline.train.warm`), or from torchrun's failure summary
  (``rank : 1 (local_rank: 1)`` / ``exitcode : -9``), which lists every rank that failed;
  both include the ranks the launcher itself stopped with SIGTERM after the first failure.

The first failure is, in this order: a rank killed by a signal other than SIGTERM
without a traceback (SIGKILL from the OOM killer or a user, SIGSEGV: nothing in the job
sends these, so they are causes); else the rank whose traceback was written first;
else a rank that died by SIGTERM; else a rank with a non-zero exit status.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from pathlib import Path

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.train.job_io import ERROR_FILE

_SUMMARY_ENTRY = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


class TrainingFailed(RooflineError):
    """The training job failed after it started (a crash, an OOM, a rank that died).

    ``str()`` is one line (the CLI prints it); :attr:`detail` holds the tracebacks or the
    job's last output, which go to the ``roofline.error`` tag and the ``error.txt`` artifact.
    """

    def __init__(self, summary: str, detail: str = "") -> None:
        super().__init__(summary)
        self.detail = detail


def rank_exit_codes(output_tail: str) -> dict[int, int]:
    """Each failed rank's exit code from torchrun's failure summary (negative: killed by that signal)."""
    return {int(rank): int(code) for rank, code in _SUMMARY_ENTRY.findall(output_tail)}


def job_error(
    job_dir: Path, returncode: int, output_tail: str, nproc: int, codes: Mapping[int, int] | None = None
) -> TrainingFailed:
    """The failure of a job of ``nproc`` ranks: the rank that failed first and how, then what the others did.

    ``codes``: each failed rank's exit code when the launcher knows them (else they are
    read from torchrun's summary in ``output_tail``).
    """
    how = f"killed by {signal_name(-returncode)}" if returncode < 0 else f"exit status {returncode}"
    tracebacks = {int(p.stem.removeprefix("error-rank")): p for p in job_dir.glob(ERROR_FILE.format(rank="*"))}
    codes = dict(codes) if codes is not None else rank_exit_codes(output_tail)
    killed = sorted(r for r, c in codes.items() if c < 0 and -c != signal.SIGTERM and r not in tracebacks)
    raised = sorted(tracebacks, key=lambda r: (tracebacks[r].stat().st_mtime, r))
    terminated = sorted(r for r, c in codes.items() if c == -signal.SIGTERM and r not in tracebacks)
    exited = sorted(r for r, c in codes.items() if c > 0 and r not in tracebacks)
    order = [*killed, *raised, *terminated, *exited]
    detail = "\n".join(f"--- rank {r} ---\n{tracebacks[r].read_text().rstrip()}" for r in raised)
    if not order:
        cause = "a process died without a traceback"
        return TrainingFailed(
            f"training job failed ({how}): {cause} (out of memory?)",
            output_tail.rstrip(),
        )
    first = order[0]
    cause = _rank_cause(first, codes.get(first), tracebacks.get(first))
    if nproc == 1 and first in tracebacks:
        cause = _last_line(tracebacks[first])  # one process: no rank to name
    if first in killed and raised:
        cause += f"; then rank {raised[0]} failed: {_last_line(tracebacks[raised[0]])}"
    if not detail:
        detail = output_tail.rstrip()
    return TrainingFailed(f"training job failed ({how}): {cause}", detail)


def _rank_cause(rank: int, code: int | None, traceback_file: Path | None) -> str:
    if traceback_file is not None:
        return f"rank {rank}: {_last_line(traceback_file)}"
    if code is not None and code < 0:
        hint = " (out of memory?)" if -code == signal.SIGKILL else ""
        return f"rank {rank} was killed by {signal_name(-code)}{hint}"
    return f"rank {rank} exited with status {code} without a traceback"


def _last_line(path: Path) -> str:
    lines = path.read_text().strip().splitlines()
    return lines[-1] if lines else "unknown error"


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 70`` for a number that names no signal."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
