"""`mlflow run . -e train --env-manager local`, one process and two, against a temp SQLite store.

One module-scoped fixture launches two runs at once: ``single``, and ``ddp`` on N=2 torchrun
ranks with its batch size passed as a float (as a sweep of floats passes it); the tests check the
runs they logged against the docs/schema.md schema and the closed-form proxies. What the project's
entry point adds (MLflow's parameter passing, the run it opened, the fresh torchrun launch) does
not depend on the strategy; each strategy's own work is checked where it is: every strategy's
two-rank run, its fields, per-rank readings and loss beside single's in tests/e2e/test_sweep_warm.py,
and the sharding and numerics of ddp, fsdp and tp under torchrun in tests/train/test_parallel.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from support.cli_args import mlflow_run_train
from support.store_template import copy_store

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import (
    KIND_PARAM_NAMES,
    M_AVG_POWER_W,
    M_ENERGY_J,
    M_FINAL_LOSS,
    M_FLOPS_COUNTED,
    M_PROXY_FLOPS,
    M_PROXY_FLOPS_PER_TOKEN,
    M_PROXY_MEM_TRAFFIC,
    M_PROXY_PARAMS,
    M_SAMPLES_PER_S,
    M_STEP_TIME_S,
    M_TIME_S,
    PARAM_NAMES,
    TAG_CONFIG_HASH,
    TAG_DEVICE,
    TAG_ENERGY_SOURCE,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
    TAG_WORKLOAD_HASH,
)
from mlflow_roofline.train.device import hardware_name

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = "train-e2e"
SHAPE = {"num_layers": 2, "hidden_size": 32, "num_heads": 2, "ffn_size": 64, "seq_len": 16, "batch_size": 4}
STEPS, WARMUP = 3, 1
STRATEGIES = {"single": 1, "ddp": 2}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> dict[str, mlflow.entities.Run]:
    tmp = tmp_path_factory.mktemp("train_e2e")
    copy_store(store_template, tmp / "mlflow.db")
    # The runs write concurrently: give SQLite's lock waits room on a loaded machine.
    uri = f"sqlite:///{tmp / 'mlflow.db'}?timeout=60"
    client = MlflowClient(uri)
    client.create_experiment(EXPERIMENT, artifact_location=(tmp / "artifacts").as_uri())
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(MLFLOW_TRACKING_URI=uri, OMP_NUM_THREADS="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    launched = {}
    for strategy, n in STRATEGIES.items():  # all at once: their imports and launches overlap
        params = {**SHAPE, "num_steps": STEPS, "warmup_steps": WARMUP, "strategy": strategy, "num_devices": n}
        if strategy == "ddp":
            params["batch_size"] = f"{SHAPE['batch_size']}.0"  # as a sweep of floats would pass it
        command = mlflow_run_train(EXPERIMENT, params)
        log = (tmp / f"{strategy}.log").open("w")
        launched[strategy] = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    for strategy, process in launched.items():
        returncode = process.wait(timeout=400)
        assert returncode == 0, f"{strategy}:\n{(tmp / f'{strategy}.log').read_text()[-5000:]}"
    experiment_id = client.get_experiment_by_name(EXPERIMENT).experiment_id
    found = {r.data.params["strategy"]: r for r in client.search_runs([experiment_id])}
    assert sorted(found) == sorted(STRATEGIES)
    for run in found.values():
        assert run.info.artifact_uri.startswith((tmp / "artifacts").as_uri())
    return found


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_finished_run_with_every_schema_field(runs: dict, strategy: str) -> None:
    run = runs[strategy]
    n = STRATEGIES[strategy]
    config = TrainConfig.from_mapping(
        {**SHAPE, "num_steps": STEPS, "warmup_steps": WARMUP, "strategy": strategy, "num_devices": n, "device": "cpu"}
    )
    assert run.info.status == "FINISHED"
    assert run.info.run_name == config.run_name
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    assert set(PARAM_NAMES) <= set(params)
    expected = {**config.to_params(), "device": "auto"}  # the entry point's default, as MLflow logged it
    if strategy == "ddp":
        expected["batch_size"] = "4.0"
    assert {k: params[k] for k in PARAM_NAMES} == {k: expected[k] for k in PARAM_NAMES}
    # the params beyond the paper's, as the entry point's defaults: the encoder, V and rank left to auto
    assert {k: params[k] for k in KIND_PARAM_NAMES} == {
        "arch": "encoder",
        "vocab_size": "auto",
        "peft": "none",
        "lora_rank": "auto",
        "grad_checkpointing": "false",
    }
    hardware = hardware_name("cpu")
    assert tags[TAG_RUN_TYPE] == "train" and tags[TAG_DEVICE] == "cpu" and tags[TAG_HARDWARE] == hardware
    assert tags["roofline.source"] == "train"
    assert tags[TAG_CONFIG_HASH] == config.config_hash(hardware)
    assert tags[TAG_WORKLOAD_HASH] == config.workload_hash(hardware)
    assert tags[TAG_ENERGY_SOURCE] in ("rapl", "estimate")

    L, d, ff, S, B = 2, 32, 64, 16, 4
    assert metrics[M_PROXY_PARAMS] == L * (12 * d**2 + 2 * d * ff)
    assert metrics[M_PROXY_FLOPS_PER_TOKEN] == 12 * L * d**2 + 3 * L * S * d
    assert metrics[M_PROXY_FLOPS] == (12 * L * d**2 + 3 * L * S * d) * B * S * STEPS
    assert metrics[M_PROXY_MEM_TRAFFIC] == B * S * d * L * STEPS
    per_step = 3 * (B * S * L * (8 * d * d + 4 * d * ff + 4 * S * d) + B * (2 * d * d + 2 * d * 2))
    assert metrics[M_FLOPS_COUNTED] == per_step * STEPS

    assert metrics[M_TIME_S] > 0 and 0 < metrics[M_STEP_TIME_S] <= metrics[M_TIME_S]
    assert metrics[M_SAMPLES_PER_S] == pytest.approx(B * STEPS / metrics[M_TIME_S])
    assert metrics[M_ENERGY_J] > 0
    assert metrics[M_AVG_POWER_W] == pytest.approx(metrics[M_ENERGY_J] / metrics[M_TIME_S])
    assert 0.3 < metrics[M_FINAL_LOSS] < 1.2  # binary cross-entropy near ln 2 at the start
    ranks = sorted(k for k in metrics if k.startswith("energy_j_rank_"))
    if tags[TAG_ENERGY_SOURCE] == "estimate":  # one reading per process, summed
        assert ranks == [f"energy_j_rank_{i}" for i in range(n)]
        assert metrics[M_ENERGY_J] == pytest.approx(sum(metrics[k] for k in ranks))
    assert sorted(k for k in metrics if k.startswith("time_s_rank_")) == [f"time_s_rank_{i}" for i in range(n)]


def test_strategies_train_the_same_model(runs: dict) -> None:
    # Same seed, same global batches: every strategy ends on the single-device loss.
    single = runs["single"].data.metrics[M_FINAL_LOSS]
    assert runs["ddp"].data.metrics[M_FINAL_LOSS] == pytest.approx(single, abs=1e-5)
    # and the runs of one workload share its hash, whatever the strategy
    assert len({r.data.tags[TAG_WORKLOAD_HASH] for r in runs.values()}) == 1
    assert len({r.data.tags[TAG_CONFIG_HASH] for r in runs.values()}) == len(STRATEGIES)
