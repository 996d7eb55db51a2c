"""A registered law model loads and predicts in a fresh venv that installs only the model's requirements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from law_factory import make_law, query

from mlflow_roofline.serve.pyfunc_model import log_law_model

LOAD_AND_PREDICT = """
import importlib.util, json, sys
assert importlib.util.find_spec("mlflow_roofline") is None, "the package is installed here"
assert importlib.util.find_spec("torch") is None, "torch is installed here"
import mlflow, pandas as pd
model = mlflow.pyfunc.load_model("models:/roofline-energy-portable@champion")
out = model.predict(pd.DataFrame(json.loads(sys.argv[1])))
import mlflow_roofline
print(json.dumps({"module": mlflow_roofline.__file__, "rows": out.to_dict("records")}))
"""


def test_model_requirements_name_no_unpublished_package(tracking_uri: str) -> None:
    with mlflow.start_run():
        info = log_law_model(make_law(n_workloads=12))
    local = Path(mlflow.artifacts.download_artifacts(info.model_uri))
    requirements = (local / "requirements.txt").read_text().split()
    assert not [r for r in requirements if r.startswith("mlflow-roofline")]
    assert {r.split("==")[0] for r in requirements} == {"mlflow", "numpy", "pandas", "scipy"}
    carried = local / "code" / "mlflow_roofline"
    assert (carried / "serve" / "pyfunc_model.py").is_file() and (carried / "law" / "fitted.py").is_file()
    assert not (carried / "train").exists() and not (carried / "fit").exists()


@pytest.mark.slow
def test_fresh_venv_with_only_the_model_requirements_loads_it_from_the_registry(
    tracking_uri: str, tmp_path: Path
) -> None:
    law = make_law(n_workloads=12)
    with mlflow.start_run():
        info = log_law_model(law)
    client = mlflow.MlflowClient()
    version = mlflow.register_model(info.model_uri, "roofline-energy-portable")
    client.set_registered_model_alias("roofline-energy-portable", "champion", version.version)
    requirements = Path(mlflow.artifacts.download_artifacts(info.model_uri)) / "requirements.txt"

    # A venv without pip, filled from outside (--python): nothing in it but the requirements. No
    # byte-compiling: the load below compiles only what it imports (all of MLflow, pandas and SciPy up
    # front was most of the install: 75 CPU-s with it and ensurepip, 14 without). With the uv that
    # `make install` puts beside this interpreter (it resolves and unpacks in parallel), else pip.
    venv = tmp_path / "fresh-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    uv = Path(sys.executable).with_name("uv")
    target, requirement = ["--python", str(python)], ["-r", str(requirements)]
    if uv.is_file():
        command = [str(uv), "pip", "install", "--quiet", *target, *requirement]
    else:  # pip takes --python before the command
        command = [sys.executable, "-m", "pip", *target, "install", "--quiet", "--no-compile", *requirement]
    subprocess.run(command, check=True, timeout=900)

    rows = [query(strategy="ddp", num_devices=2), query(strategy="single", num_devices=1)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["MLFLOW_TRACKING_URI"] = tracking_uri
    done = subprocess.run(
        [str(python), "-c", LOAD_AND_PREDICT, json.dumps(rows)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "/code/mlflow_roofline/" in result["module"]  # the model's own copy, not an install
    here = mlflow.pyfunc.load_model("models:/roofline-energy-portable@champion").predict(
        __import__("pandas").DataFrame(rows)
    )
    for got, expected in zip(result["rows"], here.to_dict("records")):
        assert got["energy_j"] == pytest.approx(expected["energy_j"], rel=1e-9)
        assert got["energy_j_lower"] == pytest.approx(expected["energy_j_lower"], rel=1e-9)
