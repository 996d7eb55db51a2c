"""Compatibility path: models registered by mlflow-roofline 0.1.0 import the pyfunc model here.

Their copied entry file says ``from mlflow_roofline.pyfunc_model import RooflineEnergyModel``
(and carries no code of its own), so this path must stay importable for as long as such
models are served; the model now lives in :mod:`mlflow_roofline.serve.pyfunc_model`.
"""

from mlflow_roofline.serve.pyfunc_model import RooflineEnergyModel

__all__ = ["RooflineEnergyModel"]
