"""Pure pieces of a train run: reducing rank readings, naming a failed job, matching params."""

from __future__ import annotations

import pytest

from mlflow_roofline.tracking.run_ownership import same_param as _same_param
from mlflow_roofline.train.job import _report
from mlflow_roofline.train.job_failure import job_error
from mlflow_roofline.train.job_io import JobResult, JobSpec, RankEnergy
from mlflow_roofline.train.launch import job_command, torchrun_command, worker_env
from mlflow_roofline.train.run import _run_name


def _result(ranks: list[RankEnergy], scope: str = "process") -> JobResult:
    return _report(10, [0.7, 0.6], [0.1, 0.3, 0.2], ranks, "estimate", scope)


def test_process_and_device_readings_are_summed_over_ranks() -> None:
    result = _result([RankEnergy(0, True, 2.0, 1.0), RankEnergy(1, True, 3.0, 1.2)])
    assert result.energy_j == 5.0 and result.time_s == 1.2 and result.step_time_s == 0.2
    assert result.energy_error is None


def test_a_node_meter_counts_once_per_node() -> None:
    # rank 1 shares the node with rank 0 and did not read the node-wide counter
    result = _result([RankEnergy(0, True, 40.0, 1.0), RankEnergy(1, False, None, 1.0)], scope="node")
    assert result.energy_j == 40.0 and result.energy_error is None


def test_one_failed_reading_voids_the_total_and_says_which_rank() -> None:
    ranks = [RankEnergy(0, True, 2.0, 1.0, warning="coarse"), RankEnergy(1, True, None, 1.0, error="counter stuck")]
    result = _result(ranks)
    assert result.energy_j is None
    assert result.energy_error == "rank 1: counter stuck"
    assert result.energy_warning == "rank 0: coarse"


def test_job_files_round_trip(tmp_path) -> None:
    spec = JobSpec({"num_layers": "2"}, meter="estimate", seed=3)
    spec.write(tmp_path)
    assert JobSpec.read(tmp_path) == spec
    result = _result([RankEnergy(0, True, 2.0, 1.0)])
    result.write(tmp_path)
    assert JobResult.read(tmp_path) == result


def test_failed_job_is_named_by_its_traceback(tmp_path) -> None:
    (tmp_path / "error-rank1.txt").write_text("Traceback (most recent call last):\n  ...\nValueError: boom\n")
    error = job_error(tmp_path, 1, "ignored output", 2)
    assert str(error) == "training job failed (exit status 1): rank 1: ValueError: boom"
    assert "--- rank 1 ---" in error.detail and "Traceback" in error.detail
    (tmp_path / "error-rank1.txt").rename(tmp_path / "error-rank0.txt")
    assert str(job_error(tmp_path, 1, "", 1)) == "training job failed (exit status 1): ValueError: boom"


def test_killed_rank_is_named_before_the_ranks_that_failed_after_it(tmp_path) -> None:
    tail = (
        "Failures:\n[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 6)\n"
        "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 7)\n"
    )
    (tmp_path / "error-rank0.txt").write_text("Traceback ...\nRuntimeError: Connection closed by peer\n")
    error = job_error(tmp_path, 1, tail, 2)
    assert str(error) == (
        "training job failed (exit status 1): rank 1 was killed by SIGKILL (out of memory?); "
        "then rank 0 failed: RuntimeError: Connection closed by peer"
    )
    assert str(job_error(tmp_path, -15, "", 2)).startswith("training job failed (killed by SIGTERM)")


def test_a_rank_torchrun_stopped_is_not_the_cause(tmp_path) -> None:
    tail = (
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -15 (pid: 7)\n"
        "  rank      : 0 (local_rank: 0)\n  exitcode  : 1\n"
    )
    (tmp_path / "error-rank0.txt").write_text("Traceback ...\nValueError: bad batch\n")
    assert str(job_error(tmp_path, 1, tail, 2)) == "training job failed (exit status 1): rank 0: ValueError: bad batch"


@pytest.mark.parametrize(
    ("name", "logged", "value", "same"),
    [
        ("num_layers", "4.0", "4", True),
        ("num_layers", "4", "4", True),
        ("num_layers", "5", "4", False),
        ("device", "auto", "cpu", True),
        ("device", "cuda", "cpu", False),
        ("strategy", "ddp", "fsdp", False),
        ("batch_size", "x", "4", False),
    ],
)
def test_params_mlflow_already_logged(name: str, logged: str, value: str, same: bool) -> None:
    assert _same_param(name, logged, value) is same


def test_run_name_even_for_a_config_that_breaks_a_rule() -> None:
    options = {
        "num_layers": "2",
        "hidden_size": "30",
        "num_heads": "4",
        "ffn_size": "64",
        "seq_len": "8",
        "batch_size": "4",
        "strategy": "tp",
        "num_devices": "2",
        "device": "cuda",
    }
    assert _run_name(options) == "L2-d30-h4-ff64-S8-B4-tp-x2"
    assert _run_name({**options, "num_layers": "two"}) is None


def test_launch_commands() -> None:
    single = job_command(1, "mlflow_roofline.train.job", ["/tmp/j"])
    assert single[1:] == ["-m", "mlflow_roofline.train.job", "/tmp/j"]
    command = torchrun_command(4, "mlflow_roofline.train.job", ["/tmp/j"])
    assert command[1:3] == ["-m", "torch.distributed.run"]
    assert "--nproc-per-node=4" in command and "--rdzv-endpoint=127.0.0.1:0" in command
    assert "--max-restarts=0" in command and command[-3:] == ["--module", "mlflow_roofline.train.job", "/tmp/j"]
    assert worker_env(2, {})["OMP_NUM_THREADS"] >= "1"
    assert worker_env(2, {"OMP_NUM_THREADS": "3"})["OMP_NUM_THREADS"] == "3"
    assert "OMP_NUM_THREADS" not in worker_env(1, {})


def test_a_failed_energy_reading_is_logged_as_a_reason_not_a_number(tracking_uri: str) -> None:
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.core.config import TrainConfig
    from mlflow_roofline.train.tracked_run import log_result, tracked_run

    config = TrainConfig(1, 32, 2, 64, 8, 4, num_steps=2, strategy="ddp", num_devices=2)
    ranks = [RankEnergy(0, True, 2.0, 1.0), RankEnergy(1, True, None, 1.1, error="nvml: read failed mid-window")]
    with tracked_run("units", config.run_name) as run_id:
        log_result(run_id, config, _result(ranks))
    run = MlflowClient().get_run(run_id)
    assert run.info.status == "FINISHED"
    assert "energy_j" not in run.data.metrics and "avg_power_w" not in run.data.metrics
    assert run.data.metrics["energy_j_rank_0"] == 2.0 and "energy_j_rank_1" not in run.data.metrics
    assert run.data.tags["roofline.energy_error"] == "rank 1: nvml: read failed mid-window"
    assert run.data.metrics["time_s"] == 1.1 and run.data.metrics["samples_per_s"] == pytest.approx(8 / 1.1)
