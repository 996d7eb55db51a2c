"""Click commands of the ``mlflow-roofline`` CLI, one module each."""
