"""The model-from-code file MLflow copies into every logged roofline model.

MLflow runs this file when the model is loaded (``mlflow.pyfunc.load_model``,
``mlflow models serve``), so the logged model holds no pickled Python object: only this
file and the law's JSON artifact. See :func:`mlflow_roofline.serve.pyfunc_model.log_law_model`.
"""

from mlflow.models import set_model

from mlflow_roofline.serve.pyfunc_model import RooflineEnergyModel

set_model(RooflineEnergyModel())
