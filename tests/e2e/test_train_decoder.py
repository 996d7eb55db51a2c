"""`mlflow run . -e train` of a GPT-2 decoder with LoRA and checkpointing, ddp on 2 CPU processes.

One run through the MLproject entry point, the CLI under it and torchrun (gloo): the params
beyond the paper's reach the job, the proxies beside the paper's are logged, the hashes are
the configuration's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from support.cli_args import mlflow_run_train

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import proxy_metrics
from mlflow_roofline.core.schema import (
    KIND_PARAM_NAMES,
    M_FINAL_LOSS,
    M_FLOPS_COUNTED,
    M_PROXY_FLOPS_HEAD,
    M_PROXY_OPT_TRAFFIC,
    M_PROXY_PARAMS_TOTAL,
    M_PROXY_PARAMS_TRAINABLE,
    M_TIME_S,
    TAG_CONFIG_HASH,
    TAG_HARDWARE,
    TAG_WORKLOAD_HASH,
)
from mlflow_roofline.train.flop_count import count_step_flops

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = "decoder-e2e"
PARAMS = {
    "num_layers": 2,
    "hidden_size": 32,
    "num_heads": 2,
    "ffn_size": 128,
    "seq_len": 16,
    "batch_size": 4,
    "num_steps": 2,
    "warmup_steps": 1,
    "strategy": "ddp",
    "num_devices": 2,
    "device": "cpu",
    "arch": "decoder",
    "vocab_size": 1000,
    "peft": "lora",
    "lora_rank": 4,
    "grad_checkpointing": "true",
}

pytestmark = pytest.mark.slow


def test_a_lora_decoder_ddp_run_through_the_mlproject(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    client.create_experiment(EXPERIMENT, artifact_location=(tmp_path / "artifacts").as_uri())
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(MLFLOW_TRACKING_URI=uri, OMP_NUM_THREADS="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        mlflow_run_train(EXPERIMENT, PARAMS), cwd=REPO, env=env, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    [run] = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    config = TrainConfig.from_mapping({k: str(v) for k, v in PARAMS.items()})
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "ddp-x2-L2-d32-h2-ff128-S16-B4-decoder-V1000-lora4-ckpt"
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    assert {k: params[k] for k in KIND_PARAM_NAMES} == {
        "arch": "decoder",
        "vocab_size": "1000",
        "peft": "lora",
        "lora_rank": "4",
        "grad_checkpointing": "true",
    }
    assert tags[TAG_CONFIG_HASH] == config.config_hash(tags[TAG_HARDWARE])
    assert tags[TAG_WORKLOAD_HASH] == config.workload_hash(tags[TAG_HARDWARE])
    expected = proxy_metrics(config)
    for name in (M_PROXY_FLOPS_HEAD, M_PROXY_PARAMS_TOTAL, M_PROXY_PARAMS_TRAINABLE, M_PROXY_OPT_TRAFFIC):
        assert metrics[name] == expected[name]
    assert metrics[M_PROXY_FLOPS_HEAD] == 32 * 1000 * 4 * 16 * 2
    assert metrics[M_PROXY_PARAMS_TRAINABLE] < 0.2 * metrics[M_PROXY_PARAMS_TOTAL]
    assert metrics[M_FLOPS_COUNTED] == count_step_flops(config) * 2
    assert metrics[M_TIME_S] > 0
    assert 5.0 < metrics[M_FINAL_LOSS] < 8.0  # next-token loss near ln 1000 = 6.9 after two small steps
