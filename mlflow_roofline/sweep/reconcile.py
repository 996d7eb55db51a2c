"""What a sweep does with each planned configuration, given its status in the store.

:func:`reconcile` decides per configuration: run it, wait for the live process of an
earlier sweep, or skip it (done, failed earlier and not retried, running on another
host); :func:`plan_table` and :func:`plan_counts` show that as ``--dry-run`` prints it.
"""

from __future__ import annotations

import collections
import dataclasses

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.sweep.plan import Plan
from mlflow_roofline.sweep.status import (
    ALIVE,
    DONE,
    ELSEWHERE,
    FAILED,
    NEW,
    STALE,
    Outcome,
    Status,
)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One planned configuration, its status in the store when planned, and what the sweep does with it.

    ``action`` is ``run``, ``wait`` (its process from an earlier sweep still runs here)
    or ``skip``. How it ended is the runner's business (:class:`~mlflow_roofline.sweep.status.Outcome`).
    """

    config: TrainConfig
    status: Status
    action: str  # "run", "wait" (in progress here), "skip"
    repeat: int = 0

    @property
    def pending(self) -> bool:
        """Whether this sweep settles it: runs it, or waits for the process that runs it."""
        return self.action in ("run", "wait")

    @property
    def key(self) -> tuple[TrainConfig, int]:
        """The unit this entry stands for: (configuration, repeat)."""
        return self.config, self.repeat

    @property
    def name(self) -> str:
        """The configuration's run name, with ``#r`` for a repeat after the first."""
        return self.config.run_name + (f"#{self.repeat}" if self.repeat else "")

    @property
    def label(self) -> str:
        """Human-readable status for the plan table."""
        s = self.status
        if s.state == DONE:
            return f"already done (run {s.run_id})"
        if s.state == FAILED:
            tail = f": {s.detail}" if s.detail else ""
            if self.action == "run":
                return f"failed earlier, retrying{tail}"
            return f"failed earlier, not retried (use --retry-failed){tail}"
        if s.state == STALE:
            return f"to run (stale RUNNING run {s.run_id} will be marked KILLED)"
        if s.state == ALIVE:
            return f"in progress (run {s.run_id}); the sweep waits for it"
        if s.state == ELSEWHERE:
            return f"in progress elsewhere ({s.detail}, run {s.run_id}); left alone"
        return "to run"

    def to_dict(self, hardware: str | None, outcome: Outcome | None = None) -> dict[str, object]:
        """JSON-ready form for the plan artifact, with ``outcome`` for the results artifact."""
        out: dict[str, object] = {
            "config": self.config.run_name,
            "config_hash": self.config.config_hash(hardware) if hardware else None,
            "params": self.config.to_params(),
            "repeat": self.repeat,
            "status": self.label,
            "action": self.action,
            "run_id": self.status.run_id,
        }
        if outcome is not None:
            out.update(
                run_id=outcome.run_id,
                result=outcome.status,
                reason=outcome.summary,
                wall_s=round(outcome.wall_s, 3),
                elsewhere=outcome.elsewhere,
            )
        return out


def reconcile(plan: Plan, statuses: dict[tuple[TrainConfig, int], Status], retry_failed: bool) -> list[Entry]:
    """Decide per (configuration, repeat): run it, wait for its live process, or skip it."""
    entries = []
    for config, repeat in plan.units:
        status = statuses.get((config, repeat), Status(NEW))
        if status.state in (NEW, STALE) or (status.state == FAILED and retry_failed):
            action = "run"
        elif status.state == ALIVE:
            action = "wait"
        else:
            action = "skip"
        entries.append(Entry(config, status, action, repeat))
    return entries


def plan_table(entries: list[Entry], plan: Plan) -> str:
    """The plan as a text table (configuration, status) followed by the skipped grid points."""
    width = max([len(e.name) for e in entries] + [len(s.label) for s in plan.skipped] + [6])
    lines = [f"{'#':>4}  {'config':<{width}}  status"]
    for i, e in enumerate(entries, 1):
        lines.append(f"{i:>4}  {e.name:<{width}}  {e.label}")
    for s in plan.skipped:
        lines.append(f"{'-':>4}  {s.label:<{width}}  skipped: {s.reason}")
    return "\n".join(lines)


def plan_counts(entries: list[Entry], plan: Plan) -> dict[str, int]:
    """Counts of the plan: configs, to run, already done, failed earlier (not retried), in progress, skipped."""
    c = collections.Counter(e.status.state for e in entries)
    return {
        "configs": len(entries),
        "to_run": sum(e.action == "run" for e in entries),
        "already_done": c[DONE],
        "failed_earlier": sum(e.status.state == FAILED and e.action == "skip" for e in entries),
        "in_progress": c[ALIVE] + c[ELSEWHERE],
        "skipped_invalid": len(plan.skipped),
    }


def counts_line(counts: dict[str, int]) -> str:
    """One line summarising :func:`plan_counts`."""
    return (
        f"{counts['configs']} configurations: {counts['to_run']} to run, {counts['already_done']} already done, "
        f"{counts['failed_earlier']} failed earlier (not retried), {counts['in_progress']} in progress; "
        f"{_plural(counts['skipped_invalid'], 'grid point')} skipped as impossible"
    )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
