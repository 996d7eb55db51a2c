"""The history buffer on a real SQLite store: every point lands, with its step and time, in few batches."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from mlflow import MlflowClient

from mlflow_roofline.integrations.history_buffer import HistoryBuffer
from mlflow_roofline.tracking.client import TrackingClient


def _run(client: TrackingClient) -> str:
    return client.open_run(client.create_experiment("buffered"), "buffered")


def _history(run_id: str, key: str) -> list[tuple[int, float, int]]:
    return [(m.step, m.value, m.timestamp) for m in MlflowClient().get_metric_history(run_id, key)]


def test_points_wait_for_the_flush_then_all_land_in_one_batch(tracking_uri: str) -> None:
    client = TrackingClient()
    run_id = _run(client)
    errors: list[BaseException] = []
    buffer = HistoryBuffer(client, run_id, errors.append, flush_s=3600)
    for step in range(1, 31):
        buffer.add(step, {"energy_j": float(step), "time_s": step / 10}, {"phase": f"at {step}"} if step < 3 else None)
    assert _history(run_id, "energy_j") == []  # gathered, not written yet
    buffer.close()
    energy = _history(run_id, "energy_j")
    assert [(s, v) for s, v, _ in energy] == [(s, float(s)) for s in range(1, 31)]
    assert [t for _, _, t in energy] == sorted(t for _, _, t in energy)  # each point keeps its own time
    assert [s for s, _, _ in _history(run_id, "time_s")] == list(range(1, 31))
    assert MlflowClient().get_run(run_id).data.tags["phase"] == "at 2"  # the later value of a tag wins
    assert buffer.batches_written == 1 and not errors


def _wait_for(done: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_thread_writes_every_flush_s_and_when_enough_points_wait(tracking_uri: str) -> None:
    client = TrackingClient()
    run_id = _run(client)
    ticking = HistoryBuffer(client, run_id, lambda exc: None, flush_s=0.05)
    ticking.add(1, {"energy_j": 1.0})
    assert _wait_for(lambda: len(_history(run_id, "energy_j")) == 1)  # written on the timer, no close
    crowded = HistoryBuffer(client, run_id, lambda exc: None, flush_s=3600, flush_points=10)
    crowded.add(1, {"a": 1.0})  # starts the thread
    for step in range(2, 8):
        crowded.add(step, {"a": float(step), "b": float(step)})  # 13 values: over flush_points
    assert _wait_for(lambda: len(_history(run_id, "a")) == 7)  # written before the hour is up
    assert [s for s, _, _ in _history(run_id, "a")] == list(range(1, 8))
    ticking.close()
    crowded.close()


def test_points_after_close_are_written_at_once(tracking_uri: str) -> None:
    client = TrackingClient()
    run_id = _run(client)
    buffer = HistoryBuffer(client, run_id, lambda exc: None, flush_s=3600)
    buffer.close()
    buffer.add(7, {"energy_j": 2.5}, {"late": "yes"})
    assert [(s, v) for s, v, _ in _history(run_id, "energy_j")] == [(7, 2.5)]
    assert MlflowClient().get_run(run_id).data.tags["late"] == "yes"


def test_a_failed_write_is_reported_once_and_nothing_more_is_written(tracking_uri: str) -> None:
    client = TrackingClient()
    run_id = _run(client)
    errors: list[BaseException] = []
    buffer = HistoryBuffer(client, "no-such-run", errors.append, flush_s=3600)
    buffer.add(1, {"energy_j": 1.0})
    buffer.flush()
    buffer.add(2, {"energy_j": 2.0})
    buffer.close()
    assert len(errors) == 1 and buffer.batches_written == 0
    assert _history(run_id, "energy_j") == []


@pytest.mark.parametrize("points", [0, 1])
def test_close_without_points_or_thread_is_harmless(tracking_uri: str, points: int) -> None:
    client = TrackingClient()
    run_id = _run(client)
    buffer = HistoryBuffer(client, run_id, lambda exc: None, flush_s=3600)
    for step in range(points):
        buffer.add(step, {"energy_j": 1.0})
    buffer.close()
    buffer.close()
    assert len(_history(run_id, "energy_j")) == points and buffer.batches_written == points
