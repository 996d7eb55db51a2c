"""The Accelerate hook in one process: optimizer steps counted at gradient sync, the run it logs."""

from __future__ import annotations

import logging

import pytest
import torch
from accelerate import Accelerator
from integration_jobs import SEQ_LEN, TokenData, tiny_bert
from mlflow import MlflowClient

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.integrations.accelerate import track_training


def test_a_loop_with_gradient_accumulation_is_a_train_run(tracking_uri: str) -> None:
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
    model = tiny_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(TokenData(96), batch_size=3)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    with track_training(
        accelerator, model, total_steps=16, logging_steps=2, meter="estimate", warmup_steps=2, forecast_after_steps=4
    ) as tracker:
        for batch in data:  # 32 micro-batches: 16 optimizer steps
            with accelerator.accumulate(model):
                accelerator.backward(model(**batch).loss)
                optimizer.step()
                optimizer.zero_grad()
            tracker.step()
    assert tracker.global_step == 16
    run = MlflowClient().get_run(tracker.tracker.run.run_id)
    params = run.data.params
    assert (params["batch_size"], params["num_steps"], params["seq_len"]) == ("6", "14", str(SEQ_LEN))
    assert (params["strategy"], params["num_devices"], params["precision"]) == ("single", "1", "fp32")
    assert run.data.tags["roofline.source"] == "accelerate" and run.info.status == "FINISHED"
    history = MlflowClient().get_metric_history(run.info.run_id, "energy_interval_j")
    assert [m.step for m in history] == list(range(4, 17, 2))
    assert sum(m.value for m in history) == pytest.approx(run.data.metrics["energy_j"], rel=1e-9)
    assert "energy_forecast_j" in run.data.metrics


def test_a_failed_loop_ends_its_run_failed(tracking_uri: str) -> None:
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(tiny_bert())
    with (
        pytest.raises(RuntimeError, match="boom"),
        track_training(accelerator, model, total_steps=5, meter="estimate") as tracker,
    ):
        raise RuntimeError("boom")
    assert MlflowClient().get_run(tracker.tracker.run.run_id).info.status == "FAILED"


def test_a_budget_needs_the_planned_steps() -> None:
    with (
        pytest.raises(ConfigError, match="total_steps: is needed with energy_budget_kwh"),
        track_training(None, None, energy_budget_kwh=1.0),
    ):
        pass


def test_a_loop_past_total_steps_gets_one_warning_and_is_measured_to_its_end(tracking_uri: str, caplog) -> None:
    accelerator = Accelerator(cpu=True)
    model = tiny_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(TokenData(40), batch_size=4)  # 10 steps
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    with (
        caplog.at_level(logging.WARNING, logger="mlflow_roofline"),
        track_training(
            accelerator, model, total_steps=6, logging_steps=2, meter="estimate", warmup_steps=2, forecast_after_steps=2
        ) as tracker,
    ):
        for batch in data:
            accelerator.backward(model(**batch).loss)
            optimizer.step()
            optimizer.zero_grad()
            tracker.step()
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mlflow_roofline")]
    assert warnings == [
        "roofline: step 7 runs past the 6 planned steps; measuring on "
        "(the forecast and the budget cover the planned steps)"
    ]
    run = MlflowClient().get_run(tracker.tracker.run.run_id)
    assert run.data.params["num_steps"] == "8"  # steps 3..10: every step after warm-up
    history = MlflowClient().get_metric_history(run.info.run_id, "energy_interval_j")
    assert [m.step for m in history] == [4, 6, 8, 10]
    assert sum(m.value for m in history) == pytest.approx(run.data.metrics["energy_j"], rel=1e-9)


def test_ctrl_c_in_the_loop_ends_its_run_killed_with_the_reason(tracking_uri: str) -> None:
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(tiny_bert())
    with (
        pytest.raises(KeyboardInterrupt),
        track_training(accelerator, model, total_steps=5, meter="estimate") as tracker,
    ):
        raise KeyboardInterrupt
    run = MlflowClient().get_run(tracker.tracker.run.run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags["roofline.error"] == "interrupted: KeyboardInterrupt (Ctrl-C) before training ended"


def test_the_measurement_asks_the_device_kind_which_devices_to_meter_and_waits_on_them(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device kind is one entry of the registry: the measurement takes its meter's device indices and the wait
    at each window edge from it (here the CPU kind's entry, wrapped to count), not from CUDA's API by name."""
    import dataclasses

    from mlflow_roofline.energy import devices

    calls = {"indices": 0, "synchronize": 0}
    cpu = devices.DEVICE_KINDS["cpu"]

    def indices() -> list[int] | None:
        calls["indices"] += 1
        return cpu.current_indices()

    def synchronize() -> None:
        calls["synchronize"] += 1

    counted = dataclasses.replace(cpu, current_indices=indices, synchronize=synchronize)
    monkeypatch.setitem(devices.DEVICE_KINDS, "cpu", counted)
    accelerator = Accelerator(cpu=True)
    model = tiny_bert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = accelerator.prepare(torch.utils.data.DataLoader(TokenData(8), batch_size=2))
    model, optimizer = accelerator.prepare(model, optimizer)
    with track_training(accelerator, model, total_steps=4, meter="estimate", warmup_steps=1, forecast=False) as tracker:
        for batch in data:
            accelerator.backward(model(**batch).loss)
            optimizer.step()
            optimizer.zero_grad()
            tracker.step()
    assert calls["indices"] == 1 and calls["synchronize"] >= 2  # the warm-up's window and the measured one
    assert MlflowClient().get_run(tracker.tracker.run.run_id).info.status == "FINISHED"
