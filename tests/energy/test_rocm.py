"""The ``rocm`` meter against a fake amdsmi: joules from accumulator x resolution, wraps, MI250 dies, auto."""

from __future__ import annotations

import builtins
import re
import time

import pytest
from fakes import fake_amdsmi, fake_pynvml
from fakes.fake_amdsmi import FakeDie

from mlflow_roofline.energy import MeterError, make_meter
from mlflow_roofline.energy import rocm as rocm_module

WINDOW_S = 0.3


@pytest.fixture
def amdsmi():
    fake_amdsmi.configure([FakeDie(power_w=500.0)])
    yield fake_amdsmi
    assert fake_amdsmi.init_count() == 0, "a meter left amdsmi initialised"


def _measure(meter) -> tuple[float, float]:
    with meter, meter.window() as w:
        time.sleep(WINDOW_S)
    m = w.measurement
    assert m.ok, m.error
    return m.energy_j, m.time_s


def test_joules_are_accumulator_ticks_times_resolution(amdsmi) -> None:
    meter = make_meter("rocm", amdsmi=amdsmi)
    assert meter.hardware == "AMD Instinct MI300X" and meter.devices == ["rocm:0"]
    energy_j, time_s = _measure(meter)
    assert energy_j == pytest.approx(500.0 * time_s, rel=0.05)


def test_a_wrapped_32_bit_accumulator_counts_one_wrap(amdsmi) -> None:
    # 500 W in ticks of 15.259 uJ: ~33k ticks per ms; start 100k ticks below the 32-bit wrap.
    amdsmi.configure([FakeDie(power_w=500.0, start_ticks=(1 << 32) - 100_000, wrap_ticks=1 << 32)])
    energy_j, time_s = _measure(make_meter("rocm", amdsmi=amdsmi))
    assert energy_j == pytest.approx(500.0 * time_s, rel=0.05)


def test_the_two_dies_of_an_mi250_are_one_device(amdsmi) -> None:
    # The board's energy on one die, 0 W on the other (as some MI250 firmware reports it).
    amdsmi.configure(
        [
            FakeDie("AMD Instinct MI250X", board_serial="B1", power_w=400.0),
            FakeDie("AMD Instinct MI250X", board_serial="B1", power_w=0.0),
            FakeDie("AMD Instinct MI250X", board_serial="B2", power_w=300.0),
            FakeDie("AMD Instinct MI250X", board_serial="B2", power_w=100.0),
        ]
    )
    meter = make_meter("rocm", amdsmi=amdsmi)
    assert meter.devices == ["rocm:0", "rocm:1"]
    with meter, meter.window() as w:
        time.sleep(WINDOW_S)
    m = w.measurement
    assert m.ok and m.warning is None, m.warning  # no die counted as a stalled device
    assert m.per_device_j["rocm:0"] == pytest.approx(400.0 * m.time_s, rel=0.05)
    assert m.per_device_j["rocm:1"] == pytest.approx(400.0 * m.time_s, rel=0.05)


def test_a_guest_without_the_accumulator_is_refused(amdsmi) -> None:
    amdsmi.configure([FakeDie(energy=False)])
    with pytest.raises(MeterError, match="rocm:0 .*no energy accumulator"):
        make_meter("rocm", amdsmi=amdsmi)


def test_without_amdsmi_the_message_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_amdsmi(name, *args, **kwargs):
        if name == "amdsmi":
            raise ImportError("No module named 'amdsmi'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(rocm_module, "AMDSMI", None)
    monkeypatch.setattr(builtins, "__import__", no_amdsmi)
    with pytest.raises(MeterError, match=r"mlflow-roofline\[amd\]"):
        make_meter("rocm")


def test_auto_picks_rocm_on_an_amd_host(amdsmi) -> None:
    fake_pynvml.configure([], library_present=False)  # no NVIDIA driver on an AMD host
    meter = make_meter("auto", device="cuda", nvml=fake_pynvml, amdsmi=amdsmi)
    with meter:
        assert meter.source == "rocm"
        assert meter.selection.startswith("auto chose rocm (nvml: NVML is not available")


# -- a counter glitch is not energy; a library failure is one line ------------------------------
def _from_read(n: int, change):
    """A ``misbehave`` hook: reads from the ``n``-th on are changed by ``change(answer)``."""

    def misbehave(read: int, answer: dict) -> dict:
        return change(answer) if read >= n else answer

    return misbehave


def _offset(ticks: int):
    return lambda a: {**a, "energy_accumulator": a["energy_accumulator"] + ticks, "power": 0}


def _resolution(uj: float):
    return lambda a: {**a, "counter_resolution": uj}


GLITCH_READ = 4  # 1: the meter's probe, 2: the session's first read, 3: the window's start, 4: its end


@pytest.mark.parametrize(
    ("start_ticks", "offset", "what"),
    [
        (5 << 32, -(10**9), "went back"),  # a 64-bit counter steps back once: not a 2**64 wrap (2.8e14 J)
        (1 << 31, -(10**8), "went back"),  # a 32-bit one steps back mid-range: not a 2**32 wrap (64 kJ)
        (5 << 32, 10**15, "jumped"),  # 1e15 ticks are 1.5e10 J
    ],
    ids=["back-64", "back-32", "jump"],
)
def test_a_counter_glitch_fails_the_window_and_the_next_one_is_measured(
    amdsmi, start_ticks: int, offset: int, what: str
) -> None:
    amdsmi.configure([FakeDie(start_ticks=start_ticks, misbehave=_from_read(GLITCH_READ, _offset(offset)))])
    meter = make_meter("rocm", amdsmi=amdsmi)
    with meter:
        with meter.window() as glitched:
            time.sleep(0.05)
        with meter.window() as after:
            time.sleep(WINDOW_S)
    m = glitched.measurement
    assert m.energy_j is None and m.per_device_j == {}
    assert m.error.startswith(f"rocm: counter of rocm:0 {what}") and m.error.endswith("a counter glitch, not energy")
    assert "\n" not in m.error
    assert after.measurement.ok, after.measurement.error
    assert after.measurement.energy_j == pytest.approx(500.0 * after.measurement.time_s, rel=0.05)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda a: (_ for _ in ()).throw(RuntimeError("amdsmi: device is busy")),
            "RuntimeError: amdsmi: device is busy",
        ),
        (lambda a: {**a, "energy_accumulator": float("nan")}, "gave the accumulator nan, not a count of ticks"),
        (lambda a: {**a, "energy_accumulator": "N/A"}, "gave the accumulator 'N/A', not a count of ticks"),
        (lambda a: {**a, "counter_resolution": 0.0}, "gave the counter_resolution 0.0, not a positive µJ per tick"),
    ],
    ids=["runtime-error", "nan", "not-available", "zero-resolution"],
)
def test_a_failing_read_is_the_window_error_in_one_line(amdsmi, change, reason: str) -> None:
    amdsmi.configure([FakeDie(misbehave=_from_read(GLITCH_READ, change))])
    with make_meter("rocm", amdsmi=amdsmi) as meter:
        with meter.window() as w:
            time.sleep(0.05)
    m = w.measurement
    assert m.energy_j is None and m.error.startswith("rocm: ") and "rocm:0" in m.error and reason in m.error
    assert "\n" not in m.error


@pytest.mark.parametrize(
    ("die", "reason"),
    [
        (FakeDie(misbehave=_from_read(1, _resolution(float("nan")))), "rocm:0 (AMD Instinct MI300X) gives no usable"),
        (FakeDie(misbehave=_from_read(1, _resolution(0))), "counter_resolution 0, not a positive µJ per tick"),
        (FakeDie(misbehave=_from_read(1, lambda a: 1 / 0)), "amdsmi_get_energy_count failed (ZeroDivisionError"),
    ],
    ids=["nan-resolution", "zero-resolution", "library-error"],
)
def test_a_meter_that_cannot_read_is_refused_when_built(amdsmi, die: FakeDie, reason: str) -> None:
    amdsmi.configure([die])
    with pytest.raises(MeterError, match=re.escape(reason)):
        make_meter("rocm", amdsmi=amdsmi)
