"""The weak-scaling fleet generator: valid runs of four real GPUs, weak-scaling baselines, physical efficiency."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.gpu_datasheets import load_hardware_table
from mlflow_roofline.core.schema import (
    BASELINE_MEASURED,
    BASELINE_PER_DEVICE,
    M_AVG_POWER_W,
    M_ENERGY_J,
    M_TIME_S,
    PARAM_NAMES,
)
from mlflow_roofline.fit.hardware_fit import baseline_counts, fit_hardware
from mlflow_roofline.fit.runs.measured_speedup import measure_speedup
from mlflow_roofline.testing.roofline_generator import generate_roofline_runs
from mlflow_roofline.testing.weak_fleet import (
    FLEET_NAMES,
    EncoderShape,
    FleetGpu,
    fleet_gpu,
    generate_weak_fleet_runs,
    step_cost,
)

ENERGY_NOISE_BOUND = 1.15
"""Average watts per device may exceed the board power only by the energy and time noise (3 % and 2 % sd)."""


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return generate_weak_fleet_runs(12, seed=3)


def _eta(gpu: FleetGpu, shape: EncoderShape, strategy: str, devices: int, per_device_batch: int) -> float:
    """Noise-free efficiency S/N of a run, its batch split as the generator splits it (weak ddp/fsdp)."""
    batch = per_device_batch * devices if strategy in ("ddp", "fsdp") else per_device_batch
    single = step_cost(gpu, shape, "single", 1, per_device_batch).seconds / per_device_batch
    parallel = step_cost(gpu, shape, strategy, devices, batch).seconds / batch
    return single / parallel / devices


def test_rows_have_the_roofline_generator_columns_and_valid_configs(frame: pd.DataFrame) -> None:
    assert list(frame.columns) == list(generate_roofline_runs(2, device_counts=(2,)).columns)
    for row in frame[list(PARAM_NAMES)].to_dict("records"):
        TrainConfig.from_mapping(row).validate()
    assert set(frame["strategy"]) == {"single", "ddp", "fsdp", "tp"}
    assert set(frame.loc[frame["strategy"] != "single", "num_devices"]) == {2, 4, 8}
    assert frame.groupby("hardware")["workload_index"].nunique().eq(12).all()


def test_hardware_names_resolve_in_the_table_and_give_its_figures(frame: pd.DataFrame) -> None:
    table = load_hardware_table(env={})
    assert set(frame["hardware"]) == set(FLEET_NAMES)
    for name in FLEET_NAMES:
        spec = table.lookup(name)
        assert spec is not None and spec.name == name
        gpu = fleet_gpu(name, table)
        assert (gpu.peak_flops, gpu.mem_bandwidth, gpu.board_power_w, gpu.link_bandwidth) == (
            spec.fp16_tensor_flops,
            spec.mem_bandwidth_bytes_per_s,
            spec.board_power_w,
            spec.interconnect_bytes_per_s,
        )
    with pytest.raises(ValueError, match="no row 'Imaginary GPU'"):
        fleet_gpu("Imaginary GPU", table)


def test_ddp_and_fsdp_runs_have_a_single_run_only_at_their_per_device_batch(frame: pd.DataFrame) -> None:
    singles = frame[frame["strategy"] == "single"]
    weak = frame[frame["strategy"].isin(["ddp", "fsdp"])]
    assert not weak["workload_hash"].isin(singles["workload_hash"]).any()
    shape = ["hardware", "num_layers", "hidden_size", "num_heads", "ffn_size", "seq_len"]
    single_keys = set(map(tuple, singles[[*shape, "batch_size"]].to_numpy().tolist()))
    per_device = weak.assign(batch_size=weak["batch_size"] // weak["num_devices"])
    assert set(map(tuple, per_device[[*shape, "batch_size"]].to_numpy().tolist())) <= single_keys
    kinds = measure_speedup(frame).set_index(frame.index)["baseline"]
    assert (kinds[weak.index] == BASELINE_PER_DEVICE).all()
    assert (kinds[frame.index[frame["strategy"] == "tp"]] == BASELINE_MEASURED).all()  # tp keeps the global batch


def test_energy_and_time_are_positive_and_finite_and_power_stays_near_the_board_cap(frame: pd.DataFrame) -> None:
    for column in (M_ENERGY_J, M_TIME_S):
        values = frame[column].to_numpy(dtype=float)
        assert np.isfinite(values).all() and (values > 0).all()
    board = frame["hardware"].map(lambda name: fleet_gpu(name).board_power_w)
    per_device = frame[M_AVG_POWER_W] / frame["num_devices"]
    assert (per_device <= ENERGY_NOISE_BOUND * board).all()
    assert (per_device >= 0.1 * board).all()  # at least the idle fifth, less the noise


@pytest.mark.parametrize("name", FLEET_NAMES)
def test_tensor_parallel_efficiency_falls_as_the_width_shrinks_against_its_activation_traffic(name: str) -> None:
    gpu = fleet_gpu(name)
    etas = [_eta(gpu, EncoderShape(12, d, d // 64, 4 * d, 128), "tp", 4, 16) for d in (512, 1024, 2048)]
    assert etas[0] < etas[1] < etas[2] < 1.0


@pytest.mark.parametrize("name", FLEET_NAMES)
def test_data_parallel_efficiency_falls_as_the_compute_per_device_shrinks_against_the_gradients(name: str) -> None:
    gpu = fleet_gpu(name)
    shape = EncoderShape(12, 768, 12, 3072, 128)
    for strategy in ("ddp", "fsdp"):
        etas = [_eta(gpu, shape, strategy, 8, b) for b in (2, 8, 32)]
        assert etas[0] < etas[1] < etas[2]
    assert _eta(gpu, shape, "ddp", 8, 8) < 1.0  # weak ddp does the single run's work plus the all-reduce


def test_a_faster_link_raises_the_efficiency() -> None:
    t4 = fleet_gpu("T4")
    shape = EncoderShape(12, 768, 12, 3072, 128)
    fast = dataclasses.replace(t4, link_bandwidth=8 * t4.link_bandwidth)
    for strategy in ("ddp", "fsdp", "tp"):
        assert _eta(t4, shape, strategy, 4, 8) < _eta(fast, shape, strategy, 4, 8)


def test_data_parallel_comm_grows_with_the_parameters_and_tensor_parallel_comm_with_the_activations() -> None:
    a100 = fleet_gpu("A100 SXM4 80GB")
    shape = EncoderShape(6, 1024, 16, 4096, 128)
    deep = dataclasses.replace(shape, num_layers=24)
    ratio = deep.params() / shape.params()
    for strategy in ("ddp", "fsdp"):
        grown = step_cost(a100, deep, strategy, 8, 64).comm_s / step_cost(a100, shape, strategy, 8, 64).comm_s
        assert 0.7 * ratio < grown < 1.3 * ratio
        assert step_cost(a100, shape, strategy, 8, 256).comm_s == step_cost(a100, shape, strategy, 8, 64).comm_s
    tp = [step_cost(a100, shape, "tp", 8, batch).comm_s for batch in (8, 16, 64)]
    assert tp[1] > tp[0] and tp[2] - tp[0] == pytest.approx(7 * (tp[1] - tp[0]))  # a latency plus B*S*d bytes


def test_achieved_flops_rise_with_the_matrix_width_and_a_bigger_gpu_needs_wider_matrices() -> None:
    t4, h100 = fleet_gpu("T4"), fleet_gpu("H100 SXM")
    for gpu in (t4, h100):
        assert gpu.mfu(256, 4096) < gpu.mfu(1024, 4096) < gpu.mfu(4096, 4096) < gpu.mfu_max
    assert h100.mfu(256, 4096) < t4.mfu(256, 4096)


def test_the_embeddings_count_in_the_parameters_and_the_flops() -> None:
    shape = EncoderShape(2, 256, 4, 1024, 128)
    assert shape.embedding_params() > 30522 * 256
    assert shape.params() > shape.embedding_params() + 2 * shape.layer_params()
    assert shape.train_flops(8) > 6 * shape.params() * 8 * 128


def test_the_fit_keeps_every_run_of_a_gpu(frame: pd.DataFrame) -> None:
    rows = frame[frame["hardware"] == "T4"]
    fit = fit_hardware(rows.copy(), "T4")
    assert len(fit.frame) == len(rows) and not fit.dropped
    counts = baseline_counts(fit.frame)
    assert counts[BASELINE_PER_DEVICE] == int(rows["strategy"].isin(["ddp", "fsdp"]).sum())
