"""The fit job on runs logged from a known law into a real SQLite store, through the CLI.

Tolerances (synthetic runs: 5 % energy noise, 2 % time noise, sd 0.15 per-workload
jitter of the speedup, 25 workloads, ~170 runs): alpha_c and alpha_m within 0.05,
alpha_eta within 0.15; the registered model predicts the true energy of new workloads
(with eta from its fitted speedup law) within 12 % on every row and 6 % in the median,
and within 5 % on every row when given the measured speedup.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient
from support.law_inputs import law_query

from mlflow_roofline.cli import main
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.core.schema import TAG_NOTE, TAG_RUN_TYPE
from mlflow_roofline.fit.fit_runs import distinct_hardware_alias
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.fit.pipeline import run_fit
from mlflow_roofline.fit.runs.run_data import load_train_runs
from mlflow_roofline.testing.synthetic import generate_synthetic_runs, log_runs, log_synthetic_runs
from mlflow_roofline.tracking.client import TrackingClient

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fit_runs(client: MlflowClient) -> list:
    return client.search_runs([e.experiment_id for e in client.search_experiments()], f"tags.`{TAG_RUN_TYPE}` = 'fit'")


def test_fit_recovers_the_law_logs_it_and_serves_it(tracking_uri: str, capsys) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")
    logged = log_synthetic_runs(client, experiment_id, 25, seed=21)
    truth = logged.truth
    assert logged.frame.groupby("workload_hash")["num_steps"].nunique().max() > 1  # steps differ in a workload

    main(["fit", "--experiment", "roofline-bert", "--model-name", "energy-law", "--alias", "best"])
    out, err = capsys.readouterr()
    assert "Downloading artifacts" not in err  # MLflow's progress bars stay off (quiet console, unless --verbose)
    assert f"{len(logged.frame)} finished train runs found, {len(logged.frame)} usable" in out
    assert "registered energy-law version 1 as @best" in out

    (fit_run,) = _fit_runs(client)
    m = fit_run.data.metrics
    assert m["n_runs"] == len(logged.frame)
    assert m["alpha_c"] == pytest.approx(truth.alpha_c, abs=0.05)
    assert m["alpha_m"] == pytest.approx(truth.alpha_m, abs=0.05)
    assert m["alpha_eta"] == pytest.approx(truth.alpha_eta, abs=0.15)
    assert m["adj_r2"] > m["adj_r2_baseline"]
    assert m["rmse_log"] < m["rmse_log_baseline"] and m["rmse_reduction"] > 0
    assert m["log_kappa"] == pytest.approx(truth.log_kappa, abs=1.0)
    assert 0 < m["cv_mape"] < 10
    # alpha_c + alpha_m = 1 in the truth: the per-work form is as good with one coefficient less, and it ties
    # with the paper's forms: their average is registered, its members named in the run's description.
    assert fit_run.data.params["form"] == fit_run.data.tags["roofline.form"] == "averaged"
    registered = next(line for line in fit_run.data.tags[TAG_NOTE].splitlines() if "Registered form:" in line)
    assert "`paper_per_work`" in registered and "`paper`" in registered
    artifacts = {f.path for f in client.list_artifacts(fit_run.info.run_id)}
    assert {"coefficients.csv", "summaries", "plots", "fitted_law.json", "fit_report.txt"} <= artifacts
    plots = {f.path for f in client.list_artifacts(fit_run.info.run_id, "plots")}
    assert plots == {
        f"plots/{n}.png" for n in ("measured_vs_predicted", "residuals", "speedup_vs_n", "energy_vs_n", "extrapolation")
    }
    table = pd.read_csv(
        mlflow.artifacts.download_artifacts(run_id=fit_run.info.run_id, artifact_path="coefficients.csv")
    )
    row = table[(table["form"] == "paper") & (table["term"] == "log_eta")].iloc[0]
    assert row["ci95_lower"] < row["estimate"] < row["ci95_upper"] and row["std_error_hc3"] > 0

    version = client.get_model_version_by_alias("energy-law", "best")
    assert version.tags["roofline.fit_run_id"] == fit_run.info.run_id
    assert float(version.tags["roofline.cv_mape"]) == pytest.approx(m["cv_mape"], rel=1e-3)
    # the logged model carries every metric of its fit run (MLflow's model page shows them)
    (output,) = fit_run.outputs.model_outputs
    model_metrics = {metric.key: metric.value for metric in client.get_logged_model(output.model_id).metrics}
    assert model_metrics == m

    # New workloads (another seed), predicted from the registry against the noise-free truth.
    _, fresh = generate_synthetic_runs(15, seed=99)
    model = mlflow.pyfunc.load_model("models:/energy-law@best")
    pred = model.predict(law_query(fresh))
    law_eta = np.array([truth.speedup_laws[s](n) / n for s, n in zip(fresh["strategy"], fresh["num_devices"])])
    expected = truth.energy_j(fresh["log_C"], fresh["log_M"], np.log(law_eta), fresh["strategy"])
    error = np.abs(pred["energy_j"].to_numpy() / expected - 1.0)
    assert np.median(error) < 0.06 and error.max() < 0.12
    inside = (pred["energy_j_lower"] <= expected) & (expected <= pred["energy_j_upper"])
    assert inside.mean() > 0.9
    with_speedup = model.predict(law_query(fresh).assign(speedup=fresh["speedup"]))
    measured_expected = truth.energy_j(fresh["log_C"], fresh["log_M"], np.log(fresh["eta"]), fresh["strategy"])
    assert np.abs(with_speedup["energy_j"].to_numpy() / measured_expected - 1.0).max() < 0.05


def test_estimate_energy_is_refused_then_allowed(tracking_uri: str, capsys) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")
    log_synthetic_runs(
        client, experiment_id, 6, energy_source="estimate", seed=3, strategies=("single", "ddp"), device_counts=(2,)
    )
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--experiment", "roofline-bert"])
    assert exit_info.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if " INFO " not in line]  # mlflow's store logs
    assert len(lines) == 1 and lines[0].startswith("Error: allow_estimate: all ")
    assert "carry estimated energy" in lines[0] and "--allow-estimate true" in lines[0]
    with pytest.raises(SystemExit):
        main(["fit", "--allow-estimate", "perhaps"])
    assert "allow_estimate: must be true or false, got 'perhaps'" in capsys.readouterr().err
    bad = client.create_experiment("bad-energy")
    _, broken = generate_synthetic_runs(2, seed=4, strategies=("single",))
    broken["energy_j"] = [np.nan, -1.0] * (len(broken) // 2) + [0.0] * (len(broken) % 2)
    log_runs(client, bad, broken)
    with pytest.raises(SystemExit):
        main(["fit", "--experiment", "bad-energy"])
    lines = [line for line in capsys.readouterr().err.splitlines() if " INFO " not in line]
    assert lines == [
        f"Error: runs: no usable train runs: {len(broken)} finished train runs found, 0 usable; "
        f"dropped {len(broken)}: {len(broken)} with NaN or non-positive energy_j; fix or rerun those runs"
    ]
    main(["fit", "--allow-estimate", "--no-register"])  # the bare flag means true
    (fit_run,) = _fit_runs(client)
    assert fit_run.data.tags["roofline.energy_source"] == "estimate"
    assert client.search_registered_models() == []


def test_several_hardware_get_one_law_each(tracking_uri: str) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")
    big = log_synthetic_runs(
        client, experiment_id, 8, hardware="GPU A", seed=1, strategies=("single", "ddp"), device_counts=(2, 4)
    )
    log_synthetic_runs(
        client, experiment_id, 5, hardware="GPU B", seed=2, strategies=("single", "ddp"), device_counts=(2, 4)
    )
    log_synthetic_runs(
        client,
        experiment_id,
        3,
        hardware="CPU C",
        energy_source="estimate",
        seed=3,
        strategies=("single", "ddp"),
        device_counts=(2,),
    )
    outcome = run_fit(["roofline-bert"], model_name="m", alias="champion", echo=lambda _: None)
    assert [f.hardware for f in outcome.fits] == ["GPU A", "GPU B"]
    assert list(outcome.skipped) == ["CPU C"] and "--allow-estimate" in outcome.skipped["CPU C"]
    # names the hardware table does not know: no covariate form, only intercepts against separate slopes
    assert set(outcome.hardware_comparison) == {
        "hardware_intercepts",
        "hardware_intercepts_per_step",
        "hardware_slopes",
    }
    assert outcome.pooled is not None and outcome.pooled.missing == ["GPU A", "GPU B"]
    parent = client.get_run(outcome.parent_run_id)
    assert parent.data.metrics["n_runs"] == sum(len(f.frame) for f in outcome.fits)
    assert "loho_mape" not in parent.data.metrics
    children = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{outcome.parent_run_id}'")
    assert {c.data.tags["roofline.hardware"] for c in children} == {"GPU A", "GPU B"}
    # both hardware follow one synthetic law: the pooled law (intercepts) wins; the fleet model is the champion
    assert outcome.pooled.chosen == "hardware_intercepts" and parent.data.metrics["pooled_registered"] == 1.0
    champion = client.get_model_version_by_alias("m", "champion")
    assert champion.tags["roofline.hardware"] == "GPU A, GPU B" and champion.run_id == outcome.parent_run_id
    assert champion.tags["roofline.form"] == "fleet" and parent.data.metrics["fleet_answers_unmeasured"] == 0.0
    # each model carries every metric of its run, logged after it and linked by its id (MLflow's store gives a
    # model's NaN metric back as 0.0: those are compared by name)
    for run in (parent, *children):
        (output,) = run.outputs.model_outputs
        linked = {metric.key: metric.value for metric in client.get_logged_model(output.model_id).metrics}
        assert linked.keys() == run.data.metrics.keys() and {"n_runs", "n_runs_found"} & linked.keys()
        assert all(linked[k] == v for k, v in run.data.metrics.items() if not math.isnan(v))
    assert "the hardware table lacks the measured GPU A, GPU B" in parent.data.tags["roofline.fleet_unmeasured_refusal"]
    assert client.get_model_version_by_alias("m", "champion-gpu-a").tags["roofline.hardware"] == "GPU A"
    assert client.get_model_version_by_alias("m", "champion-gpu-b").tags["roofline.hardware"] == "GPU B"
    served = mlflow.pyfunc.load_model("models:/m@champion")
    query = {
        "num_layers": 4,
        "hidden_size": 256,
        "num_heads": 4,
        "ffn_size": 1024,
        "seq_len": 128,
        "batch_size": 16,
        "num_steps": 100,
        "strategy": "single",
        "num_devices": 1,
    }
    both = served.predict(pd.DataFrame([{**query, "hardware": "GPU A"}, {**query, "hardware": "GPU B"}]))
    assert both["energy_j"].gt(0).all() and not both["extrapolated_hardware"].any()
    assert set(both["law"]) <= {"GPU A", "GPU B", "pooled"}
    assert outcome.fits[0].law.n_runs == len(big.frame)


def test_missing_baselines_use_the_law_or_are_dropped(tracking_uri: str) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")
    _, with_base = generate_synthetic_runs(8, seed=4, strategies=("single", "ddp"))
    _, without = generate_synthetic_runs(3, seed=5, strategies=("single", "ddp"), singles_per_workload=0)
    log_runs(client, experiment_id, pd.concat([with_base, without], ignore_index=True))
    frame = load_train_runs(TrackingClient(client.tracking_uri), ["roofline-bert"]).frame
    by_law = fit_hardware(frame, "Synthetic GPU")
    assert (by_law.frame["eta_source"] == "law").sum() == len(without)
    assert by_law.metrics()["n_eta_from_law"] == len(without)
    # eta of those runs rests on the single-device time law (their baseline), none is dropped
    assert (by_law.frame["baseline"] == "time_law").sum() == len(without)
    assert by_law.metrics()["n_runs_baseline_time_law"] == len(without)
    assert by_law.dropped == {} and len(by_law.frame) == len(frame)
    dropped = fit_hardware(frame, "Synthetic GPU", missing_baseline="drop")
    assert dropped.dropped == {"without a single-device baseline": len(without)}
    assert len(dropped.frame) == len(with_base)
    with pytest.raises(RooflineError, match="no single-device run"):
        fit_hardware(frame[frame["strategy"] != "single"], "Synthetic GPU")


def test_a_weak_scaling_store_keeps_every_run_tags_its_baseline_and_serves_every_strategy(
    tracking_uri: str, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per-device batch fixed (global batch growing with N): no single run shares a parallel run's workload."""
    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")
    logged = log_synthetic_runs(
        client, experiment_id, 10, seed=12, strategies=("single", "ddp", "fsdp"), weak_scaling=True
    )
    parallel = logged.frame["strategy"] != "single"
    main(["fit", "--experiment", "roofline-bert", "--model-name", "weak", "--alias", "best"])
    out = capsys.readouterr().out
    assert f"{len(logged.frame)} finished train runs found, {len(logged.frame)} usable" in out
    assert f"{int(parallel.sum())} per_device (single runs at the same per-device batch)" in out
    (fit_run,) = _fit_runs(client)
    m = fit_run.data.metrics
    assert m["n_runs"] == len(logged.frame) and m["n_runs_dropped"] == 0
    assert m["n_runs_baseline_per_device"] == parallel.sum()
    assert m["n_runs_baseline_measured"] == m["n_runs_baseline_time_law"] == 0
    assert "`per_device`" in fit_run.data.tags["mlflow.note.content"]
    # Every parallel train run carries how its baseline was found; single runs carry none.
    for run_id, is_parallel in zip(logged.run_ids, parallel):
        tags = client.get_run(run_id).data.tags
        assert tags.get("roofline.baseline") == ("per_device" if is_parallel else None)
    served = mlflow.pyfunc.load_model("models:/weak@best")
    query = law_query(logged.frame[logged.frame["strategy"] == "fsdp"].head(3))
    pred = served.predict(query)
    assert pred["energy_j"].gt(0).all() and pred["eta"].between(0, 1.1).all()
    # A refit of the same runs writes no baseline tag again: every run carries its kind already.
    written: list[str] = []
    real_set_tag = TrackingClient.set_tag
    monkeypatch.setattr(
        TrackingClient,
        "set_tag",
        lambda self, run_id, key, value: (written.append(key), real_set_tag(self, run_id, key, value))[1],
    )
    main(["fit", "--experiment", "roofline-bert", "--model-name", "weak", "--alias", "best"])
    assert "roofline.baseline" not in written
    for run_id, is_parallel in zip(logged.run_ids, parallel):
        assert client.get_run(run_id).data.tags.get("roofline.baseline") == ("per_device" if is_parallel else None)


@pytest.mark.slow
def test_mlflow_run_fit_entry_point(tracking_uri: str) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("roofline-bert")
    log_synthetic_runs(client, experiment_id, 6, seed=8, strategies=("single", "tp"), device_counts=(2,))
    result = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "mlflow"),
            "run",
            REPO,
            "-e",
            "fit",
            "--env-manager",
            "local",
            "--experiment-name",
            "roofline-bert",
            "-P",
            "experiment=roofline-bert",
            "-P",
            "model_name=via-project",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MLFLOW_TRACKING_URI": tracking_uri},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (fit_run,) = _fit_runs(client)
    assert "mlflow.project.entryPoint" in fit_run.data.tags  # the project's own run is the fit run
    assert fit_run.info.status == "FINISHED"
    version = client.get_model_version_by_alias("via-project", "champion")
    assert version.tags["roofline.fit_run_id"] == fit_run.info.run_id
    assert "tp: saturating_exp" in result.stdout + result.stderr


def test_hardware_names_that_make_one_alias_never_replace_each_others_law(tracking_uri: str) -> None:
    """`GPU A` and `GPU-A` both slug to champion-gpu-a: the second gets a distinct alias, in one fit or later."""
    client = MlflowClient()
    first, later, both = (client.create_experiment(name) for name in ("first", "later", "both"))
    for experiment_id, hardware, seed in (
        (first, "GPU A", 1),
        (first, "GPU B", 2),
        (later, "GPU-A", 3),
        (later, "GPU B", 4),
        (both, "GPU A", 5),
        (both, "GPU-A", 6),
    ):
        log_synthetic_runs(
            client, experiment_id, 3, hardware=hardware, seed=seed, strategies=("single", "ddp"), device_counts=(2,)
        )
    run_fit(["first"], model_name="m", alias="champion", echo=lambda _: None)
    gpu_a = client.get_model_version_by_alias("m", "champion-gpu-a")
    assert gpu_a.tags["roofline.hardware"] == "GPU A"
    run_fit(["later"], model_name="m", alias="champion", echo=lambda _: None)
    assert client.get_model_version_by_alias("m", "champion-gpu-a").version == gpu_a.version  # not replaced
    other = client.get_model_version_by_alias("m", distinct_hardware_alias("champion", "GPU-A"))
    assert other.tags["roofline.hardware"] == "GPU-A" and other.version != gpu_a.version
    # both names in one fit: two versions, two aliases
    outcome = run_fit(["both"], model_name="n", alias="champion", echo=lambda _: None)
    aliases = {a for fit in outcome.fits for a in fit.aliases if a != "champion"}
    assert len(aliases) == 2
    assert {client.get_model_version_by_alias("n", a).tags["roofline.hardware"] for a in aliases} == {"GPU A", "GPU-A"}
