"""DDP, FSDP2 and tensor parallel on 2 real CPU processes (torchrun, gloo) against single.

One torchrun launch runs tests/parallel_checks.py, which trains every strategy and the
single-device reference on the same global batches and records what it sees, and what the
strategy probe reads from each strategy's model; the tests below check the records.

Tolerance: fp32 runs differ from single only by the order of floating-point reductions
(gradient all-reduce / reduce-scatter, row-parallel partial sums), ~1e-7 relative per
op; over 5 AdamW steps that stays below 1e-5 in the loss and the gradient norm (checked
relatively at 1e-4) and below 1e-5 in any weight (the updates themselves are ~1e-4
per step at lr 1e-4, so a wrong shard or a wrong gradient would show as >= 1e-4).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from mlflow_roofline.train.launch import torchrun_command, worker_env

REPO = Path(__file__).resolve().parents[2]
LOSS_TOL = 1e-5
NORM_RTOL = 1e-4
WEIGHT_TOL = 1e-5

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("parallel")
    command = torchrun_command(2, "tests.parallel_checks", [str(out)])
    done = subprocess.run(command, cwd=REPO, env=worker_env(2), capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_two_real_gloo_ranks(records: list[dict]) -> None:
    assert [r["rank"] for r in records] == [0, 1]
    assert all(r["world_size"] == 2 and r["backend"] == "gloo" for r in records)


@pytest.mark.parametrize("name", ["ddp", "fsdp", "tp"])
def test_losses_grad_norms_and_weights_match_single(records: list[dict], name: str) -> None:
    for record in records:
        got = record[name]
        assert got["losses"] == pytest.approx(record["single_losses"], abs=LOSS_TOL)
        assert got["norms"] == pytest.approx(record["single_norms"], rel=NORM_RTOL)
        assert got["max_weight_diff"] < WEIGHT_TOL
    # the reference really moved its weights, far more than the tolerance
    assert records[0]["single_update"] > 20 * WEIGHT_TOL


def test_gradient_clipping_was_active(records: list[dict]) -> None:
    assert min(records[0]["single_norms"]) > records[0]["clip"]


def test_ddp_splits_the_global_batch(records: list[dict]) -> None:
    assert [r["ddp"]["sharding"]["rows"] for r in records] == [[0, 4], [4, 8]]
    assert all(r["ddp"]["sharding"]["wrapper"] == "DistributedDataParallel" for r in records)


def test_fsdp_parameters_are_really_sharded(records: list[dict]) -> None:
    for record in records:
        info = record["fsdp"]["sharding"]
        assert info["all_dtensor_shard0"]
        assert info["local_numel"] * 2 == info["full_numel"]  # every dim 0 here is even
        assert info["fsdp_units"] == 3  # two encoder layers and the root


def test_tp_shards_the_planned_linears_and_splits_the_heads(records: list[dict]) -> None:
    for record in records:
        info = record["tp"]["sharding"]
        assert info["heads"] == 2 and info["all_head_size"] == 32  # h=4, d=64 over 2 ranks
        assert info["unplanned_dtensors"] == []  # embeddings, LayerNorms, pooler stay whole
        assert len(info["planned"]) == 12
        for name, w in info["planned"].items():
            column = name.split(".", 1)[1] in (
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "intermediate.dense",
            )
            dim = 0 if column else 1  # nn.Linear weight is [out, in]
            assert w["placements"] == [f"S({dim})"], name
            assert w["local"][dim] * 2 == w["full"][dim] and w["local"][1 - dim] == w["full"][1 - dim], name


@pytest.mark.parametrize("name", ["fsdp", "tp"])
def test_reduced_precision_runs_on_sharded_parameters(records: list[dict], name: str) -> None:
    for record in records:
        for precision in ("fp16", "bf16"):
            losses = record[name][precision]
            assert len(losses) == 2 and all(math.isfinite(x) for x in losses)


def test_probe_reads_the_strategy_from_the_models_own_types(records: list[dict]) -> None:
    for record in records:
        found = record["probe"]
        for name in ("ddp", "fsdp", "tp"):
            assert found[name] == {"direct": name, "inner_and_seen": name, "num_devices": 2}
        assert found["unwrapped"]["strategy"] is None
        assert found["unwrapped"]["why"] == (
            "2 processes but the model is wrapped by neither DDP, FSDP nor tensor parallel"
        )
