"""From a checked spec to an ordered list of configurations, and their status in the store.

:func:`expand` is pure: the cartesian product of each grid, their union without
duplicates, ``single`` paired with one device and the other strategies with two or more,
every workload's ``single`` baseline added, impossible combinations set aside with the
reason :meth:`TrainConfig.validate` gives, baselines first. :func:`store_status` then
looks each configuration up by ``roofline.config_hash`` among the train runs of the
experiment, and :func:`reconcile` decides what a sweep does with each (run, wait for
it, skip it); :func:`plan_table` and :func:`plan_counts` show that as ``--dry-run``
prints it.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.schema import TAG_CONFIG_HASH, TAG_ERROR, TAG_RUN_TYPE
from mlflow_roofline.system.liveness import TAG_HOST, liveness
from mlflow_roofline.sweep.spec import SweepSpec

if TYPE_CHECKING:
    from mlflow_roofline.sweep.runner import Outcome

# Store states of a configuration (see store_status).
NEW = "to run"
DONE = "already done"
FAILED = "failed"
STALE = "stale"
ALIVE = "in progress"
ELSEWHERE = "running elsewhere"


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A grid point that cannot run, with the field at fault and the rule it breaks."""

    label: str
    values: tuple[tuple[str, Any], ...]
    field: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for the plan artifact)."""
        return {"config": self.label, "values": dict(self.values), "field": self.field, "reason": self.reason}


@dataclasses.dataclass(frozen=True)
class Plan:
    """The configurations of a sweep, baselines first, and the grid points skipped.

    Attributes:
        configs: runnable configurations, ``single`` baselines first, no duplicates.
        skipped: impossible grid points, each with its reason.
        hardware: the ``roofline.hardware`` value the hashes use, or None when the
            device is not available here (dry run of a GPU spec on a CPU machine).
        device: the resolved device (``cuda`` or ``cpu``).
    """

    configs: tuple[TrainConfig, ...]
    skipped: tuple[Skipped, ...]
    hardware: str | None
    device: str

    def config_hash(self, config: TrainConfig) -> str | None:
        """The config's hash on this plan's hardware (None without hardware)."""
        return config.config_hash(self.hardware) if self.hardware is not None else None


@dataclasses.dataclass(frozen=True)
class Status:
    """Where a configuration stands in the store.

    Attributes:
        state: one of NEW, DONE, FAILED, STALE, ALIVE, ELSEWHERE.
        run_id: the run that decided the state (None for NEW).
        detail: a short explanation (the failure reason, the host...).
        stale_run_ids: RUNNING runs of this config whose process is gone.
    """

    state: str
    run_id: str | None = None
    detail: str = ""
    stale_run_ids: tuple[str, ...] = ()


def expand(spec: SweepSpec, device: str, hardware: str | None, cuda_devices: int | None = None) -> Plan:
    """Expand ``spec``'s grids into configurations for ``device`` (already resolved).

    Args:
        spec: a checked spec.
        device: ``cuda`` or ``cpu``.
        hardware: the hardware name the hashes use (None if unknown here).
        cuda_devices: GPUs visible on this machine when ``device`` is ``cuda``: configs
            needing more are skipped; None to skip no config for that reason.
    """
    runnable: dict[TrainConfig, None] = {}
    baselines: dict[TrainConfig, None] = {}
    skipped: dict[Skipped, None] = {}
    for grid in spec.grids:
        keys = list(grid)
        for combo in itertools.product(*(grid[k] for k in keys)):
            point = dict(zip(keys, combo))
            if point["strategy"] == "single":
                point["num_devices"] = 1  # single always runs on one device
            elif point["num_devices"] < 2:
                continue  # ddp/fsdp/tp on one device is the single baseline, added below
            try:
                config = _config(point, device)
            except ConfigError as exc:
                skipped[_skip(point, exc)] = None
                continue
            baseline = dataclasses.replace(config, strategy="single", num_devices=1)
            for candidate in (baseline, config):
                problem = _problem(candidate, cuda_devices if device == "cuda" else None)
                if problem is not None:
                    if candidate is config or config.strategy == "single":
                        # An added baseline that cannot run fails the same rule as its config.
                        skipped[_skip(dataclasses.asdict(candidate), problem)] = None
                elif candidate.strategy == "single":
                    baselines[candidate] = None
                else:
                    runnable[candidate] = None
    return Plan(configs=tuple(baselines) + tuple(runnable), skipped=tuple(skipped), hardware=hardware, device=device)


def _config(point: Mapping[str, Any], device: str) -> TrainConfig:
    """A TrainConfig from a grid point, turning head_size and ffn_ratio into counts."""
    values = {k: v for k, v in point.items() if k not in ("head_size", "ffn_ratio")}
    hidden = point["hidden_size"]
    if "head_size" in point:
        if hidden % point["head_size"]:
            raise ConfigError(
                "hidden_size", f"must be divisible by head_size ({hidden} % {point['head_size']} != 0)"
            )
        values["num_heads"] = hidden // point["head_size"]
    if "ffn_ratio" in point:
        ffn = Fraction(str(point["ffn_ratio"])) * hidden
        if ffn.denominator != 1:
            raise ConfigError(
                "ffn_size", f"ffn_ratio {point['ffn_ratio']} x hidden_size {hidden} = {float(ffn)} is not an integer"
            )
        values["ffn_size"] = int(ffn)
    values["device"] = device
    return TrainConfig.from_mapping(values)


def _problem(config: TrainConfig, cuda_devices: int | None) -> ConfigError | None:
    try:
        config.validate()
    except ConfigError as exc:
        return exc
    if cuda_devices is not None and config.num_devices > cuda_devices:
        return ConfigError("num_devices", f"needs {config.num_devices} GPUs, {cuda_devices} visible here")
    return None


def _skip(point: Mapping[str, Any], error: ConfigError) -> Skipped:
    values = tuple(sorted((k, v) for k, v in point.items() if k != "device"))
    return Skipped(label=point_label(point), values=values, field=error.field, reason=str(error))


def point_label(point: Mapping[str, Any]) -> str:
    """A run-name-like label of a grid point, even one that is not a valid config."""
    heads = point.get("num_heads", f"{point.get('hidden_size')}/{point.get('head_size')}")
    ffn = point.get("ffn_size", f"{point.get('ffn_ratio')}d")
    return (
        f"L{point.get('num_layers')}-d{point.get('hidden_size')}-h{heads}-ff{ffn}"
        f"-S{point.get('seq_len')}-B{point.get('batch_size')}-{point.get('strategy')}-x{point.get('num_devices')}"
    )


def store_status(plan: Plan, runs: Iterable[Any]) -> dict[TrainConfig, Status]:
    """Each planned configuration's state, from the train runs of the experiment.

    ``runs`` are MLflow ``Run`` objects (``client.search_runs`` results). Per config
    hash: any FINISHED run -> DONE; else a RUNNING run whose process lives -> ALIVE
    (or ELSEWHERE when recorded on another host), RUNNING runs whose process is gone ->
    STALE; else the latest FAILED run -> FAILED; else (none, or only KILLED) -> NEW.
    """
    by_hash: dict[str, list[Any]] = {}
    for run in runs:
        tags = run.data.tags
        if tags.get(TAG_RUN_TYPE) == "train" and TAG_CONFIG_HASH in tags:
            by_hash.setdefault(tags[TAG_CONFIG_HASH], []).append(run)
    statuses: dict[TrainConfig, Status] = {}
    for config in plan.configs:
        key = plan.config_hash(config)
        statuses[config] = _status(by_hash.get(key, []) if key else [])
    return statuses


def _status(runs: list[Any]) -> Status:
    finished = [r for r in runs if r.info.status == "FINISHED"]
    if finished:
        return Status(DONE, finished[0].info.run_id)
    stale: list[str] = []
    for run in sorted((r for r in runs if r.info.status in ("RUNNING", "SCHEDULED")), key=_started):
        where = liveness(run.data.tags, run.info.run_id)
        if where == "alive":
            return Status(ALIVE, run.info.run_id, "its train process is still running here")
        if where == "elsewhere":
            host = run.data.tags.get(TAG_HOST, "?")
            return Status(ELSEWHERE, run.info.run_id, f"RUNNING on host {host}")
        stale.append(run.info.run_id)
    failed = sorted((r for r in runs if r.info.status == "FAILED"), key=_started)
    if failed:
        last = failed[-1]
        reason = last.data.tags.get(TAG_ERROR, "").strip().splitlines()
        return Status(FAILED, last.info.run_id, reason[-1] if reason else "", tuple(stale))
    if stale:
        return Status(STALE, stale[-1], "RUNNING, but its process is gone", tuple(stale))
    return Status(NEW)


def _started(run: Any) -> int:
    return run.info.start_time or 0


def store_statuses(client: Any, plan: Plan, experiment_id: str) -> dict[TrainConfig, Status]:
    """Each planned configuration's status among the experiment's train runs."""
    return store_status(plan, train_runs(client, experiment_id))


@dataclasses.dataclass
class Entry:
    """One planned configuration, its status in the store, and what the sweep does with it.

    ``action`` is ``run``, ``wait`` (its process from an earlier sweep still runs here)
    or ``skip``; ``outcome`` is set once the sweep ran it.
    """

    config: TrainConfig
    status: Status
    action: str  # "run", "wait" (in progress here), "skip"
    outcome: Outcome | None = None

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

    def to_dict(self, hardware: str | None) -> dict[str, Any]:
        """JSON-ready form for the plan/results artifacts."""
        out: dict[str, Any] = {
            "config": self.config.run_name,
            "config_hash": self.config.config_hash(hardware) if hardware else None,
            "params": self.config.to_params(),
            "status": self.label,
            "action": self.action,
            "run_id": self.status.run_id,
        }
        if self.outcome is not None:
            out.update(
                run_id=self.outcome.run_id,
                result=self.outcome.status,
                reason=self.outcome.summary,
                wall_s=round(self.outcome.wall_s, 3),
            )
        return out


def reconcile(plan: Plan, statuses: dict[TrainConfig, Status], retry_failed: bool) -> list[Entry]:
    """Decide per configuration: run it, wait for its live process, or skip it."""
    entries = []
    for config in plan.configs:
        status = statuses.get(config, Status(NEW))
        if status.state in (NEW, STALE) or (status.state == FAILED and retry_failed):
            action = "run"
        elif status.state == ALIVE:
            action = "wait"
        else:
            action = "skip"
        entries.append(Entry(config, status, action))
    return entries


def plan_table(entries: list[Entry], plan: Plan) -> str:
    """The plan as a text table (configuration, status) followed by the skipped grid points."""
    width = max([len(e.config.run_name) for e in entries] + [len(s.label) for s in plan.skipped] + [6])
    lines = [f"{'#':>4}  {'config':<{width}}  status"]
    for i, e in enumerate(entries, 1):
        lines.append(f"{i:>4}  {e.config.run_name:<{width}}  {e.label}")
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


def train_runs(client: Any, experiment_id: str) -> list[Any]:
    """Every active train run of the experiment (paged)."""
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{TAG_RUN_TYPE}` = 'train'",
            max_results=1000,
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs
