"""``mlflow-roofline sweep SPEC`` and ``mlflow-roofline specs``.

``sweep`` loads a spec (a shipped name or a YAML path), plans it, and either prints the
plan (``--dry-run``) or runs it (see :mod:`mlflow_roofline.sweep.runner`). The
MLproject entry point ``sweep`` calls it as ``sweep {spec} --retry-failed {retry_failed}``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from mlflow_roofline.commands.options import carbon_options, parse_bool, pop_carbon_options
from mlflow_roofline.core.errors import ConfigError

if TYPE_CHECKING:
    from mlflow_roofline.core.config import TrainConfig


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
@carbon_options
def sweep_command(
    spec: str, dry_run: bool, retry_failed: str, experiment: str | None, no_progress: bool, **carbon: str | None
) -> None:
    """Run the grid of train runs in SPEC (a shipped name, see `specs`, or a YAML path).

    Resumable: configurations that already have a FINISHED run with the same
    roofline.config_hash in the experiment are skipped. Exits 1 if a configuration
    failed, 128+signal when interrupted. The carbon options (over the spec's keys of the
    same names) are passed to every train run.
    """
    import dataclasses

    from mlflow.tracking import MlflowClient

    from mlflow_roofline.tracking.experiments import find_experiment, get_or_create_experiment
    from mlflow_roofline.core.hardware import cuda_device_count, hardware_name, resolve_device
    from mlflow_roofline.sweep.plan import counts_line, expand, plan_counts, plan_table, reconcile, store_statuses
    from mlflow_roofline.sweep.runner import run_sweep
    from mlflow_roofline.sweep.spec import load_spec
    from mlflow_roofline.core.carbon import resolve_carbon

    retry = parse_bool("retry_failed", retry_failed)
    checked = load_spec(spec)
    checked = dataclasses.replace(checked, carbon={**checked.carbon, **pop_carbon_options(carbon)})
    resolve_carbon(**checked.carbon)  # a bad value fails here, before any run
    experiment_name = experiment.strip() if experiment and experiment.strip() else checked.experiment
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
    plan = expand(checked, device, hardware, gpus)
    if not plan.configs:
        raise ConfigError("grid", "yields no runnable configuration (every grid point was skipped, see --dry-run)")

    client = MlflowClient()
    found = find_experiment(client, experiment_name)  # a dry run creates no experiment

    if dry_run:
        statuses = store_statuses(client, plan, found.experiment_id) if found is not None and hardware else {}
        entries = reconcile(plan, statuses, retry)
        click.echo(f"Sweep {checked.name} ({checked.source}) -> experiment {experiment_name!r}, "
                   f"device {device}, hardware {hardware or 'unknown here'}")
        click.echo(plan_table(entries, plan))
        click.echo(counts_line(plan_counts(entries, plan)))
        total_flops = sum(_proxy_flops(c) for c in plan.configs)
        click.echo(f"Proxy training FLOPs of the plan: {total_flops:.3g}; "
                   f"device-configurations: {sum(c.num_devices for c in plan.configs)}")
        return

    experiment_id = get_or_create_experiment(client, experiment_name)
    result = run_sweep(checked, plan, experiment_id, retry_failed=retry, client=client,
                       echo=click.echo, progress=not no_progress)
    if result.exit_code >= 128:
        sys.exit(result.exit_code)  # SystemExit: click's non-standalone main drops ctx.exit codes
    counts = plan_counts(result.entries, plan)
    finished = sum(e.outcome is not None and e.outcome.status == "FINISHED" for e in result.entries)
    click.echo(f"Sweep run {result.parent_run_id}: {finished} finished, {len(result.failed)} failed, "
               f"{counts['already_done']} already done, {counts['failed_earlier']} failed earlier (not retried), "
               f"{counts['skipped_invalid']} skipped as impossible.")
    if result.failed:
        click.echo(f"{len(result.failed)} configuration(s) failed:", err=True)
        for entry in result.failed:
            assert entry.outcome is not None  # every failed entry ran
            click.echo(f"  {entry.config.run_name} (run {entry.outcome.run_id}): {entry.outcome.summary}", err=True)
    sys.exit(result.exit_code)


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
