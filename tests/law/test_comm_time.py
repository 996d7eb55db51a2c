"""The comm-time speedup law: its volumes follow the strategy and the shape, its constants are
recovered from data it generated, and its physical properties hold for any constants in bounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlflow_roofline.core.proxies import proxy_params_total
from mlflow_roofline.fit.comm_time_fit import OVERLAP_MAX, fit_comm_time
from mlflow_roofline.law.comm_time import COMM_TIME, ParallelJob, comm_time_speedup, comm_volume, step_time
from mlflow_roofline.law.speedup import SpeedupLaw

TRUE = {"p": 0.97, "s_per_element": 4e-11, "latency_s": 2e-5, "overlap": 0.5}


def _jobs(seed: int, count: int = 60) -> pd.DataFrame:
    """Shapes from small to large, N in 2..8, single-device step times from a simple compute model."""
    rng = np.random.default_rng(seed)
    hidden = rng.choice([256, 512, 768, 1024, 1536], size=count)
    frame = pd.DataFrame(
        {
            "num_layers": rng.choice([2, 4, 8, 12, 24], size=count),
            "hidden_size": hidden,
            "ffn_size": 4 * hidden,
            "seq_len": rng.choice([128, 256, 512], size=count),
            "batch_size": rng.choice([8, 16, 32], size=count),
            "num_devices": rng.choice([2, 4, 8], size=count),
        }
    )
    flops = 6.0 * proxy_params_total(frame.num_layers, frame.hidden_size, frame.ffn_size, frame.seq_len)
    frame["t1_step_s"] = flops * frame.batch_size * frame.seq_len / 2e13 + 1e-3
    return frame


def _job(frame: pd.DataFrame) -> ParallelJob:
    return ParallelJob.of(frame, frame["t1_step_s"])


@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "tp"])
def test_constants_are_recovered_from_speedups_the_law_generated(strategy: str) -> None:
    frame = _jobs(seed=1)
    n = frame["num_devices"].to_numpy(dtype=float)
    truth = comm_time_speedup(strategy, n, _job(frame), TRUE)
    noise = np.exp(np.random.default_rng(2).normal(0.0, 0.01, size=len(frame)))
    rows = frame.assign(speedup=truth * noise, t1_per_sample=frame["t1_step_s"] / frame["batch_size"])
    law = fit_comm_time(strategy, rows)
    assert law.form == COMM_TIME and law.n_points == len(frame)
    fitted = np.asarray(law(n, _job(frame)))
    # 1 % noise: the fitted law reproduces the true speedups within 2 % everywhere...
    assert np.max(np.abs(fitted / truth - 1.0)) < 0.02
    # ...and the bandwidth constant, which sets how efficiency falls with the volume, within 25 %.
    assert law.params["s_per_element"] == pytest.approx(TRUE["s_per_element"], rel=0.25)


def test_data_parallel_moves_what_grows_with_the_parameters_tensor_parallel_the_activations() -> None:
    small = ParallelJob.of(
        {"num_layers": 4, "hidden_size": 512, "ffn_size": 2048, "seq_len": 128, "batch_size": 8}, 0.01
    )
    more_batch = ParallelJob.of(
        {"num_layers": 4, "hidden_size": 512, "ffn_size": 2048, "seq_len": 128, "batch_size": 32}, 0.01
    )
    ddp_small, _ = comm_volume("ddp", small)
    ddp_more, _ = comm_volume("ddp", more_batch)
    tp_small, _ = comm_volume("tp", small)
    tp_more, _ = comm_volume("tp", more_batch)
    assert ddp_small == ddp_more == 2 * proxy_params_total(4, 512, 2048, 128)
    assert tp_more == 4 * tp_small
    assert comm_volume("fsdp", small)[0] == pytest.approx(1.5 * ddp_small)


def test_bigger_models_are_more_efficient_under_tensor_parallel_at_the_same_n() -> None:
    """TP moves B*S*d per layer against compute growing with d^2: efficiency rises with width."""
    params = {"p": 1.0, "s_per_element": 5e-11, "latency_s": 1e-5, "overlap": 0.0}
    widths = np.array([256.0, 512.0, 1024.0, 2048.0])
    sizes = {"num_layers": 12, "hidden_size": widths, "ffn_size": 4 * widths, "seq_len": 256, "batch_size": 16}
    t1 = 6.0 * proxy_params_total(12, widths, 4 * widths, 256) * 16 * 256 / 2e13
    eta = comm_time_speedup("tp", np.full(4, 4.0), ParallelJob.of(sizes, t1), params) / 4.0
    assert np.all(np.diff(eta) > 0)


def test_time_never_falls_below_ideal_scaling_for_any_constants_in_bounds() -> None:
    rng = np.random.default_rng(7)
    frame = _jobs(seed=3, count=200)
    job = _job(frame)
    n = frame["num_devices"].to_numpy(dtype=float)
    for _ in range(200):
        params = {
            "p": rng.uniform(0.0, 1.0),
            "s_per_element": 10 ** rng.uniform(-14, -8),
            "latency_s": 10 ** rng.uniform(-8, -3) * rng.integers(0, 2),
            "overlap": rng.uniform(0.0, OVERLAP_MAX),
        }
        for strategy in ("ddp", "fsdp", "tp"):
            t_n = step_time(strategy, n, job, params)
            assert np.all(t_n >= job.single_step_s / n * (1 - 1e-12))
            eta = comm_time_speedup(strategy, n, job, params) / n
            assert np.all(eta <= 1.0 + 1e-12)
            assert np.all(comm_time_speedup(strategy, np.ones(len(n)), job, params) == pytest.approx(1.0))


def test_a_law_called_with_n_alone_answers_for_its_reference_job_and_round_trips() -> None:
    reference = {
        "num_layers": 12.0,
        "hidden_size": 768.0,
        "ffn_size": 3072.0,
        "seq_len": 128.0,
        "batch_size": 32.0,
        "single_step_s": 0.2,
    }
    law = SpeedupLaw("ddp", COMM_TIME, dict(TRUE), 10, 0.01, reference)
    job = ParallelJob.of(reference, reference["single_step_s"])
    n = np.array([2.0, 4.0, 8.0])
    assert np.allclose(law(n), law(n, job))
    again = SpeedupLaw.from_dict(law.to_dict())
    assert again == law and np.allclose(again(n), law(n))


@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "tp"])
def test_the_fit_reaches_the_optimum_of_the_laws_own_speedups(strategy: str) -> None:
    """The solver's residuals (volumes computed once) are the law's log speedups: a fit through the law agrees."""
    from scipy.optimize import least_squares

    from mlflow_roofline.fit.comm_time_fit import STARTS

    frame = _jobs(seed=4)
    n = frame["num_devices"].to_numpy(dtype=float)
    noise = np.exp(np.random.default_rng(5).normal(0.0, 0.03, size=len(frame)))
    speedup = comm_time_speedup(strategy, n, _job(frame), TRUE) * noise
    law = fit_comm_time(strategy, frame.assign(speedup=speedup, t1_per_sample=frame["t1_step_s"] / frame["batch_size"]))

    job = _job(frame)
    volume, hops = comm_volume(strategy, job)
    t1 = float(np.median(job.single_step_s))
    scales = np.array([1.0, t1 / max(float(np.median(volume)), 1.0), t1 / max(float(np.median(hops)), 1.0), 1.0])

    def through_the_law(x: np.ndarray) -> np.ndarray:
        params = dict(zip(("p", "s_per_element", "latency_s", "overlap"), x * scales, strict=True))
        return np.log(comm_time_speedup(strategy, n, job, params) / speedup)

    bounds = ([0.0, 0.0, 0.0, 0.0], [1.0, np.inf, np.inf, OVERLAP_MAX])
    best = min((least_squares(through_the_law, np.array(s), bounds=bounds) for s in STARTS), key=lambda r: r.cost)
    expected = dict(zip(("p", "s_per_element", "latency_s", "overlap"), best.x * scales, strict=True))
    cost = float(np.sum(np.log(np.asarray(law(n, job)) / speedup) ** 2) / 2)
    assert cost == pytest.approx(best.cost, rel=1e-6)
    assert np.asarray(law(n, job)) == pytest.approx(comm_time_speedup(strategy, n, job, expected), rel=1e-4)
