"""The two generators of other physics (throttled tiles, overlap and drift): the physics each must keep."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.core.schema import M_AVG_POWER_W, M_ENERGY_J
from mlflow_roofline.fit.runs.feature_frame import feature_frame
from mlflow_roofline.testing.overlap_drift import OverlapGpu, generate_overlap_drift_runs, overlap_gpu
from mlflow_roofline.testing.physics_runs import device_work
from mlflow_roofline.testing.throttled_tiles import ThrottledGpu, generate_throttled_runs, throttled_gpu
from mlflow_roofline.testing.weak_fleet import FLEET_NAMES, EncoderShape

GENERATORS = {"throttled_tiles": generate_throttled_runs, "overlap_drift": generate_overlap_drift_runs}
MACHINES = {"throttled_tiles": throttled_gpu, "overlap_drift": overlap_gpu}
SHAPES = [EncoderShape(L, d, d // 64, 4 * d, s) for L, d, s in ((2, 256, 128), (12, 768, 256), (24, 2048, 512))]


@pytest.fixture(scope="module", params=sorted(GENERATORS))
def quiet(request: pytest.FixtureRequest) -> tuple[str, pd.DataFrame]:
    """Noise-free runs of mixed kinds on the four GPUs."""
    return request.param, GENERATORS[request.param](8, kinds=True, noise_scale=0.0, seed=5)


@pytest.mark.parametrize("name", sorted(MACHINES))
@pytest.mark.parametrize("gpu", FLEET_NAMES)
def test_more_devices_under_ddp_never_cost_less_per_sample_than_one(name: str, gpu: str) -> None:
    machine = MACHINES[name](gpu)
    for shape in SHAPES:
        for per_device in (8, 32):
            seconds, watts = machine.step(device_work(shape, "single", 1, per_device), shape.num_layers)
            alone = watts * seconds / per_device
            for n in (2, 4, 8):
                s_n, w_n = machine.step(device_work(shape, "ddp", n, per_device * n), shape.num_layers)
                assert n * w_n * s_n / (per_device * n) >= alone * (1 - 1e-12)


def test_the_runs_are_valid_and_power_stays_between_idle_and_board(quiet: tuple[str, pd.DataFrame]) -> None:
    name, frame = quiet
    assert {"encoder", "decoder"} <= set(frame["arch"]) and frame["grad_checkpointing"].dtype == bool
    for hw, rows in frame.groupby("hardware"):
        machine = MACHINES[name](next(g for g in FLEET_NAMES if MACHINES[name](g).name == hw))
        per_device = (rows[M_AVG_POWER_W] / rows["num_devices"]).to_numpy()
        assert np.all(per_device <= machine.board_power_w * (1 + 1e-9))
        assert np.all(per_device >= machine.idle_fraction * machine.board_power_w * (1 - 1e-9))
    features = feature_frame(frame)
    assert np.isfinite(features[["log_E", "log_C_all", "log_M_all", "log_eta"]].to_numpy()).all()


def test_energy_grows_with_steps_linearly(quiet: tuple[str, pd.DataFrame]) -> None:
    _, frame = quiet
    singles = frame[frame["strategy"] == "single"]
    per_step = (singles[M_ENERGY_J] / singles["num_steps"]).groupby([singles["hardware"], singles["workload_index"]])
    assert (singles.groupby(["hardware", "workload_index"])["num_steps"].nunique() > 1).any()  # steps differ
    np.testing.assert_allclose(per_step.max() / per_step.min(), 1.0, rtol=1e-9)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_with_noise_energy_per_step_of_repeats_agrees_within_the_noise(name: str) -> None:
    frame = GENERATORS[name](10, gpus=("A100 SXM4 80GB",), seed=2)
    singles = frame[frame["strategy"] == "single"]
    per_step = np.log(singles[M_ENERGY_J] / singles["num_steps"]).groupby(singles["workload_index"])
    spread = (per_step.max() - per_step.min()).to_numpy()
    assert 0.0 < np.median(spread) < 0.15 and spread.max() < 0.8


def test_throttled_tiles_quantise_and_throttle() -> None:
    gpu: ThrottledGpu = throttled_gpu("A100 SXM4 80GB")
    full_wave = gpu.n_sm * 128.0  # rows filling one wave of 128-wide tiles
    assert gpu.achieved_flops(128.0, full_wave) > 1.9 * gpu.achieved_flops(128.0, full_wave + 128.0)  # a second wave
    assert gpu.achieved_flops(192.0, full_wave) == pytest.approx(0.75 * gpu.achieved_flops(256.0, full_wave))
    frame = generate_throttled_runs(8, gpus=("V100 SXM2",), noise_scale=0.0, seed=1)
    power = (frame[M_AVG_POWER_W] / frame["num_devices"]).to_numpy()
    cap = gpu.cap_fraction * throttled_gpu("V100 SXM2").board_power_w
    assert np.isclose(power, cap).any() and np.all(power <= cap * (1 + 1e-9))  # capped, never above


def test_overlap_drift_hides_communication_and_draws_power_sub_linearly() -> None:
    gpu: OverlapGpu = overlap_gpu("A100 SXM4 80GB")
    shape = SHAPES[2]
    single_s, _ = gpu.step(device_work(shape, "single", 1, 32), shape.num_layers)
    ddp_s, _ = gpu.step(device_work(shape, "ddp", 2, 64), shape.num_layers)
    assert ddp_s == pytest.approx(single_s, rel=1e-9)  # the all-reduce hides behind the step
    idle = gpu.idle_fraction * gpu.board_power_w
    half = idle + (gpu.board_power_w - idle) * 0.5**0.6
    assert half > (idle + gpu.board_power_w) / 2  # half the use draws more than half the dynamic watts
    _, energy_noise = gpu.noise(np.random.default_rng(0), np.repeat(np.arange(50), 4))
    drift = np.log(energy_noise)
    assert np.corrcoef(drift[:-1], drift[1:])[0, 1] > 0.5  # successive runs drift together
