"""The warm launch: each job's ranks forked from the sweep's server, followed and stopped by the sweep.

Real processes throughout: the sweep CLI (in the test's own process unless the test kills the
sweep), multiprocessing's forkserver preloaded with torch and transformers, gloo process groups
of 2 forked ranks meeting in a FileStore, a SQLite store. What is checked is what the process
table and the store show, not what the launcher says of itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest
from support.cli_in_process import run_cli
from support.sweeps import CLI, log_baselines_measured, runs_of, wait_until, write_spec

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import (
    M_ENERGY_J,
    M_FINAL_LOSS,
    M_FLOPS_COUNTED,
    M_PROXY_FLOPS,
    M_PROXY_MEM_TRAFFIC,
    M_PROXY_PARAMS,
    PARAM_NAMES,
    TAG_CONFIG_HASH,
    TAG_ERROR,
    TAG_PID,
    TAG_WORKLOAD_HASH,
    TRAIN_PARAM_NAMES,
)
from mlflow_roofline.train.flop_count import count_step_flops
from mlflow_roofline.train.job_io import JobSpec

pytestmark = pytest.mark.slow

ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}
"""The long runs' environment: OpenMP threads spin-waiting on a shared 2-core machine can slow a run a hundredfold."""


def _rank_processes(rank0_pid: int) -> list[psutil.Process]:
    """Rank 0 and its siblings: the processes the warm server forked that still run."""
    server = psutil.Process(rank0_pid).parent()
    assert server is not None
    return [p for p in server.children() if p.status() != psutil.STATUS_ZOMBIE]


def _in_flight_ranks(experiment: str) -> tuple[int, list[psutil.Process]]:
    """Rank 0's pid and both ranks of the ddp run in flight (the sweep runs single-device configs first)."""

    def ddp_runs() -> list:
        return [
            r
            for r in runs_of(experiment, "train")
            if TAG_PID in r.data.tags and r.data.params.get("strategy") == "ddp" and r.info.status == "RUNNING"
        ]

    wait_until(ddp_runs, "the ddp ranks to start")
    rank0 = int(ddp_runs()[0].data.tags[TAG_PID])
    wait_until(lambda: len(_rank_processes(rank0)) == 2, "both ranks")
    return rank0, _rank_processes(rank0)


def test_ranks_are_forked_from_the_server_and_a_killed_rank_fails_only_its_config(
    tracking_uri: str, tmp_path: Path
) -> None:
    grid = (
        "[{num_layers: 1, hidden_size: 16, strategy: ddp, num_devices: 2, num_steps: 1000},"
        " {num_layers: 1, hidden_size: 32}]"
    )
    spec = write_spec(tmp_path / "warm.yaml", "warm", grid)
    (baseline,) = log_baselines_measured(spec, "warm")  # the ddp config's 1000-step single baseline: done before
    seen: dict[str, Any] = {}

    def kill_rank_1() -> None:  # beside the sweep, which runs in this process's main thread (its signal handlers)
        try:
            rank0, ranks = _in_flight_ranks("warm")
            server = psutil.Process(rank0).parent()
            assert server is not None
            seen.update(rank0=rank0, server=" ".join(server.cmdline()), server_parent=server.ppid())
            # each rank leaves the sweep's group first thing (Ctrl-C reaches the sweep only)
            wait_until(lambda: all(os.getsid(p.pid) == p.pid for p in ranks), "each rank to lead its own session")
            next(p for p in ranks if p.pid != rank0).send_signal(signal.SIGKILL)  # what the OOM killer does
        except BaseException as exc:
            seen["error"] = exc
            for rank in _rank_processes(seen["rank0"]) if "rank0" in seen else []:
                rank.kill()  # the sweep then goes on and returns

    killer = threading.Thread(target=kill_rank_1)
    killer.start()
    done = run_cli("sweep", str(spec), "--no-progress")
    killer.join(timeout=60)
    if "error" in seen:
        raise seen["error"]
    assert "forkserver" in seen["server"]
    assert seen["server_parent"] == os.getpid()  # the sweep's own server, no torchrun agent in between
    rank0, out = seen["rank0"], done.stdout + done.stderr
    assert done.returncode == 1, out
    runs = runs_of("warm", "train")
    assert len(runs) == 3, [r.info.run_name for r in runs]  # the baseline logged before was not run again
    by_strategy = {r.data.params["strategy"]: r for r in runs if r.info.run_id != baseline}
    killed = by_strategy["ddp"]
    assert killed.info.status == "FAILED"
    # the tag ends with the one-line cause; before it, rank 0's traceback when it raised before it was stopped
    cause = killed.data.tags[TAG_ERROR].splitlines()[-1]
    assert cause.startswith("training job failed (exit status 1): rank 1 was killed by SIGKILL")
    assert not psutil.pid_exists(rank0) or psutil.Process(rank0).status() == psutil.STATUS_ZOMBIE  # stopped too
    assert by_strategy["single"].info.status == "FINISHED"  # the sweep went on
    assert by_strategy["single"].data.metrics["energy_j"] > 0


def test_every_strategy_runs_two_real_ranks_warm(
    tracking_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grid = (
        "[{num_layers: 1, hidden_size: 32},{num_layers: 1, hidden_size: 32, strategy: [ddp, fsdp, tp], num_devices: 2},"
        " {num_layers: 1, hidden_size: 16}]"
    )
    spec = write_spec(tmp_path / "all.yaml", "all", grid, steps=3)
    handed: dict[str, int | None] = {}  # each job's FLOPs per step as the sweep handed them to its ranks
    write = JobSpec.write

    def spy(job: JobSpec, job_dir: Path) -> None:
        handed[job.config.run_name] = job.flops_per_step
        write(job, job_dir)

    monkeypatch.setattr(JobSpec, "write", spy)
    proc = run_cli("sweep", str(spec), "--no-progress")  # ranks forked from this process's warm server
    assert proc.returncode == 0, proc.stdout + proc.stderr
    every_run = runs_of("all", "train")
    runs = {r.data.params["strategy"]: r for r in every_run if r.data.params["hidden_size"] == "32"}
    assert sorted(runs) == ["ddp", "fsdp", "single", "tp"] and len(every_run) == 5
    for strategy, run in runs.items():
        assert run.info.status == "FINISHED"
        assert set(PARAM_NAMES) <= set(run.data.params)
        ranks = 1 if strategy == "single" else 2
        # every rank timed its own window and measured its own energy; rank 0 gathered them over the process group
        metrics = run.data.metrics
        for name in ("time_s_rank_", "energy_j_rank_"):
            assert sorted(k for k in metrics if k.startswith(name)) == [f"{name}{r}" for r in range(ranks)]
        assert metrics[M_ENERGY_J] == pytest.approx(sum(metrics[f"energy_j_rank_{r}"] for r in range(ranks)))
    # same seed, same global batches: every strategy ends on the single-device loss
    single = runs["single"].data.metrics[M_FINAL_LOSS]
    for strategy in ("ddp", "fsdp", "tp"):
        assert runs[strategy].data.metrics[M_FINAL_LOSS] == pytest.approx(single, abs=1e-5), strategy
    # and the runs of one workload share its hash, its proxies and its counted FLOPs (their closed forms:
    # tests/e2e/test_mlflow_run_train.py), whatever the strategy
    assert len({r.data.tags[TAG_WORKLOAD_HASH] for r in runs.values()}) == 1
    for name in (M_FLOPS_COUNTED, M_PROXY_FLOPS, M_PROXY_MEM_TRAFFIC, M_PROXY_PARAMS):
        assert len({r.data.metrics[name] for r in runs.values()}) == 1, name
    assert len({r.data.tags[TAG_CONFIG_HASH] for r in runs.values()}) == 4
    # the workload's FLOPs were counted once, by the single-device job (it runs first); the others were handed
    # them, and the last job's workload was counted ahead, while the sweep logged the first job
    step_flops = runs["single"].data.metrics[M_FLOPS_COUNTED] / 3
    (last,) = (r for r in every_run if r.data.params["hidden_size"] == "16")
    assert last.info.status == "FINISHED"
    assert handed == {
        **{runs[strategy].info.run_name: step_flops for strategy in ("ddp", "fsdp", "tp")},
        runs["single"].info.run_name: None,
        last.info.run_name: last.data.metrics[M_FLOPS_COUNTED] / 3,
    }
    params = {name: value for name, value in last.data.params.items() if name in TRAIN_PARAM_NAMES}
    assert last.data.metrics[M_FLOPS_COUNTED] == 3 * count_step_flops(TrainConfig.from_mapping(params))


def test_a_sweep_killed_outright_leaves_no_rank_running(tracking_uri: str, tmp_path: Path) -> None:
    grid = "{num_layers: 1, hidden_size: 16, strategy: ddp, num_devices: 2}"
    spec = write_spec(tmp_path / "orphan.yaml", "orphan", grid, steps=1000)
    (baseline,) = log_baselines_measured(spec, "orphan")  # done before: the ddp job is the sweep's first
    sweep = subprocess.Popen(
        [*CLI, "sweep", str(spec), "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**ONE_THREAD, "TMPDIR": str(tmp_path)},  # where the job folder is made
    )
    try:
        _, ranks = _in_flight_ranks("orphan")
        (job_dir,) = tmp_path.glob("roofline-sweep-*/roofline-job-*")
        sweep.send_signal(signal.SIGKILL)  # no handler runs: the server and the ranks must go by themselves
        sweep.wait()
        wait_until(
            lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks), "ranks to end"
        )
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()

    # the sweep's watchdog ends the run in flight and the parent, and removes the job folder
    def ddp_run() -> Any:  # the ddp run (an mlflow Run)
        (run,) = [r for r in runs_of("orphan", "train") if r.info.run_id != baseline]
        return run

    wait_until(lambda: ddp_run().info.status != "RUNNING", "the watchdog to end the ddp run")
    assert ddp_run().info.status == "KILLED" and ddp_run().data.params["strategy"] == "ddp"
    assert "died without ending it" in ddp_run().data.tags[TAG_ERROR]
    (parent,) = runs_of("orphan", "sweep")
    assert parent.info.status == "KILLED"
    assert not job_dir.exists() and not list(tmp_path.glob("roofline-*"))
