"""``mlflow_roofline.autolog()`` on real jobs: a Trainer reporting to MLflow and a hand-written Accelerate loop
(tiny BERT from a config, CPU, SQLite store)."""

from __future__ import annotations

from collections.abc import Iterator

import mlflow
import pytest
import torch
from accelerate import Accelerator
from integration_jobs import SEQ_LEN, TokenData, run_trainer, tiny_bert
from mlflow import MlflowClient
from transformers import Trainer, TrainingArguments

import mlflow_roofline
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.integrations import autolog as autolog_module
from mlflow_roofline.integrations.transformers import RooflineCallback

OPTIONS = {"meter": "estimate", "warmup_steps": 2, "forecast_after_steps": 4}


@pytest.fixture(autouse=True)
def autolog_off() -> Iterator[None]:
    """Every test starts and ends with nothing patched."""
    mlflow_roofline.autolog(disable=True)
    yield
    mlflow_roofline.autolog(disable=True)


def _roofline_callbacks(trainer: Trainer) -> list[RooflineCallback]:
    return [c for c in trainer.callback_handler.callbacks if isinstance(c, RooflineCallback)]


def _trainer(**kwargs: object) -> Trainer:
    args = TrainingArguments("out", max_steps=1, report_to=[], use_cpu=True, disable_tqdm=True)
    return Trainer(model=tiny_bert(), args=args, train_dataset=TokenData(8), **kwargs)


def test_a_trainer_reporting_to_mlflow_makes_one_run_with_hfs_loss_and_our_energy(tracking_uri: str) -> None:
    mlflow.set_experiment("autologged")
    mlflow_roofline.autolog(**OPTIONS)
    run_trainer(tiny_bert(), None, max_steps=10, logging_steps=2, report_to=["mlflow"])
    every_experiment = [e.experiment_id for e in MlflowClient().search_experiments()]
    (run,) = MlflowClient().search_runs(every_experiment)  # one run in the whole store, not one each
    assert run.info.experiment_id == mlflow.get_experiment_by_name("autologged").experiment_id
    metrics, params, tags = run.data.metrics, run.data.params, run.data.tags
    assert run.info.status == "FINISHED"
    assert "loss" in metrics and params["learning_rate"] == "5e-05"  # HF's MLflowCallback
    assert metrics["energy_j"] > 0 and tags["roofline.source"] == "trainer"  # ours, in the same run
    assert metrics["system/cpu_energy_wh"] == pytest.approx(metrics["energy_j"] / 3600, rel=1e-9)  # System tab
    assert (params["num_layers"], params["hidden_size"], params["seq_len"]) == ("2", "32", str(SEQ_LEN))
    forecast = MlflowClient().get_metric_history(run.info.run_id, "energy_forecast_j")
    assert [m.step for m in forecast] == [6, 8, 10]


def test_autolog_is_idempotent_keeps_a_users_callback_and_disable_undoes_it(tracking_uri: str) -> None:
    original_init, original_train = Trainer.__init__, Trainer.train
    original_prepare = Accelerator.prepare
    mlflow_roofline.autolog(**OPTIONS)
    mlflow_roofline.autolog(**OPTIONS, log_every_n_steps=5)  # again: the options change, the patch stays one
    ours = [p for p in autolog_module._patches if p.owner in (Trainer, Accelerator)]
    assert len(ours) == 5 and autolog_module.enabled()
    (added,) = _roofline_callbacks(_trainer())
    assert added.log_every_n_steps == 5 and added.options.meter == "estimate"
    own = RooflineCallback(meter="estimate")
    assert _roofline_callbacks(_trainer(callbacks=[own])) == [own]
    mlflow_roofline.autolog(disable=True)
    assert Trainer.__init__ is original_init and Trainer.train is original_train
    assert Accelerator.prepare is original_prepare
    assert not autolog_module.enabled() and _roofline_callbacks(_trainer()) == []


def test_a_hand_written_accelerate_loop_is_measured_until_end_training(tracking_uri: str) -> None:
    mlflow_roofline.autolog(log_every_n_steps=2, forecast=False, experiment="loops", **OPTIONS)
    accelerator = Accelerator(cpu=True)
    model = tiny_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(TokenData(40), batch_size=4)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    for batch in data:  # 10 optimizer steps
        accelerator.backward(model(**batch).loss)
        optimizer.step()
        optimizer.zero_grad()
    accelerator.end_training()
    (run,) = MlflowClient().search_runs([mlflow.get_experiment_by_name("loops").experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["roofline.source"] == "accelerate"
    assert (run.data.params["batch_size"], run.data.params["num_steps"]) == ("4", "8")
    history = MlflowClient().get_metric_history(run.info.run_id, "energy_interval_j")
    assert [m.step for m in history] == [4, 6, 8, 10]
    assert sum(m.value for m in history) == pytest.approx(run.data.metrics["energy_j"], rel=1e-9)
    assert "energy_forecast_j" not in run.data.metrics  # forecast=False


def test_bad_options_are_refused_before_any_job() -> None:
    with pytest.raises(ConfigError, match="log_every_n_steps: must be an integer number of optimizer steps from 1 to"):
        mlflow_roofline.autolog(log_every_n_steps=0)
    with pytest.raises(ConfigError, match="energy_budget_kwh: needs the forecast"):
        mlflow_roofline.autolog(forecast=False, budget_kwh=1.0)
    with pytest.raises(ConfigError, match="meter: must be one of"):
        mlflow_roofline.autolog(meter="joulemeter")
    assert not autolog_module.enabled()
