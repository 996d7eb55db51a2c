"""The Lightning callback and ``mlflow_roofline.autolog()`` on real ``Trainer.fit`` jobs in one process
(tiny BERT in a LightningModule, CPU, SQLite store): one run, Lightning's metrics and ours."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator

import lightning.pytorch as pl
import mlflow
import pytest
import torch
from integration_jobs import SEQ_LEN, tiny_bert
from lightning.pytorch.loggers import MLFlowLogger
from lightning_jobs import OPTIONS, TinyBertModule, data, trainer
from mlflow import MlflowClient

import mlflow_roofline
from mlflow_roofline.energy.estimate import EstimateMeter
from mlflow_roofline.integrations import autolog as autolog_module
from mlflow_roofline.integrations.lightning import AutologCallback, RooflineCallback


@pytest.fixture(autouse=True)
def autolog_off() -> Iterator[None]:
    """Every test starts and ends with nothing patched, ours or MLflow's."""
    mlflow_roofline.autolog(disable=True)
    yield
    mlflow_roofline.autolog(disable=True)
    mlflow.pytorch.autolog(disable=True)


def _only_run() -> mlflow.entities.Run:
    client = MlflowClient()
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])  # one in the whole store
    return run


def _assert_ours(run: mlflow.entities.Run, steps: list[int]) -> None:
    """Our energy, params and proxies of a 10-step job (2 warm-up) logged at ``steps``."""
    params, metrics = run.data.params, run.data.metrics
    assert run.data.tags["roofline.source"] == "lightning" and run.data.tags["roofline.run_type"] == "train"
    assert (params["num_layers"], params["hidden_size"], params["num_heads"], params["ffn_size"]) == (
        "2",
        "32",
        "2",
        "64",
    )
    assert (params["seq_len"], params["batch_size"], params["num_steps"]) == (str(SEQ_LEN), "4", "8")
    assert (params["strategy"], params["num_devices"], params["precision"]) == ("single", "1", "fp32")
    assert metrics["energy_j"] > 0 and metrics["proxy_flops"] > 0
    history = MlflowClient().get_metric_history(run.info.run_id, "energy_interval_j")
    assert [m.step for m in history] == steps
    assert sum(m.value for m in history) == pytest.approx(metrics["energy_j"], rel=1e-9)


def test_autolog_beside_mlflow_pytorch_autolog_makes_one_run(tracking_uri: str) -> None:
    mlflow.set_experiment("lit")
    mlflow.pytorch.autolog(log_models=False, checkpoint=False)
    mlflow_roofline.autolog(**OPTIONS)
    job = trainer()
    job.fit(TinyBertModule(), data())
    run = _only_run()
    assert run.info.status == "FINISHED"
    assert "train_loss" in run.data.metrics and run.data.params["optimizer_name"] == "AdamW"  # MLflow's autolog
    _assert_ours(run, [4, 6, 8, 10])
    assert "energy_forecast_j" in run.data.metrics
    assert sum(isinstance(c, AutologCallback) for c in job.callbacks) == 1


def test_autolog_with_lightnings_mlflow_logger_logs_into_the_loggers_run(tracking_uri: str) -> None:
    mlflow_roofline.autolog(**OPTIONS)
    logger = MLFlowLogger("lit-logger", tracking_uri=tracking_uri)
    trainer(logger=logger).fit(TinyBertModule(), data())
    run = _only_run()
    assert run.info.run_id == logger.run_id and run.info.status == "FINISHED"
    assert [m.step for m in MlflowClient().get_metric_history(run.info.run_id, "train_loss")] == [1, 3, 5, 7, 9]
    _assert_ours(run, [4, 6, 8, 10])


def test_autolog_alone_opens_a_run_of_its_own(tracking_uri: str) -> None:
    mlflow_roofline.autolog(**OPTIONS, experiment="lit-own", log_every_n_steps=4)
    trainer().fit(TinyBertModule(), data())
    run = _only_run()
    assert run.info.experiment_id == mlflow.get_experiment_by_name("lit-own").experiment_id
    assert run.info.status == "FINISHED" and "train_loss" not in run.data.metrics
    _assert_ours(run, [4, 6, 8, 10])  # logging every 4 steps, the K-th (4th) measured step and the end


def test_a_hand_added_callback_with_gradient_accumulation(tracking_uri: str) -> None:
    callback = RooflineCallback(**OPTIONS, experiment="lit-hand")
    trainer(callbacks=[callback], accumulate_grad_batches=2, max_steps=-1, max_epochs=1).fit(
        TinyBertModule(), data(rows=80, batch=2)
    )  # 40 micro-batches of 2 rows: 20 optimizer steps of 4 rows, planned from the epoch
    run = _only_run()
    params = run.data.params
    assert (params["batch_size"], params["num_steps"], params["seq_len"]) == ("4", "18", str(SEQ_LEN))
    assert run.data.tags["roofline.source"] == "lightning" and run.info.status == "FINISHED"
    history = MlflowClient().get_metric_history(run.info.run_id, "energy_interval_j")
    assert [m.step for m in history] == [*range(4, 21, 2)]
    forecast = MlflowClient().get_metric_history(run.info.run_id, "energy_forecast_j")
    assert forecast and forecast[-1].step == 20  # the forecast covers the 20 planned steps


def test_autolog_keeps_a_users_callback_and_disable_undoes_the_patch(tracking_uri: str) -> None:
    original_fit = pl.Trainer.fit
    mlflow_roofline.autolog(**OPTIONS)
    assert pl.Trainer.fit is not original_fit
    own = RooflineCallback(**OPTIONS, experiment="lit-hand")
    job = trainer(callbacks=[own], max_steps=3)
    job.fit(TinyBertModule(), data())
    assert [c for c in job.callbacks if isinstance(c, RooflineCallback)] == [own]
    mlflow_roofline.autolog(disable=True)
    assert pl.Trainer.fit is original_fit
    assert not autolog_module.enabled()


def test_a_fit_that_raises_ends_its_own_run_failed_with_the_reason(tracking_uri: str) -> None:
    class Exploding(TinyBertModule):
        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            if batch_idx == 4:
                raise RuntimeError("boom at the fifth batch")
            return super().training_step(batch, batch_idx)

    mlflow_roofline.autolog(**OPTIONS)
    with pytest.raises(RuntimeError, match="boom at the fifth batch"):
        trainer().fit(Exploding(), data())
    run = _only_run()
    assert run.info.status == "FAILED"
    assert run.data.tags["roofline.error"] == "training raised RuntimeError: boom at the fifth batch"


def test_under_autolog_a_meter_that_fails_is_one_warning_and_fit_runs_to_its_end(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def gpu_lost(self: EstimateMeter) -> None:
        raise RuntimeError("NVML: GPU is lost")

    monkeypatch.setattr(EstimateMeter, "begin", gpu_lost)  # the window opens at the 3rd step's batch start
    mlflow_roofline.autolog(**OPTIONS)
    job = trainer()
    with caplog.at_level(logging.WARNING):
        job.fit(TinyBertModule(), data())
    assert job.global_step == 10  # trained to its end
    where, what = "the Lightning callback's on_train_batch_start", "RuntimeError: NVML: GPU is lost"
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mlflow_roofline")]
    assert warnings == [
        f"mlflow_roofline.autolog: measuring this job failed in {where} ({what}); training continues unmeasured"
    ]
    run = _only_run()
    assert run.info.status == "FAILED" and "energy_j" not in run.data.metrics
    assert run.data.tags["roofline.error"] == f"measuring failed in {where} ({what}); training went on unmeasured"


def test_autolog_measures_a_pytorch_lightning_trainer_imported_before_it(tracking_uri: str) -> None:
    import pytorch_lightning  # imported before autolog(): autolog patches its Trainer too

    class OldNameModule(pytorch_lightning.LightningModule):  # the same job under the package's older name
        def __init__(self) -> None:
            super().__init__()
            self.model = tiny_bert()

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            return self.model(**batch).loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    mlflow_roofline.autolog(**OPTIONS, experiment="old-name")
    job = pytorch_lightning.Trainer(
        accelerator="cpu",
        max_steps=10,
        log_every_n_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    job.fit(OldNameModule(), data())
    assert any(isinstance(c, AutologCallback) for c in job.callbacks)
    _assert_ours(_only_run(), [4, 6, 8, 10])


def test_autolog_leaves_lightning_unimported_until_the_job_imports_it() -> None:
    """A Hugging Face job must not pay Lightning's import (seconds); a Lightning job imported later is patched."""
    code = (
        "import sys, mlflow_roofline\n"
        "mlflow_roofline.autolog(silent=True)\n"
        "assert 'lightning.pytorch' not in sys.modules and 'pytorch_lightning' not in sys.modules\n"
        "import lightning.pytorch as pl\n"
        "print(getattr(pl.Trainer.fit, '__wrapped__', None) is not None)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
