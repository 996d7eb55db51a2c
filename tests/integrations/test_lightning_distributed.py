"""Lightning jobs on two CPU processes (gloo) that Lightning itself launches: one run, and what ran.

Rank 0 is forked from one warm Python for the module (:mod:`support.warm_jobs`, Lightning, torch,
transformers and MLflow imported once), its own process all the same; Lightning starts rank 1 from
it as it would from any script: a fresh ``python tests/lightning_jobs.py``.

The world size is asserted twice: from inside ``fit`` on each rank (``torch.distributed``, what
the job writes) and in the run (``num_devices``, which our callback reads, never the launcher's
``devices=2``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient
from support.warm_jobs import WarmJobs

REPO = Path(__file__).resolve().parents[2]
PRELOAD = ("lightning_jobs", "transformers.models.bert.modeling_bert", "mlflow", "mlflow_roofline")
"""What the server imports: the jobs' own imports (Lightning's trainer, the tiny BERT, MLflow, ours)."""


@pytest.fixture(scope="module")
def jobs() -> Iterator[WarmJobs]:
    """The module's warm server: each job's rank 0 is forked from it."""
    warm = WarmJobs(REPO / "tests" / "lightning_jobs.py", PRELOAD)
    yield warm
    warm.close()


def _launch(jobs: WarmJobs, kind: str, tmp_path: Path) -> list[dict]:
    """Run ``tests/lightning_jobs.py kind``; Lightning starts the second process. Each rank's view of what ran."""
    out = tmp_path / "ranks"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}", "OMP_NUM_THREADS": "1"}
    done = jobs.run(kind, str(out), stderr=tmp_path / "stderr", timeout=500, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]


def _only_run():  # type: ignore[no-untyped-def]
    client = MlflowClient()
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])  # one in the whole store
    assert run.info.status == "FINISHED"
    return run


def _assert_two_rank_ddp(run, ranks: list[dict]) -> None:  # type: ignore[no-untyped-def]
    assert [(r["world_size"], r["rank"], r["backend"]) for r in ranks] == [(2, 0, "gloo"), (2, 1, "gloo")]
    assert {r["wrapper"] for r in ranks} == {"DistributedDataParallel"}
    params, metrics = run.data.params, run.data.metrics
    assert (params["strategy"], params["num_devices"]) == ("ddp", "2")
    assert params["batch_size"] == "8" and params["num_steps"] == "6"  # 4 rows x 2 processes; 8 steps, 2 warm-up
    assert metrics["energy_j"] == pytest.approx(metrics["energy_j_rank_0"] + metrics["energy_j_rank_1"], rel=1e-9)
    assert metrics["energy_j_rank_1"] > 0 and run.data.tags["roofline.source"] == "lightning"


@pytest.mark.slow
def test_ddp_beside_mlflow_pytorch_autolog_makes_one_run(tracking_uri: str, tmp_path: Path, jobs: WarmJobs) -> None:
    ranks = _launch(jobs, "ddp", tmp_path)
    run = _only_run()
    _assert_two_rank_ddp(run, ranks)
    assert "train_loss" in run.data.metrics and run.data.params["optimizer_name"] == "AdamW"  # MLflow's autolog


@pytest.mark.slow
def test_ddp_with_lightnings_mlflow_logger_makes_one_run(tracking_uri: str, tmp_path: Path, jobs: WarmJobs) -> None:
    ranks = _launch(jobs, "ddp-logger", tmp_path)
    run = _only_run()
    _assert_two_rank_ddp(run, ranks)
    assert "train_loss" in run.data.metrics  # Lightning's own logging, in the same run


@pytest.mark.slow
def test_fsdp2_under_lightnings_model_parallel_strategy_is_recorded_as_fsdp(
    tracking_uri: str, tmp_path: Path, jobs: WarmJobs
) -> None:
    # Lightning refuses strategy="fsdp" without a GPU; FSDP2 (fully_shard in configure_model) runs on gloo.
    ranks = _launch(jobs, "fsdp2", tmp_path)
    assert [(r["world_size"], r["rank"], r["backend"]) for r in ranks] == [(2, 0, "gloo"), (2, 1, "gloo")]
    assert all(r["fsdp2_modules"] == 3 for r in ranks)  # two encoder layers and the model, sharded
    run = _only_run()
    params, metrics = run.data.params, run.data.metrics
    assert (params["strategy"], params["num_devices"], params["batch_size"]) == ("fsdp", "2", "8")
    assert metrics["energy_j"] == pytest.approx(metrics["energy_j_rank_0"] + metrics["energy_j_rank_1"], rel=1e-9)
