"""The sweep's counted FLOPs of one training step, by workload, the next one counted ahead.

Rank 0 of a job counts its step's FLOPs (:func:`~mlflow_roofline.train.flop_count.count_step_flops`:
a forward and backward pass on the ``meta`` device, 50-120 ms of one core on the 2-core dev VM)
before it builds its model, unless the sweep hands it the count. :class:`StepFlops` keeps
what the sweep's jobs counted, so a workload measured again (another strategy or device
count) is counted once per sweep; and once a job's ranks have ended it counts the next
planned workload nobody counted yet, in a process forked from the warm server, on the core
the sweep's own logging of that job (its store batch, power plot, end of run: ~0.15 s of
one core) leaves idle. The next job's rank 0 is then handed the count and starts building
its model at once.

No count ahead runs while a job is measured: the sweep collects it (waits for it, at most
:data:`AHEAD_WAIT_S`) before it launches the next job, whichever job that is. A count ahead
that fails, or is not done by then, is dropped, and the rank counts as it would have.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.train.run import parse_config
from mlflow_roofline.train.warm import WarmServer, detach_from_server

AHEAD_WAIT_S = 60.0
"""Seconds the sweep waits for a count ahead before it drops it (the rank then counts)."""
AHEAD_FILE = "flops-{workload}.txt"
"""The file a count ahead writes the counted FLOPs of one step to, in the sweep's folder."""
LOOKAHEAD = 8
"""How many planned configurations after the one just measured are looked at for a workload to count."""


@dataclasses.dataclass(frozen=True)
class _Ahead:
    """A count ahead under way: its workload hash, its process and the file it writes."""

    workload: str
    process: BaseProcess
    path: Path


class StepFlops:
    """Counted FLOPs of one step by workload hash, for one sweep's warm launch.

    Args:
        hardware: the sweep's hardware name (part of each workload hash).
        planned: the configurations the sweep plans to run, in order (what is counted ahead).
        server: the warm server counts ahead are forked from.
        folder: the sweep's own folder, where a count ahead writes its number
            (:data:`AHEAD_FILE`, named by its workload).
    """

    def __init__(self, hardware: str, planned: Sequence[TrainConfig], server: WarmServer, folder: str) -> None:
        self.hardware = hardware
        self.planned = list(planned)
        self._first_index: dict[TrainConfig, int] = {}
        for index, config in enumerate(self.planned):
            self._first_index.setdefault(config, index)
        self.server = server
        self.folder = folder
        self._counted: dict[str, int] = {}
        self._tried: set[str] = set()  # workloads counted ahead once (done or dropped): never again
        self._ahead: _Ahead | None = None

    def known(self, workload: str) -> int | None:
        """The counted FLOPs of one step of ``workload``, None if not counted; first collects a count ahead.

        Called before a job is launched: no count ahead is left running once it returns.
        """
        self._collect()
        return self._counted.get(workload)

    def record(self, workload: str, flops_per_step: int) -> None:
        """Keep what a job's rank 0 counted for ``workload``."""
        self._counted[workload] = flops_per_step

    def count_ahead(self, after: TrainConfig) -> None:
        """Start counting the first planned workload after ``after`` that nobody counted yet (if any).

        Call it once a job's ranks have ended: the count takes a core until the next
        :meth:`known` collects it. A count that cannot start is skipped: it never fails the
        job just measured.
        """
        if self._ahead is not None:
            return
        for workload, config in self._upcoming(after):
            if workload in self._counted or workload in self._tried:
                continue
            self._tried.add(workload)
            path = Path(self.folder, AHEAD_FILE.format(workload=workload))
            process = self.server.context.Process(
                target=count_into, args=(config.to_params(), str(path)), name="roofline-flops-ahead", daemon=True
            )
            try:
                process.start()
            except (OSError, EOFError):  # no fork, or no server: the rank counts; its job reports the server
                return
            self._ahead = _Ahead(workload, process, path)
            return

    def close(self) -> None:
        """Stop a count ahead still running (the sweep is ending)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            _stop(ahead.process)
            _remove(ahead.path)

    def _upcoming(self, after: TrainConfig) -> list[tuple[str, TrainConfig]]:
        """The :data:`LOOKAHEAD` planned configurations after ``after`` (resolved as train resolves them), hashed."""
        start = self._first_index.get(after, -1) + 1
        upcoming = []
        for config in self.planned[start : start + LOOKAHEAD]:
            with contextlib.suppress(RooflineError):  # a configuration train refuses fails in its own run
                checked = parse_config(config.to_params())
                upcoming.append((checked.workload_hash(self.hardware), checked))
        return upcoming

    def _collect(self) -> None:
        ahead = self._ahead
        if ahead is None:
            return
        ahead.process.join(AHEAD_WAIT_S)  # a Ctrl-C here leaves it to close()
        self._ahead = None
        if ahead.process.exitcode is None:
            _stop(ahead.process)
        elif ahead.process.exitcode == 0:
            with contextlib.suppress(OSError, ValueError):
                self._counted[ahead.workload] = int(ahead.path.read_text())
        _remove(ahead.path)


def count_into(params: dict[str, str], path: str) -> None:
    """In a process forked from the warm server: count one step's FLOPs of ``params`` and write them to ``path``.

    Like a rank, it leaves the sweep's process group (a Ctrl-C is the sweep's to handle: it stops
    this process) and ends with the server. A count that fails exits 1 without a word: the rank
    then counts, and reports the same failure in the configuration's run.
    """
    os.setsid()
    detach_from_server()
    try:
        from mlflow_roofline.train.flop_count import count_step_flops  # preloaded by the server: no import cost

        flops = count_step_flops(TrainConfig.from_mapping(params))
        part = _part(Path(path))
        part.write_text(str(flops))
        os.replace(part, path)
    except Exception:
        os._exit(1)


def _stop(process: BaseProcess) -> None:
    process.kill()
    process.join()


def _part(path: Path) -> Path:
    """Where a count ahead writes its number before it moves it to ``path`` in one step."""
    return path.with_name(path.name + ".part")


def _remove(path: Path) -> None:
    """Remove a count ahead's file and its part, if there (a count stopped while it wrote)."""
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the part may be a folder where a test blocks the count
        _part(path).unlink(missing_ok=True)
