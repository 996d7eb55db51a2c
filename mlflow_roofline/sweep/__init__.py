"""A grid of train runs: the spec, the plan, claiming, the child runs, the sweep run and the runner.

Modules, bottom up, grouped by idea:

- the types they share: ``status`` (store states, outcomes, the interruption; imports
  nothing of the others);
- the spec and the plan: ``spec`` (read and check a YAML spec: grid and settings),
  ``plan`` (expand it), ``lookup`` (where each configuration stands among the
  experiment's train runs), ``reconcile`` (what to do with each);
- the child runs: ``child_run`` (create one), ``fresh_child`` (measure it in a train
  process of its own and settle it once that process ended), ``warm_child`` (measure it
  with ranks forked from a warm server);
- remote executors: the ``remote`` subpackage (Ray and Slurm executors, the worker side,
  the submitting host's side);
- claiming and running: ``claim`` (one run per configuration across sweeps sharing a
  store), ``context`` (what every step needs), ``queue`` (claim and measure each unit, the loop);
- the sweep run: ``parent_run`` (open it, its plan artifacts, its progress metrics) and
  ``parent_description`` (its Markdown page);
- ``runner`` (run a planned sweep: parent run, signals, results) and ``entry`` (what the
  ``sweep`` and ``specs`` commands call: plan, dry run, run, summary).

May import core, energy (meter names), train (the train command line and tags), system and
tracking; never fit or serve. MLflow only through :class:`~mlflow_roofline.tracking.client.TrackingClient`.
"""
