"""The commands and environment a job is launched with."""

from __future__ import annotations

from mlflow_roofline.train.launch import job_command, torchrun_command, worker_env


def test_launch_commands() -> None:
    single = job_command(1, "mlflow_roofline.train.worker", ["/tmp/j"])
    assert single[1:] == ["-m", "mlflow_roofline.train.worker", "/tmp/j"]
    command = torchrun_command(4, "mlflow_roofline.train.worker", ["/tmp/j"])
    assert command[1:3] == ["-m", "torch.distributed.run"]
    assert "--nproc-per-node=4" in command and "--rdzv-endpoint=127.0.0.1:0" in command
    assert "--max-restarts=0" in command and command[-3:] == ["--module", "mlflow_roofline.train.worker", "/tmp/j"]
    assert worker_env(2, {})["OMP_NUM_THREADS"] >= "1"
    assert worker_env(2, {"OMP_NUM_THREADS": "3"})["OMP_NUM_THREADS"] == "3"
    assert "OMP_NUM_THREADS" not in worker_env(1, {})
    assert worker_env(1, {})["OMP_WAIT_POLICY"] == worker_env(2, {})["OMP_WAIT_POLICY"] == "PASSIVE"
    assert worker_env(1, {"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"
