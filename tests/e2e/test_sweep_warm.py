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
from support.sweeps import CLI, init_store, runs_of, wait_until, write_spec

from mlflow_roofline.core.schema import TAG_ERROR, TAG_PID

pytestmark = pytest.mark.slow

ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}
"""The long runs' environment: OpenMP threads spin-waiting on a shared 2-core machine can slow a run a hundredfold."""


def _rank_processes(rank0_pid: int) -> list[psutil.Process]:
    """Rank 0 and its siblings: the processes the warm server forked that still run."""
    server = psutil.Process(rank0_pid).parent()
    assert server is not None
    return [p for p in server.children() if p.status() != psutil.STATUS_ZOMBIE]


def _in_flight_ranks(experiment: str) -> tuple[int, list[psutil.Process]]:
    """Rank 0's pid and both ranks of the ddp run in flight (the sweep runs the single-device baseline first)."""

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
    by_strategy = {r.data.params["strategy"]: r for r in runs_of("warm", "train")}
    killed = by_strategy["ddp"]
    assert killed.info.status == "FAILED"
    # the tag ends with the one-line cause; before it, rank 0's traceback when it raised before it was stopped
    cause = killed.data.tags[TAG_ERROR].splitlines()[-1]
    assert cause.startswith("training job failed (exit status 1): rank 1 was killed by SIGKILL")
    assert not psutil.pid_exists(rank0) or psutil.Process(rank0).status() == psutil.STATUS_ZOMBIE  # stopped too
    assert by_strategy["single"].info.status == "FINISHED"  # the sweep went on
    assert by_strategy["single"].data.metrics["energy_j"] > 0


def test_every_strategy_runs_two_real_ranks_warm(tracking_uri: str, tmp_path: Path) -> None:
    grid = (
        "[{num_layers: 1, hidden_size: 32},{num_layers: 1, hidden_size: 32, strategy: [ddp, fsdp, tp], num_devices: 2}]"
    )
    spec = write_spec(tmp_path / "all.yaml", "all", grid, steps=3)
    proc = run_cli("sweep", str(spec), "--no-progress")  # ranks forked from this process's warm server
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = {r.data.params["strategy"]: r for r in runs_of("all", "train")}
    assert sorted(runs) == ["ddp", "fsdp", "single", "tp"]
    for strategy, run in runs.items():
        assert run.info.status == "FINISHED"
        ranks = 1 if strategy == "single" else 2
        # every rank timed its own window and rank 0 gathered them over the process group
        assert sorted(k for k in run.data.metrics if k.startswith("time_s_rank_")) == [
            f"time_s_rank_{r}" for r in range(ranks)
        ]
    # one data-parallel loss: ddp and fsdp average the same global batch as single
    single, ddp = runs["single"].data.metrics["final_loss"], runs["ddp"].data.metrics["final_loss"]
    assert abs(single - ddp) < 1e-4


def test_a_sweep_killed_outright_leaves_no_rank_running(tracking_uri: str, tmp_path: Path) -> None:
    grid = "{num_layers: 1, hidden_size: 16, strategy: ddp, num_devices: 2}"  # its single baseline runs first
    spec = write_spec(tmp_path / "orphan.yaml", "orphan", grid, steps=1000)
    init_store()
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
        return next(r for r in runs_of("orphan", "train") if r.data.params["strategy"] == "ddp")

    wait_until(lambda: ddp_run().info.status != "RUNNING", "the watchdog to end the ddp run")
    assert ddp_run().info.status == "KILLED"
    assert "died without ending it" in ddp_run().data.tags[TAG_ERROR]
    (parent,) = runs_of("orphan", "sweep")
    assert parent.info.status == "KILLED"
    assert not job_dir.exists() and not list(tmp_path.glob("roofline-*"))
