"""The one door to MLflow: :class:`~mlflow_roofline.tracking.client.TrackingClient` (runs,
batched logging, search, registry) and the helpers built on it: the experiment a command
writes to (``experiments``), may this process log into a run (``run_ownership``), run
descriptions (``notes``), ending an orphaned run (``orphans``), a measurement's metrics and
:func:`track_energy` (``energy_logging``), MLflow's system-metrics monitor
(``system_metrics_monitor``), a failing store said in one line (``store_errors``) and MLflow's
own autologging as ``mlflow_roofline.autolog()`` meets it (``autologging``); and
the two MLflow plugins setup.cfg installs: the ``roofline`` model evaluator (``evaluator``:
a registered law scored on new runs) and the ``roofline`` run context provider
(``run_context``: the hardware tags on every run when ``ROOFLINE_RUN_CONTEXT=true``).

May import core and energy; never a stage.
"""
