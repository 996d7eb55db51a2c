"""Answer energy queries with a fitted law: input validation, predict, recommend and the
MLflow pyfunc model.

Never imports torch; imports core and law only (and mlflow for the pyfunc wrapper).
"""
