"""`mlflow-roofline sweep` on the command line: specs refused in one line before anything starts
(bad keys, non-finite numbers, files that are not text, grids too large to plan), and dry runs.

The first test runs the real command; the others call the CLI's ``main`` in this process
(support/cli_in_process), which answers the same and saves a Python and MLflow start each.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.cli_in_process import run_cli
from support.sweeps import TOP, spec_with

from mlflow_roofline.core.config import (
    MAX_CPU_PROCESSES_PER_CORE,
    TrainConfig,
    node_problem,
)
from mlflow_roofline.core.schema import TAG_CONFIG_HASH, TAG_RUN_TYPE

HW = "cpu:test"


def sweep_cli(spec: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``mlflow-roofline sweep SPEC ARGS`` in this process (the first test runs the real command)."""
    return run_cli("sweep", str(spec), *args)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _run(client, experiment_id: str, config: TrainConfig, status: str | None, extra: dict | None = None) -> str:
    tags = {TAG_RUN_TYPE: "train", TAG_CONFIG_HASH: config.config_hash(HW), **(extra or {})}
    run = client.create_run(experiment_id, run_name=config.run_name, tags=tags)
    if status:
        client.set_terminated(run.info.run_id, status)
    return run.info.run_id


def test_cli_rejects_a_bad_spec_in_one_line_before_touching_the_store(
    unopened_tracking_uri: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(spec_with(grid_strategy=["single", "zero3"])))
    proc = subprocess.run(
        [sys.executable, "-m", "mlflow_roofline.cli", "sweep", str(bad)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "grid.strategy[1]" in lines[0] and "zero3" in lines[0] and "single, ddp, fsdp, tp" in lines[0]
    assert not (tmp_path / "mlflow.db").exists()  # nothing ran, not even the store


def test_retry_failed_must_be_a_boolean(tracking_uri: str) -> None:
    proc = run_cli("sweep", "smoke", "--retry-failed", "maybe", "--dry-run")
    assert proc.returncode == 2
    assert "retry_failed: must be true or false, got 'maybe'" in proc.stderr


@pytest.mark.parametrize("args", [(), ("--dry-run",)])
def test_the_cli_refuses_a_nan_timeout_in_one_line_before_the_store(
    unopened_tracking_uri: str, tmp_path: Path, args: tuple[str, ...]
) -> None:
    spec = tmp_path / "nan.yaml"
    spec.write_text(TOP + "timeout_s: .nan\ngrid: {num_layers: 1, hidden_size: 16}\n")
    line = one_line(sweep_cli(spec, *args))
    assert line == "Error: timeout_s: must be a finite positive number of seconds, got nan"
    assert not (tmp_path / "mlflow.db").exists()  # refused before the store was touched


def test_a_spec_that_is_not_utf8_text_is_one_line_naming_the_file(tracking_uri: str, tmp_path: Path) -> None:
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes((TOP + "description: caf\xe9\ngrid: {num_layers: 1, hidden_size: 16}\n").encode("latin-1"))
    line = one_line(sweep_cli(spec, "--dry-run"))
    assert line.startswith("Error: spec: ") and str(spec) in line and "not UTF-8 text" in line


def test_a_grid_too_large_to_plan_is_refused_with_its_size_before_it_is_expanded(
    tracking_uri: str, tmp_path: Path
) -> None:
    values = ", ".join(str(v) for v in range(1, 1001))
    spec = tmp_path / "huge.yaml"
    spec.write_text(TOP + f"grid: {{num_layers: [{values}], hidden_size: [{values}], num_steps: [{values}]}}\n")
    # 10^9 points: expanding them would take hours, so an answer at all shows it was not expanded
    line = one_line(sweep_cli(spec, "--dry-run"))
    assert line.startswith("Error: grid: has 1,000,000,000 grid points, more than the limit of 100,000")
    assert "--max-configs" in line
    small = tmp_path / "small.yaml"
    small.write_text(TOP + "grid: {num_layers: [1, 2, 3], hidden_size: 16}\n")
    assert "has 3 grid points, more than the limit of 2" in one_line(
        sweep_cli(small, "--dry-run", "--max-configs", "2")
    )
    assert sweep_cli(small, "--dry-run", "--max-configs", "3").returncode == 0


def test_planning_a_large_grid_shows_a_progress_bar(tracking_uri: str, tmp_path: Path) -> None:
    spec = tmp_path / "large.yaml"
    spec.write_text(
        TOP.replace("ffn_size: 32", "ffn_ratio: 2")
        + f"grid: {{num_layers: {list(range(1, 101))}, hidden_size: {list(range(2, 102, 2))}}}\n"
    )
    proc = sweep_cli(spec, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "planning" in proc.stderr and "5000/5000" in proc.stderr
    assert "5000 configurations: 5000 to run" in proc.stdout


def test_more_processes_than_the_node_hosts_are_refused_and_more_than_its_cores_warned(
    tracking_uri: str, tmp_path: Path
) -> None:

    cores = os.cpu_count() or 1
    limit = MAX_CPU_PROCESSES_PER_CORE * cores
    config = TrainConfig(
        num_layers=1,
        hidden_size=16,
        num_heads=2,
        ffn_size=32,
        seq_len=8,
        batch_size=4 * (limit + 1),
        strategy="ddp",
        num_devices=limit + 1,
    )
    problem = node_problem(config, None, cores)
    assert problem is not None and problem.field == "num_devices" and f"= {limit})" in str(problem)
    assert node_problem(config, None, None) is None  # no node to check against
    gpu = TrainConfig(
        num_layers=1,
        hidden_size=16,
        num_heads=2,
        ffn_size=32,
        seq_len=8,
        batch_size=4,
        strategy="ddp",
        num_devices=4,
        device="cuda",
    )
    assert "needs 4 GPUs, 2 visible here" in str(node_problem(gpu, 2, cores))

    too_many = tmp_path / "too_many.yaml"
    too_many.write_text(
        TOP.replace("batch_size: 4", f"batch_size: {4 * (limit + 1)}")
        + f"grid: {{num_layers: 1, hidden_size: 16, strategy: ddp, num_devices: {limit + 1}}}\n"
    )
    proc = sweep_cli(too_many, "--dry-run")
    assert proc.returncode == 0, proc.stderr  # the single baseline still runs
    assert f"skipped: num_devices: needs {limit + 1} CPU processes, more than this node hosts" in proc.stdout

    shared = tmp_path / "shared.yaml"
    shared.write_text(
        TOP.replace("batch_size: 4", f"batch_size: {4 * (cores + 1)}")
        + f"grid: {{num_layers: 1, hidden_size: 16, strategy: ddp, num_devices: {cores + 1}}}\n"
    )
    proc = sweep_cli(shared, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"Warning: 1 configuration(s) run more processes than the {cores} core(s) here" in proc.stderr


def test_dry_run_shows_done_and_to_run_from_the_store(tracking_uri: str, tmp_path) -> None:
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.train.device import hardware_name

    spec = tmp_path / "tiny.yaml"
    spec.write_text(
        "experiment: dry\ndevice: cpu\nnum_heads: 2\nffn_size: 32\nseq_len: 8\nbatch_size: 4\n"
        "strategy: [single, ddp]\nnum_devices: 2\ngrid: {num_layers: [1, 2], hidden_size: 16}\n"
    )
    client = MlflowClient()
    exp = client.create_experiment("dry")
    done = TrainConfig(num_layers=2, hidden_size=16, num_heads=2, ffn_size=32, seq_len=8, batch_size=4)
    hw = hardware_name("cpu")
    run = client.create_run(exp, tags={TAG_RUN_TYPE: "train", TAG_CONFIG_HASH: done.config_hash(hw)})
    client.set_terminated(run.info.run_id, "FINISHED")
    proc = sweep_cli(spec, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"single-x1-L2-d16-h2-ff32-S8-B4  already done (run {run.info.run_id})" in proc.stdout
    assert "4 configurations: 3 to run, 1 already done" in proc.stdout
    assert len(client.search_runs([exp])) == 1  # a dry run runs nothing
    assert dataclasses.replace(done, num_layers=1).run_name in proc.stdout
