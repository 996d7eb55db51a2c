"""The safety net of ``mlflow_roofline.autolog()``: a failure of ours (the meter, the tracking store) is one
warning and the user's job trains on unmeasured, its run never left RUNNING; the user's own exceptions reach
the user unchanged. Real Trainer and Accelerate jobs (tiny BERT from a config, CPU), a real SQLite store;
the failures are injected at our seams (the meter's window, our run-logging call)."""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from accelerate import Accelerator
from accelerate.data_loader import DataLoaderShard
from accelerate.optimizer import AcceleratedOptimizer
from integration_jobs import TokenData, tiny_bert
from mlflow import MlflowClient
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from support.guard_ranks import guard_in_a_job_of_two_processes
from transformers import Trainer, TrainingArguments
from transformers.trainer_utils import TrainOutput

import mlflow_roofline
from mlflow_roofline.core.schema import TAG_ENERGY_ERROR, TAG_ERROR
from mlflow_roofline.energy.estimate import EstimateMeter
from mlflow_roofline.integrations.run_log import RunLog
from mlflow_roofline.integrations.safety import JobGuard
from mlflow_roofline.integrations.transformers import AutologCallback, RooflineCallback

OPTIONS = {"meter": "estimate", "warmup_steps": 2, "forecast_after_steps": 4}
GPU_LOST = "RuntimeError: NVML: GPU is lost"
STORE_LOST = "MlflowException: (sqlite3.OperationalError) disk I/O error"


@pytest.fixture(autouse=True)
def autolog_off() -> Iterator[None]:
    """Every test starts and ends with nothing patched."""
    mlflow_roofline.autolog(disable=True)
    yield
    mlflow_roofline.autolog(disable=True)


def _gpu_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The meter's window cannot open: the device is gone."""

    def begin(self: EstimateMeter) -> None:
        raise RuntimeError("NVML: GPU is lost")

    monkeypatch.setattr(EstimateMeter, "begin", begin)


def _store_lost_after_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our run-logging call raises as a broken SQLite store does, from the first history point on
    (the start tags, at step 0, still go in)."""
    log = RunLog.log

    def broken(self: RunLog, step: int, metrics: Any = None, tags: Any = None) -> None:
        if step > 0:
            raise MlflowException("(sqlite3.OperationalError) disk I/O error")
        log(self, step, metrics, tags)

    monkeypatch.setattr(RunLog, "log", broken)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every warning this package logged."""
    return [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("mlflow_roofline")
    ]


def _expected_warning(where: str, what: str) -> str:
    return f"mlflow_roofline.autolog: measuring this job failed in {where} ({what}); training continues unmeasured"


def _only_run() -> Run:
    """The one run in the whole store."""
    every_experiment = [e.experiment_id for e in MlflowClient().search_experiments()]
    (run,) = MlflowClient().search_runs(every_experiment)
    return run


def _args(**kwargs: Any) -> TrainingArguments:
    return TrainingArguments(
        "trainer-out",
        max_steps=6,
        per_device_train_batch_size=4,
        logging_steps=2,
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        **{"report_to": [], **kwargs},
    )


def test_a_trainer_job_whose_meter_fails_trains_to_its_end_and_its_run_ends_failed(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _gpu_lost(monkeypatch)  # the window opens at the first measured step's on_step_begin
    mlflow_roofline.autolog(**OPTIONS)
    trainer = Trainer(model=tiny_bert(), args=_args(), train_dataset=TokenData(40))
    with caplog.at_level(logging.WARNING):
        output = trainer.train()
    assert isinstance(output, TrainOutput) and output.global_step == 6 and output.training_loss > 0
    where = "the Trainer callback's on_step_begin"
    assert _warnings(caplog) == [_expected_warning(where, GPU_LOST)]
    run = _only_run()
    assert run.info.status == "FAILED" and run.data.tags["roofline.source"] == "trainer"
    assert run.data.tags[TAG_ERROR] == f"measuring failed in {where} ({GPU_LOST}); training went on unmeasured"
    assert "energy_j" not in run.data.metrics


def test_a_store_that_breaks_mid_job_leaves_the_trainer_and_mlflows_run_to_their_end(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _store_lost_after_start(monkeypatch)  # the first history point is at step 4
    mlflow_roofline.autolog(**OPTIONS)
    trainer = Trainer(model=tiny_bert(), args=_args(report_to=["mlflow"]), train_dataset=TokenData(40))
    with caplog.at_level(logging.WARNING):
        output = trainer.train()
    assert isinstance(output, TrainOutput) and output.global_step == 6
    where = "the Trainer callback's on_step_end"
    assert _warnings(caplog) == [_expected_warning(where, STORE_LOST)]
    run = _only_run()  # MLflowCallback's, which ours joined: its owner ends it
    assert run.info.status == "FINISHED" and "loss" in run.data.metrics
    assert run.data.tags["roofline.source"] == "trainer"  # the start tags went in before the store broke
    assert run.data.tags[TAG_ENERGY_ERROR] == f"measuring failed in {where} ({STORE_LOST}); training went on unmeasured"


def test_the_users_own_exception_in_train_reaches_the_user_unchanged(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    model = tiny_bert()
    forward = model.forward
    calls = 0

    @functools.wraps(forward)
    def users_forward(*args: Any, **kwargs: Any) -> Any:
        """The user's model: raises at its 4th batch (step 4), after our meter failed opening step 3's window."""
        nonlocal calls
        calls += 1
        if calls == 4:
            raise ValueError("the user's own bug in forward")
        return forward(*args, **kwargs)

    model.forward = users_forward
    _gpu_lost(monkeypatch)
    mlflow_roofline.autolog(**OPTIONS)
    trainer = Trainer(model=model, args=_args(), train_dataset=TokenData(40))
    with caplog.at_level(logging.WARNING), pytest.raises(ValueError, match="^the user's own bug in forward$"):
        trainer.train()
    assert trainer.state.global_step == 3
    assert _warnings(caplog) == [_expected_warning("the Trainer callback's on_step_begin", GPU_LOST)]
    assert _only_run().info.status == "FAILED"  # abandoned at step 3, not left RUNNING for the exit hook


@pytest.mark.parametrize(
    ("warmup_steps", "where"),
    [(0, "Accelerator.prepare"), (2, "optimizer.step")],  # the window opens in prepare, or after 2 steps
)
def test_an_accelerate_loop_whose_meter_fails_runs_to_its_end(
    warmup_steps: int,
    where: str,
    tracking_uri: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _gpu_lost(monkeypatch)
    mlflow_roofline.autolog(**{**OPTIONS, "warmup_steps": warmup_steps}, log_every_n_steps=2, experiment="loops")
    accelerator = Accelerator(cpu=True)
    model = tiny_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(TokenData(40), batch_size=4)
    with caplog.at_level(logging.WARNING):
        prepared_model, prepared_optimizer, prepared_data = accelerator.prepare(model, optimizer, data)
        assert prepared_model is model  # one CPU process: the model itself
        assert isinstance(prepared_optimizer, AcceleratedOptimizer) and prepared_optimizer.optimizer is optimizer
        assert isinstance(prepared_data, DataLoaderShard)
        steps = 0
        for batch in prepared_data:
            accelerator.backward(prepared_model(**batch).loss)
            prepared_optimizer.step()
            prepared_optimizer.zero_grad()
            steps += 1
        accelerator.end_training()
    assert steps == 10 and not accelerator.check_trigger()
    assert _warnings(caplog) == [_expected_warning(where, GPU_LOST)]
    run = _only_run()
    assert run.info.status == "FAILED" and run.data.tags["roofline.source"] == "accelerate"
    assert run.data.tags[TAG_ERROR] == f"measuring failed in {where} ({GPU_LOST}); training went on unmeasured"


def test_a_store_that_breaks_at_the_end_of_a_loop_leaves_end_training_to_run(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: RunLog, params: Any) -> None:
        raise MlflowException("(sqlite3.OperationalError) disk I/O error")

    monkeypatch.setattr(RunLog, "log_params", broken)  # the summary's first write
    mlflow_roofline.autolog(**OPTIONS, log_every_n_steps=2)
    accelerator = Accelerator(cpu=True)
    model = tiny_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(TokenData(40), batch_size=4)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    for batch in data:
        accelerator.backward(model(**batch).loss)
        optimizer.step()
        optimizer.zero_grad()
    with caplog.at_level(logging.WARNING):
        accelerator.end_training()
    assert _warnings(caplog) == [_expected_warning("Accelerator.end_training", STORE_LOST)]
    run = _only_run()
    assert run.info.status == "FAILED"
    assert run.data.tags[TAG_ERROR] == f"logging the end of training failed ({STORE_LOST})"
    history = MlflowClient().get_metric_history(run.info.run_id, "energy_j")
    assert [m.step for m in history] == [4, 6, 8, 10]  # what was measured before is kept


def test_the_users_own_exception_in_a_patched_call_reaches_the_user_unchanged(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    class UsersOptimizer(torch.optim.AdamW):
        """The user's optimizer: its 3rd step raises (inside the ``step`` autolog wrapped)."""

        calls = 0

        def step(self, closure: Any = None) -> Any:
            type(self).calls += 1
            if type(self).calls == 3:
                raise ValueError("the user's own bug in step")
            return super().step(closure)

    _gpu_lost(monkeypatch)  # our measurement fails in prepare (no warm-up): the user's step is still theirs
    mlflow_roofline.autolog(**{**OPTIONS, "warmup_steps": 0})
    accelerator = Accelerator(cpu=True)
    model = tiny_bert()
    data = torch.utils.data.DataLoader(TokenData(40), batch_size=4)
    with caplog.at_level(logging.WARNING):
        model, optimizer, data = accelerator.prepare(model, UsersOptimizer(model.parameters(), lr=1e-4), data)
        with pytest.raises(ValueError, match="^the user's own bug in step$"):
            for batch in data:
                accelerator.backward(model(**batch).loss)
                optimizer.step()
                optimizer.zero_grad()
    assert UsersOptimizer.calls == 3
    assert _warnings(caplog) == [_expected_warning("Accelerator.prepare", GPU_LOST)]
    assert _only_run().info.status == "FAILED"


def test_every_hook_of_the_callback_runs_guarded_under_autolog() -> None:
    """A hook added to RooflineCallback without a guarded twin in AutologCallback would raise into train()."""
    hooks = {name for name in vars(RooflineCallback) if name.startswith("on_") or name == "_batch_hook"}
    assert hooks == {"on_train_begin", "on_step_begin", "on_step_end", "on_train_end", "_batch_hook"}
    assert all(vars(AutologCallback)[name] is not vars(RooflineCallback)[name] for name in hooks)


def test_a_guard_reports_its_first_failure_once_and_lets_interrupts_through(caplog: pytest.LogCaptureFixture) -> None:
    abandoned: list[str] = []
    guard = JobGuard(abandoned.append)

    def fails() -> None:
        raise OSError("the meter's file is gone")

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        guard.run("a step", interrupted)
    with pytest.raises(SystemExit):
        guard.run("a step", sys.exit, 3)
    assert not guard.failed  # neither is a failure of ours
    assert guard.run("a step", lambda: 7) == 7
    with caplog.at_level(logging.WARNING):
        assert guard.run("reading the meter", fails) is None
        assert guard.run("reading the meter", lambda: 7) is None  # the job is abandoned: ours no longer runs
    assert _warnings(caplog) == [_expected_warning("reading the meter", "OSError: the meter's file is gone")]
    assert abandoned == [
        "measuring failed in reading the meter (OSError: the meter's file is gone); training went on unmeasured"
    ]


def test_with_several_processes_a_failure_of_ours_is_raised_after_its_one_warning(tmp_path: Path) -> None:
    """Abandoning on one rank alone would leave the others waiting for it at the next gather of samples."""
    torch.multiprocessing.spawn(guard_in_a_job_of_two_processes, args=(str(tmp_path),), nprocs=2)
    for rank in (0, 1):
        assert json.loads((tmp_path / f"rank{rank}.json").read_text()) == {
            "outcome": "raised NVML: GPU is lost",
            "warnings": [_expected_warning("a step", GPU_LOST)],
            "abandoned": [],
        }
