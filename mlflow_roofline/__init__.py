"""mlflow-roofline: predict the energy of transformer fine-tuning before the job runs."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "track_energy"]


def __getattr__(name: str) -> Any:
    # Lazy so that `import mlflow_roofline` stays light (no MLflow import until needed).
    if name == "track_energy":
        from mlflow_roofline.tracking.energy import track_energy

        return track_energy
    raise AttributeError(f"module 'mlflow_roofline' has no attribute {name!r}")
