"""The default window's own fast path (plain attributes, no lock) alongside named windows, and window_measurement."""

from __future__ import annotations

import dataclasses
import time

import pytest
from support.sweeps import wait_until

from mlflow_roofline.energy import MeterError
from mlflow_roofline.energy.base import DEFAULT_WINDOW
from mlflow_roofline.energy.estimate import EstimateMeter
from mlflow_roofline.energy.readings import Measurement, Snapshot, window_measurement


def spin_cpu(cpu_seconds: float) -> None:
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass


def test_open_windows_keeps_the_opening_order_with_the_default_window_among_named_ones() -> None:
    with EstimateMeter() as meter:
        meter.begin_window("job")
        meter.begin()
        meter.begin_window("eval")
        assert meter.open_windows == ["job", DEFAULT_WINDOW, "eval"]
        meter.end()
        assert meter.open_windows == ["job", "eval"] and meter.is_open
        meter.begin_window(DEFAULT_WINDOW)  # the same window by its name
        assert meter.open_windows == ["job", "eval", DEFAULT_WINDOW]
        with pytest.raises(MeterError, match="a window is already open; end\\(\\) it first"):
            meter.begin()
        assert meter.end_window(DEFAULT_WINDOW).ok
        meter.end_window("eval")
        meter.end_window("job")
        assert not meter.is_open and meter.open_windows == []
        with pytest.raises(MeterError, match="end\\(\\) without begin\\(\\)"):
            meter.end()


def test_default_window_inside_a_named_one_measures_its_own_part() -> None:
    with EstimateMeter(watts_per_core=10.0) as meter:
        meter.begin_window("job")
        spin_cpu(0.1)
        meter.begin()
        spin_cpu(0.2)
        inner = meter.end()
        spin_cpu(0.1)
        outer = meter.end_window("job")
    assert inner.energy_j == pytest.approx(2.0, rel=0.25)  # 0.2 CPU s x 10 W
    assert outer.energy_j == pytest.approx(4.0, rel=0.25)
    assert outer.started_at < inner.started_at and outer.time_s > inner.time_s


def test_close_drops_the_default_and_named_windows() -> None:
    meter = EstimateMeter()
    meter.begin_window("job")
    meter.begin()
    meter.close()
    assert not meter.is_open and meter.open_windows == []
    with pytest.raises(MeterError, match="closed"):
        meter.begin()
    with pytest.raises(MeterError, match="closed"):
        meter.begin_window("job")


def test_a_timeline_enabled_after_some_windows_records_the_next_ones() -> None:
    with EstimateMeter(watts_per_core=10.0) as meter:
        for _ in range(3):  # unlocked reads: no timeline yet
            meter.begin()
            meter.end()
        assert meter.power_timeline() == []
        meter.enable_timeline(0.02)
        meter.begin()
        # until the sampler thread has recorded three points (a loaded host may not schedule it for a while)
        wait_until(lambda: spin_cpu(0.02) or len(meter.power_timeline()) >= 3, "three timeline points")
        m = meter.end()
        timeline = meter.power_timeline()
    assert m.ok and len(timeline) >= 3
    assert all(watts >= 0.0 for _, watts in timeline)


def test_window_measurement_common_case_and_each_caveat() -> None:
    good = window_measurement("rapl", 0.001, Snapshot({"a": 1.0, "b": 2.0}), Snapshot({"a": 3.0, "b": 5.0}), 0.5, 10.0)
    assert (good.energy_j, good.per_device_j, good.warning, good.error) == (5.0, {"a": 2.0, "b": 3.0}, None, None)
    assert good.started_at == 10.0 and good.time_s == 0.5 and good.source == "rapl"

    stalled = window_measurement("rapl", 0.0, Snapshot({"b": 2.0, "a": 1.0}), Snapshot({"b": 2.0, "a": 4.0}), 1.0, None)
    assert stalled.energy_j == 3.0 and stalled.warning == "counter of b did not advance"

    backwards = window_measurement("nvml", 0.0, Snapshot({"a": 5.0}), Snapshot({"a": 4.0}), 1.0, None)
    assert backwards.energy_j is None and backwards.per_device_j == {"a": 0.0}
    assert backwards.error == "nvml counter did not advance during the 1 s window (no update in the window)"

    short = window_measurement("nvml", 0.1, Snapshot({"a": 0.0}), Snapshot({"a": 0.0}), 0.01, None, "sampler note")
    assert short.energy_j is None and "too short a window" in str(short.error)
    assert short.warning is not None and short.warning.startswith("sampler note; window of 0.01 s is shorter")

    empty = window_measurement("estimate", 0.0, Snapshot({}), Snapshot({}), 1.0, None)
    assert empty.energy_j is None and empty.error is not None


def test_a_good_reading_built_fast_is_the_measurement_the_constructor_builds() -> None:
    fast = Measurement.good(5.0, {"a": 2.0, "b": 3.0}, 0.5, "rapl", 10.0)
    assert fast == Measurement(5.0, {"a": 2.0, "b": 3.0}, 0.5, "rapl", started_at=10.0)
    assert {f.name: getattr(fast, f.name) for f in dataclasses.fields(Measurement)} == dataclasses.asdict(fast)
    assert fast.ok and fast.avg_power_w == 10.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.energy_j = 1.0  # type: ignore[misc]
    assert dataclasses.replace(fast, energy_j=1.0).energy_j == 1.0
