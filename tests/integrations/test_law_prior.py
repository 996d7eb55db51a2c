"""``fit`` on an experiment holding sweep-style runs and Trainer-callback runs uses both; the law it
registers then serves as the callback's forecast prior."""

from __future__ import annotations

from integration_jobs import run_trainer, tiny_bert
from mlflow import MlflowClient

from mlflow_roofline.fit.pipeline import run_fit
from mlflow_roofline.integrations.transformers import RooflineCallback
from mlflow_roofline.testing.synthetic import generate_synthetic_runs, log_runs
from mlflow_roofline.train.device import hardware_name


def test_fit_uses_sweep_and_callback_runs_and_the_law_becomes_the_prior(tracking_uri: str) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("mixed")
    _, frame = generate_synthetic_runs(
        8,
        seed=5,
        hardware=hardware_name("cpu"),
        device="cpu",
        precision="fp32",
        energy_source="estimate",
        strategies=("single", "ddp"),
        device_counts=(2,),
    )
    sweep_ids = log_runs(client, experiment_id, frame)
    callback_ids = []
    for steps in (10, 14):
        callback = RooflineCallback(meter="estimate", warmup_steps=2, forecast_after_steps=4, experiment="mixed")
        run_trainer(tiny_bert(), callback, max_steps=steps, logging_steps=2)
        callback_ids.append(callback.tracker.run.run_id)

    outcome = run_fit(["mixed"], model_name="law", alias="champion", allow_estimate=True, echo=lambda _: None)
    used = set(outcome.run_data.frame["run_id"])
    assert set(callback_ids) <= used and set(sweep_ids) <= used
    assert outcome.run_data.n_found == len(sweep_ids) + 2 and not outcome.run_data.dropped
    fit_runs = client.search_runs([experiment_id], "tags.`roofline.run_type` = 'fit'")
    assert fit_runs and fit_runs[0].data.metrics["n_runs"] == len(sweep_ids) + 2

    callback = RooflineCallback(
        meter="estimate", warmup_steps=2, forecast_after_steps=4, experiment="mixed", model_uri="models:/law@champion"
    )
    run_trainer(tiny_bert(), callback, max_steps=12, logging_steps=2)
    run = client.get_run(callback.tracker.run.run_id)
    assert run.data.tags["roofline.forecast_prior"] == "models:/law@champion (version 1)"
    forecasts = client.get_metric_history(run.info.run_id, "energy_forecast_j")
    assert forecasts and forecasts[0].step == 6
