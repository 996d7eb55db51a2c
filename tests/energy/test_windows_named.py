"""Named, overlapping meter windows and the power timeline, on every backend (faithful fakes for GPU and RAPL)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fakes import fake_pynvml
from fakes.fake_pynvml import FakeGPU
from fakes.fake_rapl import set_uj, zone

from mlflow_roofline.energy import MeterError, make_meter
from mlflow_roofline.energy.estimate import EstimateMeter
from mlflow_roofline.energy.rapl import RaplMeter

UUID = "GPU-00000000-0000-0000-0000-000000000001"


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake_pynvml.configure([FakeGPU(UUID, power_w=250.0, counter_period_s=0.01)])
    return fake_pynvml


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def spin_cpu(cpu_seconds: float) -> None:
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass


def integral_j(timeline: list[tuple[float, float]], first_t: float) -> float:
    """Joules of a (time, mean power since the previous point) timeline, from its first point at first_t."""
    total, previous = 0.0, first_t
    for t, watts in timeline:
        total += watts * (t - previous)
        previous = t
    return total


def test_overlapping_windows_each_get_their_own_energy(nvml) -> None:
    with make_meter("nvml", nvml=nvml) as meter:
        meter.begin_window("job")
        busy_wait(0.2)
        meter.begin_window("train")
        assert meter.open_windows == ["job", "train"]
        busy_wait(0.3)
        train = meter.end_window("train")
        busy_wait(0.1)
        job = meter.end_window("job")
        assert not meter.is_open
    assert train.energy_j == pytest.approx(250.0 * train.time_s, rel=0.1)
    assert job.energy_j == pytest.approx(250.0 * job.time_s, rel=0.1)
    assert job.energy_j > train.energy_j and job.started_at < train.started_at


def test_windows_may_end_in_any_order_on_the_power_sampler(nvml) -> None:
    fake_pynvml.configure([FakeGPU(UUID, power_w=120.0, energy_counter=False)])
    with make_meter("nvml_power", nvml=nvml, sample_hz=50) as meter:
        meter.begin_window("a")
        busy_wait(0.2)
        meter.begin_window("b")
        busy_wait(0.2)
        a = meter.end_window("a")
        busy_wait(0.2)
        b = meter.end_window("b")
    for m in (a, b):
        assert m.error is None
        assert m.energy_j == pytest.approx(120.0 * m.time_s, rel=0.05)


def test_window_misuse_names_the_window() -> None:
    with EstimateMeter() as meter:
        meter.begin_window("warmup")
        with pytest.raises(MeterError, match="'warmup' is already open"):
            meter.begin_window("warmup")
        with pytest.raises(MeterError, match="end_window\\('eval'\\) without begin_window"):
            meter.end_window("eval")
        meter.begin()  # the default window alongside a named one
        assert meter.end().source == "estimate"
        assert meter.end_window("warmup").time_s > 0


def test_rapl_overlapping_windows_see_every_wrap(tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    package = zone(root, "intel-rapl:0", "package-0", 100)
    with RaplMeter(root, wrap_check_s=0.02) as meter:
        meter.begin_window("outer")
        set_uj(package, 600_100)  # +0.6 J
        time.sleep(0.1)
        meter.begin_window("inner")
        set_uj(package, 100_100)  # wrapped: +0.5 J
        time.sleep(0.1)
        inner = meter.end_window("inner")
        set_uj(package, 300_100)  # +0.2 J
        outer = meter.end_window("outer")
    assert inner.error is None, inner.error
    assert inner.energy_j == pytest.approx(0.5)
    assert outer.energy_j == pytest.approx(1.3)


def test_a_failed_read_fails_only_the_windows_that_span_it(nvml) -> None:
    fake_pynvml.configure([FakeGPU(UUID, power_w=100.0, counter_period_s=0.01, fail_after_reads=3)])
    with make_meter("nvml", nvml=nvml) as meter:  # read 1: the probe
        meter.begin_window("first")  # read 2
        busy_wait(0.05)
        first = meter.end_window("first")  # read 3
        meter.begin_window("second")  # read 4 fails
        second = meter.end_window("second")
    assert first.error is None and first.energy_j > 0
    assert second.energy_j is None and second.error.startswith("read failed at window start")


def test_estimate_timeline_is_cpu_utilisation_times_watts() -> None:
    # This process's CPU alone: a pytest worker's children (the session's warm-job server, a process an
    # earlier test left to be reaped) would add their CPU time to the tree whenever they exit or are reaped.
    with EstimateMeter(watts_per_core=10.0, include_children=False) as meter:
        meter.enable_timeline(0.05)
        meter.begin()
        spin_cpu(0.4)
        time.sleep(0.3)  # idle: the timeline drops
        m = meter.end()
        timeline = meter.power_timeline()
    assert len(timeline) >= 6  # 0.7 s at 20 Hz (fewer on a loaded machine)
    assert all(0.0 <= watts <= 10.0 * 1.5 for _, watts in timeline)  # at most this one busy thread, with jitter
    assert max(w for _, w in timeline) > 3.0 * min(w for _, w in timeline)
    # The timeline's points are readings of the same counter: its integral is the window's energy.
    assert integral_j(timeline, m.started_at) == pytest.approx(m.energy_j, rel=0.05)


def test_nvml_counter_timeline_follows_the_gpu_power(nvml) -> None:
    with make_meter("nvml", nvml=nvml) as meter:
        meter.enable_timeline(0.05)
        with meter.window() as w:
            busy_wait(0.5)
        timeline = meter.power_timeline()
    assert len(timeline) >= 5
    assert integral_j(timeline, w.measurement.started_at) == pytest.approx(w.measurement.energy_j, rel=0.1)
    mid = [watts for _, watts in timeline[1:-1]]
    assert sum(mid) / len(mid) == pytest.approx(250.0, rel=0.15)


def test_nvml_power_timeline_is_its_samples(nvml) -> None:
    fake_pynvml.configure([FakeGPU(UUID, power_w=180.0, energy_counter=False)])
    with make_meter("nvml_power", nvml=nvml, sample_hz=50) as meter:
        with meter.window():
            busy_wait(0.3)
        timeline = meter.power_timeline()
        assert len(timeline) == meter.samples_taken >= 4
    assert {watts for _, watts in timeline} == {180.0}
    assert [t for t, _ in timeline] == sorted(t for t, _ in timeline)


def test_without_enable_timeline_nothing_is_recorded() -> None:
    with EstimateMeter() as meter:
        with meter.window():
            spin_cpu(0.05)
        assert meter.power_timeline() == []
