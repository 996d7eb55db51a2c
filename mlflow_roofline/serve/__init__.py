"""Answer energy queries with a fitted law, one module per job.

``validate`` (the input table against the rule table of :mod:`mlflow_roofline.core.rules`),
``predict`` (energy, interval, time per row), ``candidates`` (every placement of a job,
evaluated at once), ``recommend`` and ``pareto`` (the best placement; the energy-time
frontier), ``emissions`` (co2e and cost), ``params`` (request params), ``errors`` (the
400), ``pyfunc_model``/``pyfunc_entry`` (the MLflow pyfunc model, logged from code).

Never imports torch; imports core and law only (and mlflow for the pyfunc wrapper and
its 400 error).
"""
