"""LiveEnergy: a window's running total per device, read from another thread, equal to the window at its close."""

from __future__ import annotations

import threading
import time

import pytest
from fakes import fake_pynvml
from fakes.fake_pynvml import FakeGPU

from mlflow_roofline.energy import MeterError, make_meter
from mlflow_roofline.energy.live import LiveEnergy

UUIDS = ["GPU-00000000-0000-0000-0000-000000000001", "GPU-00000000-0000-0000-0000-000000000002"]


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake_pynvml.configure(
        [FakeGPU(uuid, power_w=100.0 * (i + 1), counter_period_s=0.01) for i, uuid in enumerate(UUIDS)]
    )
    yield fake_pynvml
    assert fake_pynvml.init_count() == 0, "a meter left NVML initialised"


def until_counter_moves(live: LiveEnergy, device: str, above: float) -> dict[str, float]:
    """Readings until ``device`` shows more than ``above`` joules (the fake counter follows wall time)."""
    while True:
        reading = live.joules()
        assert reading is not None
        if reading[1].get(device, 0.0) > above:
            return reading[1]


def test_the_running_total_grows_and_ends_at_the_windows_measurement(nvml) -> None:
    meter = make_meter("nvml", device="cuda", nvml=nvml)
    live = LiveEnergy(meter, "train")
    assert live.take() == [] and live.joules() == (pytest.approx(time.time(), abs=5), {})
    live.begin()
    first = until_counter_moves(live, "cuda:0", 0.0)
    second = until_counter_moves(live, "cuda:0", first["cuda:0"])
    assert set(first) == {"cuda:0", "cuda:1"} and second["cuda:1"] >= first["cuda:1"]
    measurement = live.end()
    meter.close()
    assert measurement.ok and second["cuda:0"] <= measurement.per_device_j["cuda:0"]
    [(_, last)] = live.take()  # once after the close: the window's own figures
    assert last == measurement.per_device_j
    assert live.take() == []  # closed: nothing more


def test_reopened_windows_add_up_and_a_closed_window_cannot_be_read_so_far(nvml) -> None:
    meter = make_meter("nvml", device="cuda", nvml=nvml)
    live = LiveEnergy(meter)
    total = {"cuda:0": 0.0, "cuda:1": 0.0}
    for _ in range(3):  # a Trainer callback cuts its window at every sample
        live.begin()
        until_counter_moves(live, "cuda:0", total["cuda:0"])
        for device, joules in live.end().per_device_j.items():
            total[device] += joules
    with pytest.raises(MeterError, match="not open"):
        meter.so_far()
    meter.close()
    reading = live.joules()
    assert reading is not None and reading[1] == pytest.approx(total, rel=1e-12)


def test_a_failed_window_makes_the_total_unknown_never_a_stand_in(nvml) -> None:
    gpu = FakeGPU(UUIDS[0], counter_period_s=0.01)
    nvml.configure([gpu])
    meter = make_meter("nvml", device="cuda", nvml=nvml)
    live = LiveEnergy(meter)
    live.begin()
    gpu.fail_after_reads = gpu.reads  # lost after the window opened
    assert live.joules() is None  # the open window's reading failed: no point now
    assert live.end().error is not None
    meter.close()
    assert live.joules() is None and live.take() == []


def test_readings_from_another_thread_never_exceed_the_close(nvml) -> None:
    """The edges and the readings hold one lock: a reading taken across the close cannot overshoot it."""
    meter = make_meter("nvml", device="cuda", nvml=nvml)
    live = LiveEnergy(meter)
    seen: list[float] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            for _, joules in live.take():
                seen.append(joules.get("cuda:0", 0.0))

    live.begin()
    reader = threading.Thread(target=read)
    reader.start()
    until_counter_moves(live, "cuda:0", 0.0)
    measurement = live.end()
    stop.set()
    reader.join()
    meter.close()
    assert seen == sorted(seen) and max(seen, default=0.0) <= measurement.per_device_j["cuda:0"]


def test_closing_the_meter_under_an_open_window_ends_the_readings(nvml) -> None:
    """A job that stops measuring (a failure) closes its meter with the window open: no reading after."""
    meter = make_meter("nvml", device="cuda", nvml=nvml)
    live = LiveEnergy(meter)
    live.begin()
    assert live.take()  # open: a reading
    live.close_meter()
    assert live.take() == [] and not live.is_open and not meter.is_open
