"""The ``rocm`` meter against a fake amdsmi: joules from accumulator x resolution, wraps, MI250 dies, auto."""

from __future__ import annotations

import builtins
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
