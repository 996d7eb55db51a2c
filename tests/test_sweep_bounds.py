"""Specs the sweep must refuse in one line before anything starts: non-finite numbers, files that are
not text, sizes past their bounds, grids too large to plan."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mlflow_roofline.core.config import (
    INT64_MAX,
    MAX_CPU_PROCESSES_PER_CORE,
    TrainConfig,
    node_problem,
)
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.sweep.plan import PROGRESS_EVERY, expand, grid_points
from mlflow_roofline.sweep.spec import parse_spec

CLI = [sys.executable, "-m", "mlflow_roofline.cli"]
TOP = "device: cpu\nnum_heads: 2\nffn_size: 32\nseq_len: 8\nbatch_size: 4\n"


def sweep_cli(spec: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "sweep", str(spec), *args], check=False, capture_output=True, text=True, timeout=120)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        (TOP + "timeout_s: .nan\ngrid: {num_layers: 1, hidden_size: 16}\n", "timeout_s"),
        (TOP + "timeout_s: .inf\ngrid: {num_layers: 1, hidden_size: 16}\n", "timeout_s"),
        (TOP.replace("ffn_size: 32", "ffn_ratio: .nan") + "grid: {num_layers: 1, hidden_size: 16}\n", "ffn_ratio"),
        (TOP.replace("ffn_size: 32", "ffn_ratio: -.inf") + "grid: {num_layers: 1, hidden_size: 16}\n", "ffn_ratio"),
        (TOP + "grid: {num_layers: 1, hidden_size: 16, num_steps: .inf}\n", "grid.num_steps"),
        (TOP + "grid: {num_layers: [1, .nan], hidden_size: 16}\n", "grid.num_layers[1]"),
        (TOP + f"grid: {{num_layers: 1, hidden_size: 16, num_steps: {INT64_MAX + 1}}}\n", "grid.num_steps"),
    ],
)
def test_non_finite_and_out_of_range_numbers_name_the_key(yaml_text: str, key: str) -> None:
    import yaml

    with pytest.raises(ConfigError) as info:
        parse_spec(yaml.safe_load(yaml_text))
    assert info.value.field == key


@pytest.mark.parametrize("args", [(), ("--dry-run",)])
def test_the_cli_refuses_a_nan_timeout_in_one_line_before_the_store(
    tracking_uri: str, tmp_path: Path, args: tuple[str, ...]
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


def test_planning_reports_progress_over_every_grid_point() -> None:
    spec = parse_spec(
        {
            "device": "cpu",
            "num_heads": 2,
            "ffn_ratio": 2,
            "seq_len": 8,
            "batch_size": 4,
            "grid": {
                "num_layers": list(range(1, 51)),
                "hidden_size": list(range(2, 102, 2)),
                "strategy": ["single", "ddp"],
                "num_devices": [1, 2],
            },
        }
    )
    size = grid_points(spec)
    assert size == 50 * 50 * 2 * 2
    calls: list[int] = []
    plan = expand(spec, "cpu", None, progress=calls.append)
    assert sum(calls) == size and len(calls) == -(-size // PROGRESS_EVERY)
    assert len(plan.configs) == 2 * 50 * 50  # single x1 and ddp x2 per workload
    with pytest.raises(ConfigError, match="has 10,000 grid points, more than the limit of 9,999"):
        expand(spec, "cpu", None, max_points=9999)


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
    import os

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


def test_num_steps_past_int64_is_refused_by_the_one_rule() -> None:
    config = TrainConfig(
        num_layers=1, hidden_size=16, num_heads=2, ffn_size=32, seq_len=8, batch_size=4, num_steps=INT64_MAX + 1
    )
    with pytest.raises(ConfigError, match="num_steps: must be at most 9223372036854775807"):
        config.validate()
    TrainConfig.from_mapping({**config.to_params(), "num_steps": str(INT64_MAX)}).validate()
