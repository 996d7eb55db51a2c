"""NVML meters against the fake pynvml: counter, NotSupported fallback, failures, device mapping."""

from __future__ import annotations

import time

import pytest
from fakes import fake_pynvml
from fakes.fake_pynvml import FakeGPU

from mlflow_roofline.energy import MeterError, make_meter
from mlflow_roofline.energy.nvml import NvmlMeter
from mlflow_roofline.energy.nvml_devices import visible_nvml_indices
from mlflow_roofline.energy.nvml_power import NvmlPowerMeter, trapezoid_j

UUIDS = [
    "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
    "GPU-1a2b3c4d-0000-1111-2222-333344445555",
    "GPU-1a2b9999-0000-1111-2222-333344445555",
    "GPU-77aa0000-aaaa-bbbb-cccc-ddddeeeeffff",
]


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):
    """The fake module with four GPUs drawing 100, 200, 300 and 400 W; checks init/shutdown balance."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake_pynvml.configure([FakeGPU(uuid, power_w=100.0 * (i + 1)) for i, uuid in enumerate(UUIDS)])
    yield fake_pynvml
    assert fake_pynvml.init_count() == 0, "a meter left NVML initialised"


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        time.sleep(0.005)


def test_fake_errors_are_the_code_subclasses(nvml) -> None:
    err = nvml.NVMLError(nvml.NVML_ERROR_NOT_SUPPORTED)
    assert isinstance(err, nvml.NVMLError_NotSupported) and str(err) == "Not Supported"
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()


def test_counter_window_gives_power_times_time_per_gpu(nvml) -> None:
    meter = make_meter("nvml", device="cuda", nvml=nvml)
    assert (meter.source, meter.scope, meter.hardware) == ("nvml", "device", "NVIDIA Fake G100")
    with meter.window() as w:
        busy_wait(0.3)
    meter.close()
    m = w.measurement
    assert m is not None and m.error is None and m.source == "nvml"
    assert set(m.per_device_j) == {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}
    step = 0.02  # the fake counter's update period: each end is off by at most one step
    for i in range(4):
        watts = 100.0 * (i + 1)
        # counter granularity (a step per end) plus 5 % for a read descheduled on a busy CI machine
        assert abs(m.per_device_j[f"cuda:{i}"] - watts * m.time_s) <= watts * (2 * step + 0.05 * m.time_s)
    assert m.energy_j == pytest.approx(sum(m.per_device_j.values()))
    assert m.avg_power_w == pytest.approx(1000.0, rel=0.15)


def test_gpu_indices_follow_cuda_visible_devices(nvml, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    with make_meter("nvml", device="cuda", gpu_indices=[1], nvml=nvml) as meter:
        with meter.window() as w:
            busy_wait(0.3)
    # CUDA device 1 of this process is NVML device 1 (200 W), not NVML device 3.
    assert list(w.measurement.per_device_j) == ["cuda:1"]
    assert w.measurement.avg_power_w == pytest.approx(200.0, rel=0.15)


def test_gpu_index_out_of_range_names_the_field(nvml, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(MeterError, match=r"gpu_indices holds 2, expected a CUDA index in 0\.\.1"):
        NvmlMeter([2], nvml=nvml)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (None, [0, 1, 2, 3]),
        ("2,0", [2, 0]),
        (" 3 , 1 ", [3, 1]),
        ("GPU-77aa0000-aaaa-bbbb-cccc-ddddeeeeffff", [3]),
        ("GPU-8932f937,1", [0, 1]),  # unique prefix with GPU-
        ("77aa,0", [3, 0]),  # unique prefix without GPU-
        ("GPU-1a2b", []),  # ambiguous prefix: invalid, parsing stops there
        ("1,7,2", [1]),  # out of range: stops at the first invalid entry, as CUDA does
        ("0,-1,2", [0]),
        ("1,1", [1]),
        ("", []),
    ],
)
def test_cuda_visible_devices_mapping(nvml, env: str | None, expected: list[int]) -> None:
    nvml.nvmlInit()
    try:
        assert visible_nvml_indices(nvml, env) == expected
    finally:
        nvml.nvmlShutdown()


def test_no_visible_gpu_or_mig_is_an_error(nvml, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(MeterError, match="no GPU is visible"):
        NvmlMeter(nvml=nvml)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-6ae1b3c0-0000-5b3f-b8e2-0c5e0f6d7d2a")
    with pytest.raises(MeterError, match="MIG"):
        NvmlMeter(nvml=nvml)


def test_not_supported_counter_falls_back_to_power_sampling(nvml) -> None:
    nvml.configure([FakeGPU(UUIDS[0], power_w=300.0, energy_counter=False)])
    with pytest.raises(MeterError, match="NVMLError_NotSupported.*nvml_power"):
        NvmlMeter(nvml=nvml)
    meter = make_meter("auto", device="cuda", nvml=nvml, sample_hz=50)
    assert isinstance(meter, NvmlPowerMeter)
    assert "auto chose nvml_power" in meter.selection and "Not Supported" in meter.selection
    with meter.window() as w:
        busy_wait(0.4)
    taken = meter.samples_taken
    meter.close()
    m = w.measurement
    assert m.source == "nvml_power" and m.error is None and m.warning is None
    assert m.energy_j == pytest.approx(300.0 * m.time_s, rel=0.05)
    assert taken >= 4  # the background sampler ran, not just the two end samples (20 due; CI is shared)


def test_sampled_energy_and_time_span_the_same_interval_however_late_the_reads(nvml) -> None:
    # Each power read takes 50 ms (a loaded host): the samples that bound the window come after its
    # begin and end calls. Energy and time must still cover one interval: constant 300 W is 300 W.
    nvml.configure([FakeGPU(UUIDS[0], power_w=300.0, energy_counter=False, power_read_s=0.05)])
    with make_meter("nvml_power", nvml=nvml, sample_hz=20) as meter:
        for _ in range(2):  # the first window opens the session (its sample is the opening one); the second does not
            with meter.window() as w:
                busy_wait(0.2)
            m = w.measurement
            assert m.error is None and m.avg_power_w == pytest.approx(300.0, rel=1e-6)


def test_power_meter_rejects_slow_sampling(nvml) -> None:
    with pytest.raises(MeterError, match="sample_hz must be in"):
        NvmlPowerMeter(nvml=nvml, sample_hz=5)


def test_counter_failing_mid_window_reports_error_not_zero(nvml) -> None:
    nvml.configure([FakeGPU(UUIDS[0]), FakeGPU(UUIDS[1], fail_after_reads=2)])  # probe + begin succeed
    with make_meter("nvml", nvml=nvml) as meter:
        with meter.window() as w:
            busy_wait(0.05)
    m = w.measurement
    assert m.energy_j is None and m.avg_power_w is None
    assert "cuda:1" in m.error and "GPU is lost" in m.error


def test_counter_failing_at_window_start_is_reported_at_end(nvml) -> None:
    nvml.configure([FakeGPU(UUIDS[0], fail_after_reads=1)])  # only the probe succeeds
    with make_meter("nvml", nvml=nvml) as meter:
        meter.begin()
        m = meter.end()
    assert m.energy_j is None and m.error.startswith("read failed at window start")


def test_power_sampler_failing_mid_window_reports_error(nvml) -> None:
    nvml.configure([FakeGPU(UUIDS[0], energy_counter=False, fail_after_reads=3)])  # probe, begin, 1 sample
    with make_meter("nvml_power", nvml=nvml, sample_hz=100) as meter:
        with meter.window() as w:
            busy_wait(0.5)
    assert w.measurement.energy_j is None
    assert "mid-window" in w.measurement.error and "GPU is lost" in w.measurement.error


def test_window_shorter_than_counter_update_is_flagged_not_zero(nvml) -> None:
    nvml.configure([FakeGPU(UUIDS[0], counter_period_s=10.0)])  # the counter will not move
    with make_meter("nvml", nvml=nvml) as meter:
        with meter.window() as w:
            pass
    m = w.measurement
    assert m.energy_j is None and "did not advance" in m.error
    assert "shorter than the nvml counter's update period" in m.warning


def test_nvml_missing_is_unavailable_and_auto_cpu_never_tries_it(nvml) -> None:
    nvml.configure([], library_present=False)
    with pytest.raises(MeterError, match=r"meter nvml is not available here.*Library Not Found.*choices: auto"):
        make_meter("nvml", nvml=nvml)
    with pytest.raises(MeterError, match="no GPU energy meter for device cuda.*estimate"):
        make_meter("auto", device="cuda", nvml=nvml)


@pytest.mark.parametrize(
    ("jump_mj", "what"), [(10**12, "jumped 1e+09 J"), (-(10**6), "went back from")], ids=["jump", "back"]
)
def test_a_counter_glitch_fails_the_window_and_the_next_one_is_measured(nvml, jump_mj: int, what: str) -> None:
    gpu = FakeGPU(UUIDS[0], jump_mj=jump_mj)
    nvml.configure([gpu])
    with make_meter("nvml", nvml=nvml) as meter:
        with meter.window() as glitched:
            busy_wait(0.05)
            # every read from the window's end on is off by jump_mj (counted from here, not by reads: a loaded
            # host may re-read the window's start, whose clocks either side lay too far apart)
            gpu.jump_after_reads = gpu.reads
        with meter.window() as after:
            busy_wait(0.3)
    m = glitched.measurement
    assert m.energy_j is None and m.error.startswith(f"nvml: counter of cuda:0 {what}")
    assert after.measurement.ok and after.measurement.avg_power_w == pytest.approx(250.0, rel=0.15)


def test_a_power_sample_past_the_bound_is_a_glitch_not_energy(nvml) -> None:
    nvml.configure([FakeGPU(UUIDS[0], power_w=1e7, energy_counter=False)])  # 10 MW: no GPU draws it
    with make_meter("nvml_power", nvml=nvml) as meter:
        with meter.window() as w:
            busy_wait(0.1)
    m = w.measurement
    assert m.energy_j is None
    assert m.error == (
        "nvml_power: power of cuda:0 read 1e+07 W, outside the device's bound of 0-2000 W: a sample glitch, not energy"
    )


def test_an_unforeseen_library_failure_at_the_probe_is_a_meter_error(nvml, monkeypatch: pytest.MonkeyPatch) -> None:
    def mismatch(handle: object) -> int:
        raise RuntimeError("driver/library version mismatch")

    monkeypatch.setattr(nvml, "nvmlDeviceGetTotalEnergyConsumption", mismatch)
    with pytest.raises(MeterError, match=r"has no energy counter \(RuntimeError: driver/library version mismatch\)"):
        NvmlMeter(nvml=nvml)


def test_trapezoid_rule() -> None:
    assert trapezoid_j([(0.0, 100.0), (1.0, 200.0), (3.0, 200.0)]) == pytest.approx(150.0 + 400.0)
    assert trapezoid_j([(0.0, 5.0)]) == 0.0
