"""mlflow-roofline: predict the energy of transformer fine-tuning before the job runs."""

from __future__ import annotations

from collections.abc import Callable

__version__ = "0.1.0"

__all__ = ["__version__", "autolog", "track_energy"]


def __getattr__(name: str) -> Callable[..., object]:
    # Deferred: MLflow is heavy, and `import mlflow_roofline` must stay light until track_energy is used.
    if name == "track_energy":
        from mlflow_roofline.tracking.energy_logging import track_energy

        return track_energy
    if name == "autolog":  # light too: the patched libraries are imported when autolog() is called
        from mlflow_roofline.integrations.autolog import autolog

        return autolog
    raise AttributeError(f"module 'mlflow_roofline' has no attribute {name!r}")
