"""Counting the next workload's FLOPs ahead, in a process forked from a real warm server."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.sweep.step_flops import AHEAD_FILE, StepFlops
from mlflow_roofline.train.flop_count import count_step_flops
from mlflow_roofline.train.warm import WarmServer

HARDWARE = "cpu-test"


def _config(hidden_size: int, strategy: str = "single", num_devices: int = 1) -> TrainConfig:
    return TrainConfig(
        num_layers=1,
        hidden_size=hidden_size,
        num_heads=2,
        ffn_size=4 * hidden_size,
        seq_len=8,
        batch_size=4,
        num_steps=2,
        warmup_steps=0,
        strategy=strategy,
        num_devices=num_devices,
        device="cpu",
    )


@pytest.fixture(scope="module")
def server() -> WarmServer:
    return WarmServer().start()


def _counting_ahead() -> list[multiprocessing.process.BaseProcess]:
    """This process's live counts ahead (``active_children`` reaps the ones that ended)."""
    return [p for p in multiprocessing.active_children() if p.name == "roofline-flops-ahead"]


def test_the_next_unknown_workload_is_counted_ahead_and_collected_before_the_next_job(
    server: WarmServer, tmp_path: Path
) -> None:
    first, same_work, other = _config(16), _config(16, "ddp", 2), _config(32)
    flops = StepFlops(HARDWARE, [first, same_work, other], server, str(tmp_path))
    flops.record(first.workload_hash(HARDWARE), count_step_flops(first))
    flops.count_ahead(first)  # the ddp job's workload is the first's: the one after it is counted
    assert flops.known(same_work.workload_hash(HARDWARE)) == count_step_flops(first)
    assert _counting_ahead() == []  # collected by the first look-up, whatever its workload: none runs on
    assert flops.known(other.workload_hash(HARDWARE)) == count_step_flops(other)
    assert list(tmp_path.iterdir()) == []  # its number read and its file removed
    flops.count_ahead(same_work)  # nothing left to count
    assert _counting_ahead() == []


def test_a_count_ahead_that_fails_is_dropped_and_the_rank_counts(server: WarmServer, tmp_path: Path) -> None:
    first, other, third = _config(16), _config(32), _config(48)
    flops = StepFlops(HARDWARE, [first, other, third], server, str(tmp_path))
    blocked = tmp_path / (AHEAD_FILE.format(workload=other.workload_hash(HARDWARE)) + ".part")
    blocked.mkdir()  # where the count would write its number: it fails
    flops.count_ahead(first)
    assert flops.known(other.workload_hash(HARDWARE)) is None
    assert [p.name for p in tmp_path.iterdir()] == [blocked.name]
    flops.count_ahead(first)  # a workload is counted ahead once: the next unknown one is counted now
    assert flops.known(other.workload_hash(HARDWARE)) is None
    assert flops.known(third.workload_hash(HARDWARE)) == count_step_flops(third)


def test_a_count_ahead_still_running_when_the_sweep_ends_is_stopped(server: WarmServer, tmp_path: Path) -> None:
    first, other = _config(16), _config(32)
    flops = StepFlops(HARDWARE, [first, other], server, str(tmp_path))
    flops.count_ahead(first)
    flops.close()
    assert _counting_ahead() == [] and list(tmp_path.iterdir()) == []


class _NoFork:
    """A server whose processes cannot start, as when the system has no process left to fork (EAGAIN)."""

    class context:  # the attribute WarmServer has
        class Process:
            def __init__(self, **kwargs: object) -> None:
                pass

            def start(self) -> None:
                raise BlockingIOError(11, "Resource temporarily unavailable")


def test_a_count_ahead_that_cannot_start_is_skipped_and_the_job_just_measured_is_not_failed(tmp_path: Path) -> None:
    first, other = _config(16), _config(32)
    flops = StepFlops(HARDWARE, [first, other], _NoFork(), str(tmp_path))  # type: ignore[arg-type]
    flops.count_ahead(first)  # no exception reaches the measured job
    assert flops.known(other.workload_hash(HARDWARE)) is None  # its rank counts
