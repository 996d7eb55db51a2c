"""The one place that talks to the MLflow client: experiment lookup, one paginator over
``search_runs``, one way to log metrics, and :func:`track_energy`.

May import core and energy; never a stage.
"""
