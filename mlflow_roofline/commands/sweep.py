"""``mlflow-roofline sweep SPEC`` and ``mlflow-roofline specs``.

``sweep`` loads a spec (a shipped name or a YAML path), plans it, and either prints the
plan (``--dry-run``) or runs it (see :mod:`mlflow_roofline.sweep.runner`). The
MLproject entry point ``sweep`` calls it as ``sweep {spec} --retry-failed {retry_failed}``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

from mlflow_roofline.commands.executor_options import executor_options, executor_settings
from mlflow_roofline.commands.options import carbon_options, parse_bool, pop_carbon_options
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.sweep.plan import MAX_GRID_POINTS

PLAN_PROGRESS_MIN_POINTS = 5_000
"""Grid points from which planning shows a progress bar."""

if TYPE_CHECKING:
    from mlflow_roofline.core.config import TrainConfig
    from mlflow_roofline.sweep.plan import Plan
    from mlflow_roofline.sweep.runner import SweepResult
    from mlflow_roofline.sweep.spec import SweepSpec


@click.command("sweep")
@click.argument("spec")
@click.option("--dry-run", is_flag=True, help="Print the plan and its counts; run nothing.")
@click.option(
    "--retry-failed",
    default="false",
    is_flag=False,
    flag_value="true",
    metavar="[true|false]",
    help="Rerun configurations whose earlier run FAILED (alone: true).",
)
@click.option("--experiment", default=None, help="Experiment for the runs (default: the spec's `experiment`).")
@click.option("--no-progress", is_flag=True, help="No progress bar (log lines only).")
@click.option(
    "--max-configs",
    type=click.IntRange(min=1),
    default=MAX_GRID_POINTS,
    show_default=True,
    help="Most grid points a spec may hold; a larger grid is refused before it is expanded.",
)
@executor_options
@carbon_options
def sweep_command(
    spec: str,
    dry_run: bool,
    retry_failed: str,
    experiment: str | None,
    no_progress: bool,
    max_configs: int,
    **options: Any,
) -> None:
    """Run the grid of train runs in SPEC (a shipped name, see `specs`, or a YAML path).

    Resumable: configurations that already have a FINISHED run with the same
    roofline.config_hash in the experiment are skipped. Exits 1 if a configuration
    failed, 128+signal when interrupted. The carbon options (over the spec's keys of the
    same names) are passed to every train run.
    """
    import dataclasses

    from mlflow.tracking import MlflowClient

    from mlflow_roofline.core.carbon import resolve_carbon
    from mlflow_roofline.sweep.spec import load_spec
    from mlflow_roofline.tracking.client import TrackingClient
    from mlflow_roofline.tracking.experiments import get_or_create_experiment

    retry = parse_bool("retry_failed", retry_failed)
    checked = load_spec(spec)
    checked = dataclasses.replace(checked, carbon={**checked.carbon, **pop_carbon_options(options)})
    resolve_carbon(**checked.carbon)  # a bad value fails here, before any run
    experiment_name = experiment.strip() if experiment and experiment.strip() else checked.experiment
    plan = _plan(checked, dry_run, max_configs, show_progress=not no_progress)
    client = MlflowClient()
    if dry_run:
        _print_plan(client, checked, plan, experiment_name, retry)
        return
    from mlflow_roofline.sweep.runner import run_sweep

    settings = executor_settings(options, checked.slurm)
    remote = _remote_executor(settings, plan.device)
    experiment_id = get_or_create_experiment(TrackingClient(), experiment_name)
    try:
        result = run_sweep(
            checked,
            plan,
            experiment_id,
            retry_failed=retry,
            client=client,
            echo=click.echo,
            progress=not no_progress,
            executor=remote,
            launch=options["launch"],
        )
    finally:
        if remote is not None:
            remote.close()
    if result.exit_code >= 128:
        sys.exit(result.exit_code)  # SystemExit: click's non-standalone main drops ctx.exit codes
    _print_summary(result, plan)
    sys.exit(result.exit_code)


def _remote_executor(settings: Any, device: str) -> Any:
    """The Ray or Slurm executor the options ask for (None: local), after checking the tracking store."""
    if settings.kind == "local":
        return None
    import mlflow

    from mlflow_roofline.sweep.executors import check_tracking_uri, make_executor

    check_tracking_uri(settings, mlflow.get_tracking_uri())
    return make_executor(settings, device)


def _plan(checked: SweepSpec, dry_run: bool, max_configs: int, show_progress: bool) -> Plan:
    """Resolve the spec's device and expand its grids (a dry run may plan a GPU spec on a CPU machine).

    The grid's size is checked before anything is expanded; planning a large grid shows a
    progress bar on stderr.
    """
    from tqdm import tqdm

    from mlflow_roofline.sweep.plan import check_grid_size, expand
    from mlflow_roofline.train.device import (
        cuda_device_count,
        hardware_name,
        resolve_device,
    )

    size = check_grid_size(checked, max_configs)
    try:
        device = resolve_device(checked.device)
    except ConfigError:
        if not dry_run:
            raise
        device = checked.device  # plan a GPU spec on a CPU machine, without store status
        click.echo(f"Note: {checked.device} is not available here; statuses are not checked against the store.")
        hardware = None
    else:
        hardware = hardware_name(device)
    gpus = cuda_device_count() if device == "cuda" and hardware is not None else None
    cores = (os.cpu_count() or 1) if device == "cpu" else None
    show = show_progress and size >= PLAN_PROGRESS_MIN_POINTS
    with tqdm(total=size, unit="point", desc="planning", disable=not show, file=sys.stderr) as bar:
        plan = expand(checked, device, hardware, gpus, cores, max_points=max_configs, progress=bar.update)
    if not plan.configs:
        raise ConfigError("grid", "yields no runnable configuration (every grid point was skipped, see --dry-run)")
    if cores is not None:
        _warn_oversubscribed(plan, cores)
    return plan


def _warn_oversubscribed(plan: Plan, cores: int) -> None:
    """One warning line when configurations run more CPU processes than this node has cores."""
    from mlflow_roofline.core.config import oversubscribes_cpu

    over = [c for c in plan.configs if oversubscribes_cpu(c, cores)]
    if over:
        most = max(c.num_devices for c in over)
        click.echo(
            f"Warning: {len(over)} configuration(s) run more processes than the {cores} core(s) here "
            f"(up to {most}); they run, but slower, and their time and energy reflect the sharing.",
            err=True,
        )


def _print_plan(client: Any, checked: SweepSpec, plan: Plan, experiment_name: str, retry: bool) -> None:
    """``--dry-run``: the plan with each configuration's status in the store, and its totals."""
    from mlflow_roofline.sweep.reconcile import (
        counts_line,
        plan_counts,
        plan_table,
        reconcile,
    )
    from mlflow_roofline.sweep.store import store_statuses
    from mlflow_roofline.tracking.client import TrackingClient
    from mlflow_roofline.tracking.experiments import find_experiment

    found = find_experiment(TrackingClient(), experiment_name)  # a dry run creates no experiment
    statuses = store_statuses(client, plan, found.experiment_id) if found is not None and plan.hardware else {}
    entries = reconcile(plan, statuses, retry)
    click.echo(
        f"Sweep {checked.name} ({checked.source}) -> experiment {experiment_name!r}, "
        f"device {plan.device}, hardware {plan.hardware or 'unknown here'}"
    )
    click.echo(plan_table(entries, plan))
    click.echo(counts_line(plan_counts(entries, plan)))
    total_flops = sum(_proxy_flops(c) for c in plan.configs)
    click.echo(
        f"Proxy training FLOPs of the plan: {total_flops:.3g}; "
        f"device-configurations: {sum(c.num_devices for c in plan.configs)}"
    )


def _print_summary(result: SweepResult, plan: Plan) -> None:
    """What the sweep did, and each configuration that failed in it (on stderr)."""
    from mlflow_roofline.sweep.reconcile import plan_counts

    counts = plan_counts(result.entries, plan)
    ran = [r.outcome for r in result.results if not r.outcome.elsewhere]
    elsewhere = [r.outcome for r in result.results if r.outcome.elsewhere]
    finished = sum(o.status == "FINISHED" for o in ran)
    done_elsewhere = sum(o.status == "FINISHED" for o in elsewhere)
    click.echo(
        f"Sweep run {result.parent_run_id}: {finished} finished, {len(result.failed)} failed, "
        f"{counts['already_done']} already done, {counts['failed_earlier']} failed earlier (not retried), "
        f"{done_elsewhere} finished and {len(elsewhere) - done_elsewhere} failed in another process meanwhile, "
        f"{counts['skipped_invalid']} skipped as impossible."
    )
    if result.failed:
        click.echo(f"{len(result.failed)} configuration(s) failed:", err=True)
        for failed in result.failed:
            click.echo(f"  {failed.config.run_name} (run {failed.outcome.run_id}): {failed.outcome.summary}", err=True)


def _proxy_flops(config: TrainConfig) -> float:
    """Proxy FLOPs of one configuration's measured steps (DESIGN.md ``proxy_flops``)."""
    from mlflow_roofline.core.proxies import proxy_metrics
    from mlflow_roofline.core.schema import M_PROXY_FLOPS

    return float(proxy_metrics(config)[M_PROXY_FLOPS])


@click.command("specs")
def specs_command() -> None:
    """List the shipped sweep specs with their size (configurations, skipped grid points)."""
    from mlflow_roofline.sweep.plan import expand
    from mlflow_roofline.sweep.spec import load_spec, shipped_specs

    for name in shipped_specs():
        spec = load_spec(name)
        device = "cpu" if spec.device == "auto" else spec.device
        plan = expand(spec, device, None)
        strategies = sorted({c.strategy for c in plan.configs})
        max_n = max(c.num_devices for c in plan.configs)
        about = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
        click.echo(
            f"{name:<8} {len(plan.configs):>4} configs ({len(plan.skipped)} grid point(s) skipped), "
            f"device {spec.device}, strategies {'/'.join(strategies)}, up to {max_n} devices"
            + (f" - {about}" if about else "")
        )
