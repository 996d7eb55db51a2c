"""Measure and forecast the user's own training jobs: a Hugging Face ``Trainer`` callback
(:mod:`mlflow_roofline.integrations.transformers`) and a hook for a hand-written
Accelerate loop (:mod:`mlflow_roofline.integrations.accelerate`).

Owns: reading a job's configuration from its model and from what ran (shape, batches,
strategy, device count), the energy window cut into samples inside the loop, the
forecast of the whole job with its interval (with a registered law as prior), the
energy budget, and logging all of it as a train run (``roofline.source`` ``trainer`` or
``accelerate``) that ``fit`` uses beside sweep runs.

Modules: the two adapters; :mod:`~mlflow_roofline.integrations.measurement` (one job's
measurement state: window, sync points, budget, summary), ``energy_window`` (the
per-rank window and its gathering), ``job_facts`` (the configuration read from the model
and the batches), ``parallel_probe`` (the strategy that ran), ``forecast`` (the maths)
and ``law_prior`` (the registered law as its prior), ``run_log`` (the MLflow run),
``options``; ``autolog`` (``mlflow_roofline.autolog()``: both adapters attached to every
Trainer and Accelerator of the process by patching them) and ``safety`` (its safety net: a
failure of ours is a warning, never the user's training's).

May import core, energy, tracking and train's run-logging helpers; imports
``transformers`` and ``accelerate`` only in the adapter modules named after them, so
that importing this package needs neither. Never imported by a stage.
"""
