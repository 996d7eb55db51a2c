"""Remote executors of a sweep: Ray tasks or Slurm jobs, one claimed configuration each.

``executors`` (the Ray and Slurm executors, their settings, the :class:`Executor` protocol
the sweep drives), ``worker`` (what runs on a worker node: measure one claimed run) and
``dispatch`` (the submitting host's side: hand claimed runs out, take outcomes back).
"""
