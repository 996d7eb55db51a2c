"""The plausibility rule every counter meter shares (wraps where the range says so, a physical bound),
and how any meter's unforeseen failure ends: one line in the window's error, never a traceback."""

from __future__ import annotations

import threading

import pytest

from mlflow_roofline.energy.base import Snapshot
from mlflow_roofline.energy.counters import (
    BOARD_POWER_MARGIN,
    MAX_GPU_POWER_W,
    SLACK_S,
    CounterRule,
    gpu_power_bound_w,
)
from mlflow_roofline.energy.estimate import EstimateMeter
from mlflow_roofline.energy.sampler import PeriodicSampler


def test_a_plausible_step_and_a_plausible_wrap_are_energy() -> None:
    rule = CounterRule("rapl")
    assert rule.joules("package-0", 100, 600, 1.0, 1e-3, 2000.0) == pytest.approx(0.5)
    assert rule.joules("package-0", 900, 100, 1.0, 1e-3, 2000.0, wrap=1000) == pytest.approx(0.2)
    assert rule.glitches == 0 and rule.glitch is None


def test_the_bound_is_power_times_the_time_between_reads_plus_the_slack() -> None:
    rule = CounterRule("nvml")
    bound_j = 700.0 * (3.0 + SLACK_S)
    assert rule.joules("cuda:0", 0, int(bound_j), 3.0, 1.0, 700.0) == bound_j
    assert rule.joules("cuda:0", 0, int(bound_j) + 1, 3.0, 1.0, 700.0) == 0.0
    assert rule.glitches == 1
    assert rule.glitch == (
        "nvml: counter of cuda:0 jumped 2.8e+03 J in 3 s, over the device's bound of 2.8e+03 J (700 W): "
        "a counter glitch, not energy"
    )


def test_a_step_back_is_a_wrap_only_where_the_counter_has_a_range() -> None:
    rule = CounterRule("nvml")
    assert rule.joules("cuda:0", 1000, 999, 1.0, 1e-3, 2000.0, unit=" mJ") == 0.0
    assert (
        rule.glitch == "nvml: counter of cuda:0 went back from 1000 to 999 mJ (it never wraps): "
        "a counter glitch, not energy"
    )
    assert rule.joules("cuda:0", 10, 20, 1.0, 1e-3, 2000.0, wrap=15) == 0.0  # a reading past its range
    assert rule.joules("cuda:0", 40, 5, 1.0, 1e-3, 2000.0, wrap=15) == 0.0  # from one past its range
    assert rule.glitches == 3


def test_a_gpu_is_bounded_by_its_board_power_where_the_table_knows_it() -> None:
    assert gpu_power_bound_w("NVIDIA H100 80GB HBM3") == 700.0 * BOARD_POWER_MARGIN
    assert gpu_power_bound_w("AMD Instinct MI300X") == 750.0 * BOARD_POWER_MARGIN
    assert gpu_power_bound_w("NVIDIA Fake G100") == MAX_GPU_POWER_W


class _Flaky(EstimateMeter):
    """A meter whose library raises what it never documented, from its second read on."""

    reads = 0

    def _cumulative(self) -> Snapshot:
        self.reads += 1
        if self.reads > 1:
            raise RuntimeError("driver went away")
        return super()._cumulative()


def test_an_unforeseen_exception_of_a_read_is_the_window_error() -> None:
    with _Flaky() as meter:
        with meter.window() as w:
            pass
    assert w.measurement.energy_j is None
    assert w.measurement.error == "estimate: RuntimeError: driver went away"


def test_an_unforeseen_exception_of_a_sample_is_kept_not_a_dead_thread() -> None:
    raised = threading.Event()

    def sample() -> None:
        raised.set()
        raise RuntimeError("amdsmi: device is busy")

    sampler = PeriodicSampler(sample, 0.01, "test-sampler")
    sampler.start()
    try:
        assert raised.wait(5.0)
        sampler.stop()  # returns once no sample is in flight
        assert str(sampler.error) == "RuntimeError: amdsmi: device is busy"
    finally:
        sampler.close()
