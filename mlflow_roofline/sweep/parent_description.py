"""The sweep run's description: the Markdown the MLflow UI shows on the parent run's page.

It says what the spec asked for, how many configurations finished, failed or were
skipped and why, and sums the finished runs' energy and time per strategy and device
count, so the parent run tells the sweep's story without opening any child. It is
rewritten each time the sweep logs its counts.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S, STRATEGIES
from mlflow_roofline.sweep.plan import Plan
from mlflow_roofline.sweep.reconcile import Entry
from mlflow_roofline.sweep.spec import SweepSpec
from mlflow_roofline.sweep.status import DONE, FAILED, Outcome, Status
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.notes import md_table, set_description

MAX_LISTED = 12
"""Longest list of failed or skipped configurations written out; the rest are counted."""

_figures: dict[str, tuple[float | None, float | None]] = {}
"""(energy_j, time_s) of finished runs already read: a finished run's metrics do not change."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One planned configuration as the description shows it: its entry and, once settled, its outcome."""

    config: TrainConfig
    status: Status
    action: str
    outcome: Outcome | None


def sweep_markdown(
    spec: SweepSpec, plan: Plan, entries: Sequence[Row], figures: Mapping[str, tuple[float | None, float | None]]
) -> str:
    """The description of a sweep in its current state.

    Args:
        spec, plan, entries: the sweep's spec, plan and rows (outcomes set for those settled).
        figures: run id -> (``energy_j`` in joules or None, ``time_s`` in seconds or None)
            of the finished runs.
    """
    parts = [_heading(spec, plan), _progress(plan, entries), _strategy_table(entries, figures)]
    parts += [_failures(entries), _skipped(plan)]
    parts.append(
        "Artifacts: `spec.yaml` (the spec as read), `plan.txt`, `plan.json`, `skipped.json` and, "
        "once done, `results.json`. Each configuration is a child run: expand this run in the runs table."
    )
    return "\n\n".join(p for p in parts if p) + "\n"


def update_description(
    client: TrackingClient,
    parent_id: str,
    spec: SweepSpec,
    plan: Plan,
    planned: Sequence[Entry],
    outcomes: Mapping[tuple[TrainConfig, int], Outcome],
) -> None:
    """Rewrite the sweep run's description: the plan's entries, their outcomes so far, the finished runs' metrics."""
    entries = [Row(e.config, e.status, e.action, outcomes.get(e.key)) for e in planned]
    for run_id in _finished_run_ids(entries):
        if run_id not in _figures:
            metrics = client.get_run(run_id).data.metrics
            _figures[run_id] = (metrics.get(M_ENERGY_J), metrics.get(M_TIME_S))
    set_description(client, parent_id, sweep_markdown(spec, plan, entries, _figures))


def _finished_run_ids(entries: Sequence[Row]) -> list[str]:
    ids = []
    for entry in entries:
        if entry.outcome is not None:
            if entry.outcome.status == "FINISHED":
                ids.append(entry.outcome.run_id)
        elif entry.status.state == DONE and entry.status.run_id:
            ids.append(entry.status.run_id)
    return ids


def _heading(spec: SweepSpec, plan: Plan) -> str:
    keys = sorted({k for grid in spec.grids for k, values in grid.items() if len(values) > 1})
    lines = [
        f"## Sweep `{spec.name}`",
        f"Spec `{spec.source}` on **{plan.hardware or plan.device}** ({plan.device}), meter `{spec.meter}`, "
        f"{len(spec.grids)} grid(s) varying {', '.join(f'`{k}`' for k in keys) or 'nothing'}.",
    ]
    about = spec.description.strip()
    if about:
        lines.append("> " + about.splitlines()[0])
    return "\n\n".join(lines)


def _progress(plan: Plan, entries: Sequence[Row]) -> str:
    ran = [e.outcome for e in entries if e.outcome is not None]
    finished = sum(outcome.status == "FINISHED" for outcome in ran)
    failed = len(ran) - finished
    done_before = sum(e.status.state == DONE for e in entries)
    not_retried = sum(e.status.state == FAILED and e.action == "skip" for e in entries)
    left = sum(e.action in ("run", "wait") and e.outcome is None for e in entries)
    rows = [
        ["finished in this sweep", str(finished)],
        ["failed in this sweep", str(failed)],
        ["already done (a finished run from earlier)", str(done_before)],
        ["failed earlier, not retried (`--retry-failed` reruns them)", str(not_retried)],
        ["still to run", str(left)],
        ["grid points skipped as impossible", str(len(plan.skipped))],
    ]
    return f"**{len(entries)} configurations planned**\n\n" + md_table(["configurations", "count"], rows, "lr")


def _strategy_table(entries: Sequence[Row], figures: Mapping[str, tuple[float | None, float | None]]) -> str:
    groups: dict[tuple[str, int], list[tuple[float | None, float | None]]] = {}
    for entry in entries:
        for run_id in _finished_run_ids([entry]):
            if run_id in figures:
                groups.setdefault((entry.config.strategy, entry.config.num_devices), []).append(figures[run_id])
    if not groups:
        return "### Energy and time\n\nNo configuration has finished yet."
    order = {s: i for i, s in enumerate(STRATEGIES)}
    rows = []
    for (strategy, devices), values in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])):
        energies = [e for e, _ in values if e is not None]
        times = [t for _, t in values if t is not None]
        rows.append(
            [
                f"`{strategy}`",
                str(devices),
                str(len(values)),
                _num(sum(energies)) if energies else "not measured",
                _num(statistics.median(energies)) if energies else "-",
                _num(sum(times)) if times else "-",
                _num(statistics.median(times)) if times else "-",
            ]
        )
    header = [
        "strategy",
        "devices",
        "runs",
        "energy (J), total",
        "energy (J), median",
        "time (s), total",
        "time (s), median",
    ]
    return (
        "### Energy and time of the finished runs\n\n"
        + md_table(header, rows, "lrrrrrr")
        + "\n\nTotals and medians over the finished runs (`energy_j`, `time_s`: the measured window), "
        "whatever their workload; the fit run compares like with like."
    )


def _failures(entries: Sequence[Row]) -> str:
    failed = [(e, e.outcome) for e in entries if e.outcome is not None and e.outcome.status != "FINISHED"]
    earlier = [e for e in entries if e.status.state == FAILED and e.action == "skip"]
    lines = [f"- `{e.config.run_name}` (run `{o.run_id}`, {o.status}): {_one_line(o.summary)}" for e, o in failed]
    lines += [
        f"- `{e.config.run_name}` (run `{e.status.run_id}`, failed earlier, not retried): "
        f"{_one_line(e.status.detail) or 'see the run'}"
        for e in earlier
    ]
    if not lines:
        return ""
    return "### Failed\n\n" + _capped(lines, "more; see `results.json`")


def _skipped(plan: Plan) -> str:
    if not plan.skipped:
        return ""
    lines = [f"- `{s.label}`: `{s.field}` {_one_line(s.reason)}" for s in plan.skipped]
    return "### Skipped as impossible\n\n" + _capped(lines, "more; see `skipped.json`")


def _capped(lines: list[str], rest: str) -> str:
    shown = lines[:MAX_LISTED]
    if len(lines) > MAX_LISTED:
        shown.append(f"- ... and {len(lines) - MAX_LISTED} {rest}")
    return "\n".join(shown)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 200 else line[:197] + "..."


def _num(value: float) -> str:
    return f"{value:.4g}"
