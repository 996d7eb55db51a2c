"""A model registered by mlflow-roofline 0.1.0 (before the package moved into stage folders) still loads and predicts.

``tests/data/legacy_model_0_1_0`` is that model as 0.1.0 logged it: its copied entry file imports
``mlflow_roofline.pyfunc_model``, the path the compatibility module keeps.
"""

from __future__ import annotations

from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException

LEGACY = Path(__file__).parents[1] / "data" / "legacy_model_0_1_0"


def test_legacy_entry_file_imports_the_old_path() -> None:
    assert "from mlflow_roofline.pyfunc_model import RooflineEnergyModel" in (LEGACY / "pyfunc_entry.py").read_text()


def test_model_logged_by_0_1_0_loads_and_predicts(tmp_path: Path) -> None:
    model = mlflow.pyfunc.load_model(str(LEGACY))
    query = pd.DataFrame(
        [
            {
                "num_layers": 2,
                "hidden_size": 128,
                "num_heads": 2,
                "ffn_size": 512,
                "seq_len": 64,
                "batch_size": 16,
                "num_steps": 20,
                "strategy": "ddp",
                "num_devices": 2,
            }
        ]
    )
    out = model.predict(query)
    assert out.loc[0, "energy_j_lower"] < out.loc[0, "energy_j"] < out.loc[0, "energy_j_upper"]
    assert 0 < out.loc[0, "eta"] <= 1.5


def test_a_param_the_legacy_signature_lacks_is_refused_naming_its_own_params() -> None:
    """0.1.0 declared mode, max_devices and objective only: MLflow drops a carbon param; the model refuses it."""
    model = mlflow.pyfunc.load_model(str(LEGACY))
    job = {"num_layers": 2, "hidden_size": 128, "num_heads": 2, "ffn_size": 512, "seq_len": 64, "batch_size": 16}
    with pytest.raises(MlflowException) as info:
        model.predict(pd.DataFrame([{**job, "num_steps": 20, "strategy": "ddp", "num_devices": 2}]), {"region": "DE"})
    assert info.value.message == "region: unknown request param; the model's params are mode, max_devices, objective"
