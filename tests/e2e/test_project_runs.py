"""`mlflow run . -e sweep`, then `-e fit`, as a user types them first: every run where the user looks, named.

A real SQLite store, MLflow's own `mlflow run` (local env manager), a tiny CPU spec. The project run
lands in the experiment the entry point writes to (this package's default experiment provider), not
in `Default`, and no run keeps a name MLflow made up.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.project_plugins import REPO_ROOT, env_with_plugin
from support.sweeps import write_spec

from mlflow_roofline.core.schema import TAG_RUN_TYPE
from mlflow_roofline.tracking.project_run import is_generated_name

pytestmark = pytest.mark.slow

GROUP = "mlflow.default_experiment_provider"


def _mlflow_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = ["mlflow", "run", str(REPO_ROOT), "--env-manager", "local", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)


def test_sweep_then_fit_leave_nothing_in_default_and_name_every_run(tracking_uri: str, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from mlflow_roofline.testing.synthetic import log_synthetic_runs

    client = MlflowClient()
    # artifacts in tmp_path, not under the checkout's ./mlruns (the entry points run in the repository)
    sweep_id = client.create_experiment("e2e-sweep", artifact_location=(tmp_path / "a1").as_uri())
    fit_id = client.create_experiment("e2e-fit", artifact_location=(tmp_path / "a2").as_uri())
    log_synthetic_runs(client, fit_id, 8, seed=3)  # enough workloads for a fit, in seconds
    spec = write_spec(tmp_path / "tiny.yaml", "e2e-sweep", "[{num_layers: [1, 2], hidden_size: 16}]")
    env = env_with_plugin(GROUP, tmp_path / "plugins")

    sweep = _mlflow_run(env, "-e", "sweep", "-P", f"spec={spec}")
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    fit = _mlflow_run(env, "-e", "fit", "-P", "experiment=e2e-fit", "-P", "model_name=e2e-law")
    assert fit.returncode == 0, fit.stdout + fit.stderr

    assert client.search_runs(["0"]) == []  # nothing in Default
    (parent,) = client.search_runs([sweep_id], f"tags.`{TAG_RUN_TYPE}` = 'sweep'")
    assert parent.info.run_name == "sweep-tiny" and parent.data.params["spec"] == str(spec)  # the project run
    children = client.search_runs([sweep_id], f"tags.`{TAG_RUN_TYPE}` = 'train'")
    assert sorted(c.info.run_name for c in children) == [
        "single-x1-L1-d16-h2-ff32-S8-B4",
        "single-x1-L2-d16-h2-ff32-S8-B4",
    ]
    (fit_run,) = client.search_runs([fit_id], f"tags.`{TAG_RUN_TYPE}` = 'fit'")
    assert fit_run.info.run_name == "fit-e2e-fit" and fit_run.data.params["model_name"] == "e2e-law"
    every = client.search_runs([sweep_id, fit_id])
    assert not [r.info.run_name for r in every if is_generated_name(r.info.run_name)]


def test_the_allow_estimate_error_names_the_mlproject_parameter(tracking_uri: str, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from mlflow_roofline.testing.synthetic import log_synthetic_runs

    client = MlflowClient()
    experiment_id = client.create_experiment("e2e-estimate", artifact_location=(tmp_path / "a").as_uri())
    log_synthetic_runs(client, experiment_id, 4, seed=4, energy_source="estimate")
    fit = _mlflow_run(env_with_plugin(GROUP, tmp_path / "plugins"), "-e", "fit", "-P", "experiment=e2e-estimate")
    assert fit.returncode != 0
    (error,) = [line for line in fit.stderr.splitlines() if line.startswith("Error: allow_estimate:")]
    assert error.endswith("pass -P allow_estimate=true to fit on them") and "--allow-estimate" not in error
