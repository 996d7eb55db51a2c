"""Remote executors of a sweep: Ray tasks or Slurm jobs, one claimed configuration each.

``executors`` (the Ray and Slurm executors, their settings, the :class:`Executor` protocol
the sweep drives) and ``claimed_task`` (what runs on a worker node: measure one claimed run). The
submitting host's side (hand claimed runs out, take outcomes back) is
:mod:`mlflow_roofline.sweep.remote_dispatch`, which needs the sweep's context.
"""
