"""RAPL meter against a fake powercap tree in a temp dir, wraparound included."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fakes.fake_rapl import MAX_UJ, set_uj, zone
from support.sweeps import wait_until

from mlflow_roofline.energy import MeterError, make_meter
from mlflow_roofline.energy.rapl import RaplMeter


@pytest.fixture
def powercap(tmp_path: Path) -> dict[str, Path]:
    """Two packages with DRAM, plus zones that must be left out (core, psys, mmio)."""
    root = tmp_path / "powercap"
    zones = {
        "package-0": zone(root, "intel-rapl:0", "package-0", 100),
        "core": zone(root, "intel-rapl:0:0", "core", 100),
        "package-0/dram": zone(root, "intel-rapl:0:1", "dram", 100),
        "package-1": zone(root, "intel-rapl:1", "package-1", 100),
        "package-1/dram": zone(root, "intel-rapl:1:0", "dram", 100),
        "psys": zone(root, "intel-rapl:2", "psys", 100),
        "mmio": zone(root, "intel-rapl-mmio:0", "package-0", 100),
    }
    zones["root"] = root
    return zones


def test_discovers_packages_and_dram_only(powercap) -> None:
    with RaplMeter(powercap["root"]) as meter:
        assert meter.devices == ["package-0", "package-0/dram", "package-1", "package-1/dram"]
        assert (meter.source, meter.scope) == ("rapl", "node")
        assert meter.hardware.startswith("cpu:")


def test_window_sums_zone_deltas_in_joules(powercap) -> None:
    with RaplMeter(powercap["root"]) as meter:
        meter.begin()
        set_uj(powercap["package-0"], 100 + 250_000)
        set_uj(powercap["package-0/dram"], 100 + 50_000)
        set_uj(powercap["package-1"], 100 + 200_000)
        set_uj(powercap["core"], 100 + 900_000)  # inside package-0: not added again
        set_uj(powercap["psys"], 100 + 900_000)
        m = meter.end()
    assert m.error is None
    assert m.per_device_j == pytest.approx(
        {"package-0": 0.25, "package-0/dram": 0.05, "package-1": 0.2, "package-1/dram": 0.0}
    )
    assert m.energy_j == pytest.approx(0.5)
    assert m.warning.endswith("counter of package-1/dram did not advance")


def test_wraparound_adds_the_counter_range(powercap) -> None:
    set_uj(powercap["package-0"], MAX_UJ - 1000)
    with RaplMeter(powercap["root"]) as meter:
        meter.begin()
        set_uj(powercap["package-0"], 4000)  # passed max_energy_range_uj once
        m = meter.end()
    assert m.per_device_j["package-0"] == pytest.approx(5000 / 1e6)


def _zone(meter: RaplMeter, key: str) -> Any:
    """The meter's zone ``key`` (its last read, to know the background check saw a value)."""
    return next(z for z in meter._zones if z.key == key)


def test_background_reads_catch_every_wrap_of_a_long_window(powercap) -> None:
    p0 = powercap["package-0"]
    set_uj(p0, 900_000)
    with RaplMeter(powercap["root"], wrap_check_s=0.02) as meter:
        meter.begin()
        for value in (100_000, 900_000, 100_000):  # +200k (wrap), +800k, +200k (wrap)
            set_uj(p0, value)
            # the background check has read it (a wait on the event, not on the clock: a loaded host
            # may not schedule the sampler thread for a while)
            wait_until(lambda v=value: _zone(meter, "package-0").last_uj == v, "the wrap check to read the counter")
        m = meter.end()
    # Two reads alone would see one wrap: 100k - 900k + 1M = 200k. The checks saw 1.2M.
    assert m.per_device_j["package-0"] == pytest.approx(1.2)


def test_counter_that_did_not_move_is_not_zero(powercap) -> None:
    with RaplMeter(powercap["root"]) as meter:
        with meter.window() as w:
            pass
    assert w.measurement.energy_j is None
    assert "did not advance" in w.measurement.error


def test_read_failing_mid_window_is_an_error(powercap) -> None:
    with RaplMeter(powercap["root"]) as meter:
        meter.begin()
        (powercap["package-1"] / "energy_uj").unlink()
        m = meter.end()
    assert m.energy_j is None and "intel-rapl:1/energy_uj" in m.error


def test_missing_or_empty_tree_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(MeterError, match="no powercap interface"):
        RaplMeter(tmp_path / "absent")
    zone(tmp_path / "pc", "intel-rapl:0", "psys", 5)
    with pytest.raises(MeterError, match="no package zone"):
        RaplMeter(tmp_path / "pc")
    with pytest.raises(MeterError, match="meter rapl is not available here.*choices"):
        make_meter("rapl", rapl_root=str(tmp_path / "absent"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_counter_says_so(powercap) -> None:
    (powercap["package-0"] / "energy_uj").chmod(0o000)
    with pytest.raises(MeterError, match="not readable"):
        RaplMeter(powercap["root"])


def test_auto_on_cpu_prefers_readable_rapl(powercap) -> None:
    meter = make_meter("auto", device="cpu", rapl_root=str(powercap["root"]))
    try:
        assert meter.source == "rapl" and meter.selection == "auto chose rapl"
    finally:
        meter.close()


def test_root_from_environment(powercap, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFLINE_RAPL_ROOT", str(powercap["root"]))
    with RaplMeter() as meter:
        assert meter.root == powercap["root"]


REAL_RANGE_UJ = 262_143_328_850  # a Xeon package's max_energy_range_uj: 262 kJ


@pytest.mark.parametrize(
    ("end_uj", "what"),
    [
        (900_000_000, "went back from 1000000000 to 900000000 µJ: as a wraparound"),  # 261 kJ in no time
        (1_000_000_000 + 100_000_000_000, "jumped 1e+05 J"),
        (REAL_RANGE_UJ + 5, f"reads {REAL_RANGE_UJ + 5} µJ, outside its range"),
    ],
    ids=["back", "jump", "out-of-range"],
)
def test_a_counter_glitch_fails_the_window_and_the_next_one_is_measured(tmp_path: Path, end_uj: int, what: str) -> None:
    p0 = zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000_000, max_uj=REAL_RANGE_UJ)
    with RaplMeter(tmp_path) as meter:
        meter.begin()
        set_uj(p0, end_uj)
        glitched = meter.end()
        set_uj(p0, 2_000)  # a genuine wrap from the reading before
        meter.begin()
        set_uj(p0, 502_000)
        after = meter.end()
    assert glitched.energy_j is None
    assert glitched.error.startswith(f"rapl: counter of package-0 {what}")
    assert after.energy_j == pytest.approx(0.5)
