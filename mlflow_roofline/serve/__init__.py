"""Answer energy queries with a fitted law.

- the request: ``validate`` (the input table against the rule table of
  :mod:`mlflow_roofline.core.rules`), ``frames`` (cheap column reads and frame builds),
  ``params`` (request params), ``hardware_routing`` (the ``hardware`` column: each row on
  its GPU's laws, a pooled law, an unmeasured GPU);
- the answers: ``predict`` (the one evaluation of the law: energy, interval, time per
  row), ``placement_search`` (recommend and pareto mode over every placement of a job),
  ``emissions`` (co2e and cost);
- MLflow: ``pyfunc_model``/``pyfunc_entry`` (the pyfunc model, logged from code with the
  serve-time code it carries, and loaded back), ``errors`` (the 400), ``scoring_guard`` (what
  MLflow's scoring server answers for it: CSV bodies, no stack trace, no unbounded echo, the untyped
  columns taken as sent, the answer by the C JSON encoder);
- ``ask_model`` (one job's query and its answer as text: the ``predict`` command's work).

Never imports torch; imports core and law only (and mlflow in ``pyfunc_model``,
``pyfunc_entry``, ``errors`` and ``scoring_guard``).
"""
