"""The estimate meter against real CPU work, and auto's choice on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlflow_roofline.energy import MeterError, make_meter
from mlflow_roofline.energy.estimate import DEFAULT_WATTS_PER_CORE, WATTS_ENV, EstimateMeter


def spin_cpu(cpu_seconds: float) -> None:
    """Busy loop until this process has used ``cpu_seconds`` more CPU time."""
    end = time.process_time() + cpu_seconds
    x = 0
    while time.process_time() < end:
        x += 1


@pytest.fixture(autouse=True)
def _no_watts_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WATTS_ENV, raising=False)


def test_energy_grows_with_cpu_time() -> None:
    meter = EstimateMeter()
    energies = []
    for cpu_s in (0.1, 0.3):
        with meter.window() as w:
            spin_cpu(cpu_s)
        assert w.measurement.error is None and w.measurement.source == "estimate"
        energies.append(w.measurement.energy_j)
    # CPU time is measured by the kernel, so the estimate is the busy CPU time x 6 W
    # (plus a sliver of loop overhead).
    assert energies[0] == pytest.approx(0.1 * DEFAULT_WATTS_PER_CORE, rel=0.1)
    assert energies[1] == pytest.approx(0.3 * DEFAULT_WATTS_PER_CORE, rel=0.1)
    assert energies[1] > 2.5 * energies[0]


def test_sleeping_costs_next_to_nothing() -> None:
    meter = EstimateMeter()
    with meter.window() as w:
        time.sleep(0.3)
    m = w.measurement
    assert m.time_s >= 0.3
    if m.energy_j is not None:  # a sleep may accrue no CPU time at all: then "did not advance"
        assert m.energy_j < 0.05 * DEFAULT_WATTS_PER_CORE
    else:
        assert "did not advance" in m.error


def test_exited_children_are_counted_and_self_can_be_left_out() -> None:
    meter = EstimateMeter(include_self=False)
    code = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    with meter.window() as w:
        subprocess.run([sys.executable, "-c", code], check=True)
        spin_cpu(0.2)  # this process's own work: not counted with include_self=False
    # The child's 0.4 s of loop plus its interpreter start-up, not our 0.2 s.
    assert 0.4 * DEFAULT_WATTS_PER_CORE <= w.measurement.energy_j < 1.0 * DEFAULT_WATTS_PER_CORE


def test_live_children_are_counted() -> None:
    meter = EstimateMeter(rescan_s=0.0)
    code = "import time\nend = time.time() + 20\nwhile time.time() < end: pass"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.2)
        with meter.window() as w:
            time.sleep(0.6)  # the child spins; we sleep
        child_alive = child.poll() is None
    finally:
        child.kill()
        child.wait()
    assert child_alive
    # The child had at most 0.6 s of CPU (2 shared cores: maybe much less) and at least some.
    assert 0.02 * DEFAULT_WATTS_PER_CORE < w.measurement.energy_j <= 0.7 * DEFAULT_WATTS_PER_CORE


def test_a_live_child_left_out_is_not_counted() -> None:
    meter = EstimateMeter(rescan_s=0.0)
    code = "import time\nend = time.time() + 20\nwhile time.time() < end: pass"
    helper = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.2)
        with meter.window() as counted:  # the helper is listed at the window's start
            time.sleep(0.6)
        meter.leave_out(helper.pid)
        with meter.window() as left_out:
            time.sleep(0.6)  # the helper spins as before; this process sleeps
        helper_alive = helper.poll() is None
    finally:
        helper.kill()
        helper.wait()
    assert helper_alive
    assert counted.measurement.energy_j > 0.02 * DEFAULT_WATTS_PER_CORE
    # A sleeping process's own sliver of CPU at most (or no advance at all).
    assert left_out.measurement.energy_j is None or left_out.measurement.energy_j < 0.01 * DEFAULT_WATTS_PER_CORE


def test_the_scan_for_descendants_is_not_charged_to_the_window_it_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    meter = EstimateMeter(rescan_s=3600.0)  # one scan: at the first reading, the window's begin
    listing = meter._me.children

    def slow_listing(recursive: bool = False) -> list:
        spin_cpu(0.3)  # stands for a /proc walk on a busy machine, much magnified
        return listing(recursive=recursive)

    monkeypatch.setattr(meter._me, "children", slow_listing)
    with meter.window() as w:
        pass
    # The scan ran before the begin reading: the empty window holds a sliver (or no advance), not 1.8 J.
    assert w.measurement.energy_j is None or w.measurement.energy_j < 0.1 * DEFAULT_WATTS_PER_CORE


def test_watts_per_core_from_argument_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert EstimateMeter().watts_per_core == DEFAULT_WATTS_PER_CORE
    monkeypatch.setenv(WATTS_ENV, "12.5")
    meter = EstimateMeter()
    assert meter.watts_per_core == 12.5
    with meter.window() as w:
        spin_cpu(0.1)
    assert w.measurement.energy_j == pytest.approx(0.1 * 12.5, rel=0.1)
    assert EstimateMeter(watts_per_core=3).watts_per_core == 3.0  # the argument wins
    monkeypatch.setenv(WATTS_ENV, "lots")
    with pytest.raises(MeterError, match=f"{WATTS_ENV}: must be a positive number.*'lots'"):
        EstimateMeter()
    with pytest.raises(MeterError, match="watts_per_core: must be a positive number"):
        EstimateMeter(watts_per_core=-1)
    assert EstimateMeter(watts_per_core=100).watts_per_core == 100.0
    for absurd in (100.5, 6e9, "1e308"):  # no core draws kilowatts: a unit slip
        with pytest.raises(MeterError, match="at most 100"):
            EstimateMeter(watts_per_core=absurd)


def _rapl_readable() -> bool:
    zone = Path("/sys/class/powercap/intel-rapl:0/energy_uj")
    return zone.exists() and os.access(zone, os.R_OK)


def test_auto_on_this_machine_chooses_estimate() -> None:
    if _rapl_readable():
        pytest.skip("this machine exposes readable RAPL counters: auto rightly picks rapl")
    meter = make_meter("auto", device="cpu")
    assert meter.source == "estimate" and meter.scope == "process"
    assert meter.selection.startswith("auto chose estimate (rapl: ")
    meter_any = make_meter("auto")  # device auto: no NVML here either
    assert meter_any.source == "estimate" and "nvml:" in meter_any.selection


def test_unknown_meter_and_device_name_the_choices() -> None:
    choices = "auto, nvml, nvml_power, rocm, rapl, estimate"
    with pytest.raises(MeterError, match=f"meter: must be one of {choices}, got .joules."):
        make_meter("joules")
    with pytest.raises(MeterError, match="device: must be one of auto, cuda, cpu, got 'tpu'"):
        make_meter("estimate", device="tpu")
