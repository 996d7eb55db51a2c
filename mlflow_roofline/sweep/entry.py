"""The sweep from the command line: load a spec, plan it, and print the plan or run it.

:func:`run_from_cli` is what ``mlflow-roofline sweep SPEC`` calls (the MLproject entry point
``sweep`` calls it as ``sweep {spec} --retry-failed {retry_failed}``): it checks the spec
and the carbon settings, resolves the device and expands the grids (:func:`plan_spec`),
then either prints the plan with each configuration's status in the store
(:func:`dry_run`) or builds the executor the options ask for and runs the sweep
(:func:`~mlflow_roofline.sweep.runner.run_sweep`), printing what it did.
:func:`list_specs` is ``mlflow-roofline specs``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from tqdm import tqdm

from mlflow_roofline.core.config import oversubscribes_cpu
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.proxies import proxy_metrics
from mlflow_roofline.core.schema import M_PROXY_FLOPS, M_PROXY_FLOPS_HEAD
from mlflow_roofline.sweep.lookup import store_statuses
from mlflow_roofline.sweep.plan import MAX_GRID_POINTS, Plan, check_grid_size, expand
from mlflow_roofline.sweep.reconcile import counts_line, plan_counts, plan_table, reconcile
from mlflow_roofline.sweep.remote.executors import ExecutorSettings, check_tracking_uri, make_executor
from mlflow_roofline.sweep.spec import CarbonKeys, SweepSpec, load_spec, resolved_carbon, shipped_specs
from mlflow_roofline.tracking.client import TrackingClient, current_tracking_uri
from mlflow_roofline.tracking.experiments import find_experiment, get_or_create_experiment
from mlflow_roofline.tracking.ui_links import experiment_line
from mlflow_roofline.train.device import DEVICE_KINDS, hardware_name, resolve_device

if TYPE_CHECKING:  # the runner imports torch: only where a sweep runs
    from mlflow_roofline.sweep.runner import SweepResult

PLAN_PROGRESS_MIN_POINTS = 5_000
"""Grid points from which planning shows a progress bar."""

Echo = Callable[[str], None]
"""Where a line goes (the command's stdout or stderr)."""


def run_from_cli(
    spec: str,
    *,
    dry_run: bool,
    retry_failed: bool,
    experiment: str | None,
    progress: bool,
    max_configs: int = MAX_GRID_POINTS,
    carbon: CarbonKeys,
    executor_options: Mapping[str, object],
    launch: str,
    echo: Echo,
    warn: Echo,
) -> int | None:
    """Plan the spec ``spec`` (a shipped name or a YAML path) and print the plan or run it.

    Args:
        dry_run: print the plan and its counts; run nothing.
        retry_failed: rerun configurations whose earlier run FAILED.
        experiment: the experiment of the runs (None or blank: the spec's ``experiment``).
        progress: show progress bars (else log lines only).
        max_configs: the most grid points the spec may hold.
        carbon: carbon options given on the command line, over the spec's keys.
        executor_options: ``--executor`` and the Ray and Slurm options, by their click names.
        launch: ``warm`` or ``fresh`` (the local executor's way of starting a configuration).
        echo, warn: where lines go (stdout, stderr).

    Returns:
        None after a dry run; else the sweep's exit status (0, 1 if a configuration failed,
        128 + signal when interrupted).
    """
    checked = load_spec(spec)
    checked = dataclasses.replace(checked, carbon={**checked.carbon, **carbon})
    resolved_carbon(checked.carbon)  # a bad value fails here, before any run
    experiment_name = experiment.strip() if experiment and experiment.strip() else checked.experiment
    plan = plan_spec(checked, dry_run, max_configs, progress, echo, warn)
    if dry_run:
        dry_run_report(TrackingClient(), checked, plan, experiment_name, retry_failed, echo)
        return None
    settings = ExecutorSettings.from_options(executor_options, checked.slurm)
    check_tracking_uri(settings, current_tracking_uri())  # before the store is opened (an SQLite file, created)
    client = TrackingClient()  # the command's one client, passed down to the runner
    # the runner forks ranks from a warm server, which imports torch: a dry run never loads it
    from mlflow_roofline.sweep.runner import run_sweep

    remote = None if settings.kind == "local" else make_executor(settings, plan.device)
    experiment_id = get_or_create_experiment(client, experiment_name)
    try:
        result = run_sweep(
            checked,
            plan,
            experiment_id,
            retry_failed=retry_failed,
            client=client,
            echo=echo,
            progress=progress,
            executor=remote,
            launch=launch,
        )
    finally:
        if remote is not None:
            remote.close()
    if result.exit_code < 128:
        _echo_outcome(result, plan, echo, warn)
        echo(experiment_line(client.tracking_uri, experiment_id))
    return result.exit_code


def _echo_outcome(result: SweepResult, plan: Plan, echo: Echo, warn: Echo) -> None:
    """The sweep's one summary line, and one line per failed configuration."""
    counts = plan_counts(result.entries, plan)
    ran = [r.outcome for r in result.results if not r.outcome.elsewhere]
    elsewhere = [r.outcome for r in result.results if r.outcome.elsewhere]
    finished = sum(o.status == "FINISHED" for o in ran)
    done_elsewhere = sum(o.status == "FINISHED" for o in elsewhere)
    echo(
        f"Sweep run {result.parent_run_id}: {finished} finished, {len(result.failed)} failed, "
        f"{counts['already_done']} already done, {counts['failed_earlier']} failed earlier (not retried), "
        f"{done_elsewhere} finished and {len(elsewhere) - done_elsewhere} failed in another process meanwhile, "
        f"{counts['skipped_invalid']} skipped as impossible."
    )
    if result.failed:
        warn(f"{len(result.failed)} configuration(s) failed:")
        for failed in result.failed:
            warn(f"  {failed.config.run_name} (run {failed.outcome.run_id}): {failed.outcome.summary}")


def plan_spec(checked: SweepSpec, dry_run: bool, max_configs: int, progress: bool, echo: Echo, warn: Echo) -> Plan:
    """Resolve the spec's device and expand its grids (a dry run may plan a GPU spec on a CPU machine).

    The grid's size is checked before anything is expanded; planning a large grid shows a
    progress bar on stderr (when ``progress``).
    """
    size = check_grid_size(checked, max_configs)
    hardware: str | None
    try:
        device = resolve_device(checked.device)
    except ConfigError:
        if not dry_run:
            raise
        device = checked.device  # plan a GPU spec on a CPU machine, without store status
        echo(f"Note: {checked.device} is not available here; statuses are not checked against the store.")
        hardware = None
    else:
        hardware = hardware_name(device)
    kind = DEVICE_KINDS.get(device)
    accelerator = kind is not None and kind.accelerator
    gpus = kind.count() if kind is not None and accelerator and hardware is not None else None
    cores = kind.count() if kind is not None and not accelerator else None
    show = progress and size >= PLAN_PROGRESS_MIN_POINTS
    with tqdm(total=size, unit="point", desc="planning", disable=not show, file=sys.stderr) as bar:
        plan = expand(checked, device, hardware, gpus, cores, max_points=max_configs, progress=bar.update)
    if not plan.configs:
        raise ConfigError("grid", "yields no runnable configuration (every grid point was skipped, see --dry-run)")
    if cores is not None:
        _warn_oversubscribed(plan, cores, warn)
    return plan


def _warn_oversubscribed(plan: Plan, cores: int, warn: Echo) -> None:
    """One warning line when configurations run more CPU processes than this node has cores."""
    over = [c for c in plan.configs if oversubscribes_cpu(c, cores)]
    if over:
        most = max(c.num_devices for c in over)
        warn(
            f"Warning: {len(over)} configuration(s) run more processes than the {cores} core(s) here "
            f"(up to {most}); they run, but slower, and their time and energy reflect the sharing."
        )


def dry_run_report(
    client: TrackingClient, checked: SweepSpec, plan: Plan, experiment_name: str, retry: bool, echo: Echo
) -> None:
    """``--dry-run``: the plan with each configuration's status in the store, and its totals."""
    found = find_experiment(client, experiment_name)  # a dry run creates no experiment
    statuses = store_statuses(client, plan, found.experiment_id) if found is not None and plan.hardware else {}
    entries = reconcile(plan, statuses, retry)
    echo(
        f"Sweep {checked.name} ({checked.source}) -> experiment {experiment_name!r}, "
        f"device {plan.device}, hardware {plan.hardware or 'unknown here'}"
    )
    echo(plan_table(entries, plan))
    echo(counts_line(plan_counts(entries, plan)))
    proxies = [proxy_metrics(c) for c in plan.configs]  # what each run will log
    total_flops = sum(p[M_PROXY_FLOPS] for p in proxies)
    head_flops = sum(p[M_PROXY_FLOPS_HEAD] for p in proxies)
    echo(
        f"Proxy training FLOPs of the plan: {total_flops:.3g} in the layers, {head_flops:.3g} in the vocabulary "
        f"heads; device-configurations: {sum(c.num_devices for c in plan.configs)}"
    )


def list_specs(echo: Echo) -> None:
    """The shipped sweep specs with their size (configurations, skipped grid points), one line each."""
    for name in shipped_specs():
        spec = load_spec(name)
        device = spec.device if spec.device in DEVICE_KINDS else "cpu"  # list the plan as on this CPU
        plan = expand(spec, device, None)
        strategies = sorted({c.strategy for c in plan.configs})
        max_n = max(c.num_devices for c in plan.configs)
        about = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
        echo(
            f"{name:<8} {len(plan.configs):>4} configs ({len(plan.skipped)} grid point(s) skipped), "
            f"device {spec.device}, strategies {'/'.join(strategies)}, up to {max_n} devices"
            + (f" - {about}" if about else "")
        )
