"""A train job's running energy, handed from its ranks to the launching process as files.

The ranks meter; only the launching process talks to MLflow. Each rank that reads a meter
appends its train window's running total (:class:`~mlflow_roofline.energy.live.LiveEnergy`)
to ``JOB_DIR/energy-rank<r>.jsonl`` (:class:`LivePublisher`): a line when the window
opens, one after the first step past every ``interval_s`` seconds (the training loop's own
thread: one meter read and one short append; no thread of its own) and the window's own
measurement when it closes. The launching process reads the new lines at MLflow's sampling
interval (:class:`LiveFiles`) and logs them as the run's ``system/..._energy_wh``
(:class:`~mlflow_roofline.tracking.system_energy.SystemEnergy`).

One line: ``{"t": unix seconds, "source": meter, "j": {device: cumulative joules}}``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from mlflow_roofline.energy.live import LiveEnergy

LIVE_FILE = "energy-rank{rank}.jsonl"
LIVE_GLOB = "energy-rank*.jsonl"

Reading = tuple[float, dict[str, float]]


class LivePublisher:
    """Appends ``live``'s readings to ``path``: on :meth:`publish` with ``force``, else at most every ``interval_s``."""

    def __init__(self, live: LiveEnergy, path: Path, interval_s: float) -> None:
        self.live = live
        self.path = path
        self.interval_s = interval_s
        self._due = 0.0
        self._fd: int | None = None

    def publish(self, force: bool = False) -> None:
        """Append the readings since the last call (the window's edges: ``force``; a step's end: when due)."""
        now = time.monotonic()
        if not force and now < self._due:
            return
        self._due = now + self.interval_s
        lines = [json.dumps({"t": t, "source": self.live.source, "j": j}) + "\n" for t, j in self.live.take()]
        if not lines:
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, "".join(lines).encode())  # one append: a reader never sees half of it twice

    def close(self) -> None:
        """Close the file."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class LiveFiles:
    """The readings the ranks of the job in ``job_dir`` appended since the last :meth:`take`.

    Each new line is one reading: at its time, the joules per device of every rank's latest
    line, summed over the ranks (``cpu`` of two ``estimate`` ranks adds up; GPUs have a
    key each). Every rank's figures only grow, so the sums do too.
    """

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        self.source: str | None = None
        self._offsets: dict[Path, int] = {}
        self._latest: dict[Path, dict[str, float]] = {}

    def take(self) -> list[Reading]:
        """The new complete lines of every rank's file, in time order, as job-wide readings."""
        lines: list[tuple[float, Path, dict[str, float]]] = []
        for path in sorted(self.job_dir.glob(LIVE_GLOB)):
            for record in self._new_records(path):
                self.source = self.source or str(record["source"])
                lines.append((float(record["t"]), path, {k: float(v) for k, v in record["j"].items()}))
        readings: list[Reading] = []
        for unix_s, path, joules in sorted(lines, key=lambda line: line[0]):
            self._latest[path] = joules
            total: dict[str, float] = {}
            for rank_joules in self._latest.values():
                for device, value in rank_joules.items():
                    total[device] = total.get(device, 0.0) + value
            readings.append((unix_s, total))
        return readings

    def _new_records(self, path: Path) -> list[dict]:
        """The complete lines appended to ``path`` since the last read, parsed."""
        offset = self._offsets.get(path, 0)
        with open(path, "rb") as file:
            file.seek(offset)
            data = file.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offsets[path] = offset + len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]
