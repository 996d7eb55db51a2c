"""Ending a run through a second and a third Ctrl-C: ``train``'s run, ``track_energy``'s own run and the
shared ending itself, on a real SQLite store. The Ctrl-C pressed again is a real SIGINT, raised in the
flush of MLflow's asynchronous logging that ending a run begins with (where users hit it)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.store.tracking.abstract_store import AbstractStore

import mlflow_roofline
from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.core.schema import TAG_ERROR
from mlflow_roofline.system.signals import raising_on_signals
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.run_ending import END_ATTEMPTS, end_runs
from mlflow_roofline.train.run_logging import train_run


@pytest.fixture
def ctrl_c_again(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The next flush of MLflow's asynchronous logging is hit by ``left[0]`` real SIGINTs in a row (a user
    pressing Ctrl-C again and again), each flush by a KeyboardInterrupt raised there (whatever the
    handlers) while ``left[1]`` > 0."""
    left = [0, 0]
    shut_down = AbstractStore.shut_down_async_logging

    def interrupted(self: AbstractStore) -> None:
        while left[0] > 0:
            left[0] -= 1
            signal.raise_signal(signal.SIGINT)
        if left[1] > 0:
            left[1] -= 1
            raise KeyboardInterrupt
        shut_down(self)

    monkeypatch.setattr(AbstractStore, "shut_down_async_logging", interrupted)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield left
    signal.signal(signal.SIGINT, previous)


def test_trains_run_ends_killed_though_ctrl_c_is_pressed_three_more_times(
    tracking_uri: str, ctrl_c_again: list[int]
) -> None:
    client = TrackingClient()
    with pytest.raises(Interrupted), raising_on_signals(Interrupted):
        with train_run(client, "units", "stopped") as run_id:
            ctrl_c_again[0] = 3
            raise Interrupted(signal.SIGINT)
    run = MlflowClient().get_run(run_id)
    assert run.info.status == "KILLED" and run.data.tags[TAG_ERROR] == "interrupted (SIGINT)"
    assert ctrl_c_again[0] == 0  # every one of them was pressed while the run ended


def test_track_energys_own_run_ends_killed_with_the_reason_through_more_ctrl_c(
    tracking_uri: str, ctrl_c_again: list[int]
) -> None:
    with pytest.raises(KeyboardInterrupt):
        with mlflow_roofline.track_energy("estimate"):
            run_id = mlflow.active_run().info.run_id  # type: ignore[union-attr]
            ctrl_c_again[0] = 3
            raise KeyboardInterrupt
    run = MlflowClient().get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags[TAG_ERROR] == "interrupted: KeyboardInterrupt (Ctrl-C) before the measured block ended"
    assert "energy_j" in run.data.metrics and mlflow.active_run() is None


def test_track_energys_own_run_ends_failed_naming_the_blocks_exception(tracking_uri: str) -> None:
    with pytest.raises(ValueError):
        with mlflow_roofline.track_energy("estimate"):
            run_id = mlflow.active_run().info.run_id  # type: ignore[union-attr]
            raise ValueError("bad batch")
    run = MlflowClient().get_run(run_id)
    assert (run.info.status, run.data.tags[TAG_ERROR]) == ("FAILED", "the measured block raised ValueError: bad batch")


def test_ctrl_c_pressed_past_the_deferral_is_retried_and_the_stack_still_ends(
    tracking_uri: str, ctrl_c_again: list[int]
) -> None:
    client = TrackingClient()
    outer = mlflow.start_run().info.run_id
    inner = mlflow.start_run(nested=True).info.run_id
    ctrl_c_again[0] = 7  # four noted; the fifth, sixth, seventh raise in the ending, which tries again
    assert end_runs(client, [outer, inner], "KILLED", "stopped") == []
    assert ctrl_c_again[0] == 0
    for run_id in (outer, inner):
        assert MlflowClient().get_run(run_id).info.status == "KILLED"


def test_a_run_that_every_attempt_fails_to_end_is_reported_left_running(
    tracking_uri: str, ctrl_c_again: list[int]
) -> None:
    client = TrackingClient()
    outer = mlflow.start_run().info.run_id
    inner = mlflow.start_run(nested=True).info.run_id
    ctrl_c_again[1] = 1000  # each attempt is cut short by a KeyboardInterrupt
    assert end_runs(client, [outer, inner], "KILLED", "stopped") == [outer, inner]
    assert ctrl_c_again[1] == 1000 - 2 * END_ATTEMPTS
    assert MlflowClient().get_run(outer).info.status == "RUNNING"
    ctrl_c_again[1] = 0
    assert end_runs(client, [outer, inner], "KILLED", "stopped") == []
    for run_id in (outer, inner):
        run = MlflowClient().get_run(run_id)
        assert (run.info.status, run.data.tags[TAG_ERROR]) == ("KILLED", "stopped")
    assert mlflow.active_run() is None
