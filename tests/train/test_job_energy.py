"""A job rank's meters: warm-up and train windows, RAPL beside the GPU meter, the NVML cross-check.

The GPU is the faithful NVML fake, RAPL a fake powercap tree: neither exists here.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fakes import fake_pynvml
from fakes.fake_pynvml import FakeGPU
from fakes.fake_rapl import set_uj, zone
from mlflow import MlflowClient

from mlflow_roofline.energy.timeline import downsample, sum_aligned
from mlflow_roofline.fit.runs import run_data
from mlflow_roofline.testing.synthetic import generate_synthetic_runs, log_runs
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.train.job_energy import (
    JOB,
    TRAIN,
    WARMUP,
    JobMeters,
    RankWindows,
    combine,
)

UUIDS = [
    "GPU-00000000-0000-0000-0000-000000000001",
    "GPU-00000000-0000-0000-0000-000000000002",
]


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake_pynvml.configure([FakeGPU(u, power_w=200.0, counter_period_s=0.01) for u in UUIDS])
    return fake_pynvml


@pytest.fixture
def powercap(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "powercap"
    return {
        "root": root,
        "package": zone(root, "intel-rapl:0", "package-0", 1000, max_uj=10**12),
        "dram": zone(root, "intel-rapl:0:0", "dram", 1000, max_uj=10**12),
    }


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run_rank(meters: JobMeters, powercap: dict[str, Path] | None = None, warmup: bool = True) -> RankWindows:
    """The job's window sequence; the fake RAPL counters move by 30 J (package) and 5 J (DRAM) in training."""
    try:
        meters.begin(JOB)
        if warmup:
            meters.begin(WARMUP)
        busy_wait(0.15)
        if warmup:
            meters.end(WARMUP)
        outer_t0 = time.perf_counter()
        meters.begin(TRAIN)
        busy_wait(0.3)
        if powercap is not None:
            set_uj(powercap["package"], 1000 + 30_000_000)
            set_uj(powercap["dram"], 1000 + 5_000_000)
        train = meters.end(TRAIN)
        outer_s = time.perf_counter() - outer_t0
        meters.end(JOB)
        windows = meters.finish() if meters.reads else None
    finally:
        meters.close()
    meters.train = train  # for the test's own checks
    # The counter is read just before the window's clock starts and just after it stops, so the
    # energy covers at least time_s and at most outer_s (the reads included); on a loaded
    # machine a read can wait for the CPU, and the two differ.
    meters.train_outer_s = outer_s
    return windows


def train_bounds(meters: JobMeters, power_w: float, period_s: float = 0.01) -> tuple[float, float]:
    """The least and most energy (J) a constant ``power_w`` counter can show over the train window."""
    return power_w * (meters.train.time_s - period_s), power_w * (meters.train_outer_s + period_s)


def test_gpu_meter_with_rapl_and_cross_check(nvml, powercap) -> None:
    meters = JobMeters("nvml", "cuda", [0], 0, nvml=nvml, rapl_root=str(powercap["root"]))
    windows = run_rank(meters, powercap)
    gpu_j = meters.train.energy_j
    low, high = train_bounds(meters, 200.0)
    assert low <= gpu_j <= high
    assert gpu_j == pytest.approx(200.0 * meters.train.time_s, rel=0.1 + meters.train_outer_s / meters.train.time_s - 1)
    assert windows.warmup_j == pytest.approx(200.0 * 0.15, rel=0.2) and windows.warmup_error is None
    assert (windows.cpu_j, windows.dram_j) == (pytest.approx(30.0), pytest.approx(5.0))
    slack = meters.train_outer_s / meters.train.time_s - 1  # 0 on a quiet machine
    assert windows.check_source == "nvml_power" and windows.check_j == pytest.approx(gpu_j, rel=0.1 + slack)
    assert windows.window_end == pytest.approx(windows.window_start + meters.train.time_s)  # Unix seconds
    assert windows.window_start == pytest.approx(time.time(), abs=60)
    extras = combine([(0, windows)], gpu_j, "device")
    assert extras.energy_node_j == pytest.approx(gpu_j + 35.0)
    assert extras.energy_cpu_j == pytest.approx(30.0) and extras.energy_dram_j == pytest.approx(5.0)
    assert extras.node_error is None
    assert extras.meter_disagreement == pytest.approx(abs(windows.check_j - gpu_j) / gpu_j)
    assert extras.meter_disagreement < 0.1 + slack
    assert extras.meter_check.startswith("nvml_power: ")
    assert extras.warmup_energy_j == windows.warmup_j
    assert len(extras.power_timeline) >= 3  # the counter read every 0.1 s over ~0.45 s


def test_only_local_rank_0_reads_the_node_and_every_gpu_is_summed(nvml, powercap) -> None:
    rank0 = run_rank(
        JobMeters("nvml", "cuda", [0], 0, nvml=nvml, rapl_root=str(powercap["root"])),
        powercap,
    )
    fake_pynvml.configure([FakeGPU(u, power_w=100.0, counter_period_s=0.01) for u in UUIDS])
    other = JobMeters("nvml", "cuda", [1], 1, nvml=nvml, rapl_root=str(powercap["root"]))
    assert other.node is None
    rank1 = run_rank(other)
    assert not rank1.node_read and rank1.cpu_j is None and rank1.node_error is None
    extras = combine([(0, rank0), (1, rank1)], 1000.0, "device")
    assert extras.energy_node_j == pytest.approx(1000.0 + 35.0)
    assert extras.warmup_energy_j == pytest.approx(rank0.warmup_j + rank1.warmup_j)


def test_unreadable_rapl_is_said_not_zero(nvml, tmp_path: Path) -> None:
    meters = JobMeters("nvml", "cuda", [0], 0, nvml=nvml, rapl_root=str(tmp_path / "nowhere"))
    windows = run_rank(meters)
    assert windows.cpu_j is None and "rapl: no powercap interface" in windows.node_error
    extras = combine([(0, windows)], meters.train.energy_j, "device")
    assert extras.energy_node_j is None and extras.energy_cpu_j is None
    assert "no powercap interface" in extras.node_error


def test_cpu_without_dram_zone_leaves_dram_out_and_says_so(nvml, tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    package = zone(root, "intel-rapl:0", "package-0", 1000, max_uj=10**12)
    windows = run_rank(
        JobMeters("nvml", "cuda", [0], 0, nvml=nvml, rapl_root=str(root)),
        {"package": package, "dram": tmp_path},
    )
    extras = combine([(0, windows)], 100.0, "device")
    assert extras.energy_dram_j is None and "no DRAM zone" in extras.node_error
    assert extras.energy_node_j == pytest.approx(100.0 + 30.0)


def test_power_meter_cross_checked_by_the_counter_when_it_exists(nvml) -> None:
    meters = JobMeters("nvml_power", "cuda", [0], 0, nvml=nvml, rapl_root="/nonexistent")
    windows = run_rank(meters)
    slack = meters.train_outer_s / meters.train.time_s - 1  # 0 on a quiet machine
    assert windows.check_source == "nvml" and windows.check_j == pytest.approx(meters.train.energy_j, rel=0.1 + slack)
    fake_pynvml.configure([FakeGPU(UUIDS[0], power_w=150.0, energy_counter=False)])
    windows = run_rank(JobMeters("nvml_power", "cuda", [0], 0, nvml=nvml, rapl_root="/nonexistent"))
    assert windows.check_j is None and "no energy counter" in windows.check_error
    extras = combine([(0, windows)], 50.0, "device")
    assert extras.meter_disagreement is None and "no energy counter" in extras.meter_check


def test_rapl_main_meter_splits_cpu_and_dram_and_is_the_node(powercap) -> None:
    windows = run_rank(JobMeters("rapl", "cpu", None, 0, rapl_root=str(powercap["root"])), powercap)
    assert windows.check_source is None and windows.node_read
    extras = combine([(0, windows)], 35.0, "node")
    assert (extras.energy_cpu_j, extras.energy_dram_j, extras.energy_node_j) == (
        pytest.approx(30.0),
        pytest.approx(5.0),
        pytest.approx(35.0),
    )
    assert extras.meter_check is None and extras.meter_disagreement is None


def test_estimate_says_the_node_is_not_measured_and_no_warmup_means_none() -> None:
    windows = run_rank(JobMeters("estimate", "cpu", None, 0), warmup=False)
    extras = combine([(0, windows)], 3.0, "process")
    assert extras.energy_node_j is None and "not measured" in extras.node_error
    assert extras.warmup_energy_j is None and extras.warmup_error is None


def test_a_failed_warmup_reading_is_an_error_not_a_zero(nvml) -> None:
    windows = RankWindows(warmup_j=None, warmup_error="GPU is lost")
    extras = combine([(0, windows), (1, RankWindows(warmup_j=3.0))], 10.0, "device")
    assert extras.warmup_energy_j is None and extras.warmup_error == "rank 0: GPU is lost"


def test_downsample_keeps_the_mean_power_and_sum_aligned_adds_ranks() -> None:
    points = [(float(t), float(t % 7)) for t in range(10_000)]
    thinned = downsample(points, 100)
    assert len(thinned) == 100 and thinned[-1][0] == points[-1][0]
    assert sum(w for _, w in thinned) / 100 == pytest.approx(sum(w for _, w in points) / len(points), rel=1e-3)
    assert downsample(points[:5], 100) == points[:5]
    summed = sum_aligned([(0.0, 100.0), (1.0, 100.0), (2.0, 100.0)], [[(0.5, 50.0), (1.5, 70.0)]])
    assert summed == [(0.0, 150.0), (1.0, 160.0), (2.0, 170.0)]


def test_fit_reads_node_energy_when_asked(tracking_uri: str) -> None:
    client = MlflowClient(tracking_uri)
    experiment_id = client.create_experiment("roofline-bert")
    _, frame = generate_synthetic_runs(2, seed=0, strategies=("single",))
    ids = log_runs(client, experiment_id, frame)
    assert len(ids) >= 3
    node_j = {}
    for run_id, gpu_j in zip(ids[:-1], frame["energy_j"]):
        node_j[run_id] = 1.5 * float(gpu_j)  # the node draws more than its accelerators
        client.log_metric(run_id, "energy_node_j", node_j[run_id])
    gpu = run_data.load_train_runs(TrackingClient(client.tracking_uri), ["roofline-bert"])
    node = run_data.load_train_runs(
        TrackingClient(client.tracking_uri), ["roofline-bert"], energy_metric="energy_node_j"
    )
    assert sorted(gpu.frame["energy_j"]) == sorted(frame["energy_j"])
    assert sorted(node.frame["energy_j"]) == pytest.approx(sorted(node_j.values()))
    assert node.dropped == {"without metric energy_node_j": 1}
