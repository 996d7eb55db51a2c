"""MLflow's own system metrics (CPU, memory, disk, network; GPU utilisation and power) for a run.

MLflow samples them in a background thread (``SystemMetricsMonitor``, what
``mlflow.start_run(log_system_metrics=True)`` starts) and logs them as ``system/...``
metrics, which the UI shows in the run's System metrics tab. This module starts that
monitor for a run given by id, so it works with the client API the train run uses and
with the fluent run a Trainer callback joins. CPU and memory need ``psutil``; GPU
figures need ``nvidia-ml-py`` and a GPU, and are simply absent otherwise.

The sampling thread runs in the process that talks to MLflow, not in the training
processes; ``benchmarks/system_metrics_overhead.py`` measures what it costs the
energy window.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from mlflow_roofline.core.errors import ConfigError

if TYPE_CHECKING:  # the monitor's module needs psutil, which is optional
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

logger = logging.getLogger(__name__)

DEFAULT_SAMPLING_INTERVAL_S = 2.0
"""Seconds between samples: short enough that a train run of a few seconds gets a point.

MLflow's own ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` overrides it.
"""
ENV_SWITCH = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"  # MLflow's own switch, read when no option is given
INTERVAL_ENV = "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL"  # MLflow's own sampling interval, seconds
NODE_ID_ENV = "MLFLOW_SYSTEM_METRICS_NODE_ID"  # MLflow's own node id: system/<node id>/<name>


def sampling_interval_s() -> float:
    """Seconds between two samples: MLflow's ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL``, else 2 s.

    Raises:
        ConfigError: the variable is not a number of seconds > 0.
    """
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_SAMPLING_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigError(INTERVAL_ENV, f"must be a number of seconds > 0, got {raw!r}")
    return value


def system_metrics_wanted(option: bool | None) -> bool:
    """Whether to log system metrics: ``option`` when given, else MLflow's environment switch, else on."""
    if option is not None:
        return option
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    return value not in ("false", "0", "no", "off") if value else True


class SystemMetrics:
    """MLflow's system-metrics monitor for one run, started and stopped explicitly.

    ``start()`` does nothing (and says why once, as a warning) without ``psutil``.
    ``stop()`` also logs the samples of a run shorter than one logging period, which
    MLflow's monitor would otherwise drop. The samples go on after the last step the run
    holds (MLflow reads the whole run back for it), except in a ``new_run``, made for this
    block and holding none: there they start at step 0, with no read.
    """

    def __init__(
        self,
        run_id: str,
        sampling_interval_s: float = DEFAULT_SAMPLING_INTERVAL_S,
        tracking_uri: str | None = None,
        *,
        new_run: bool = False,
    ) -> None:
        self.run_id = run_id
        self.sampling_interval_s = sampling_interval_s
        self.tracking_uri = tracking_uri
        self.new_run = new_run
        self._monitor: SystemMetricsMonitor | None = None

    @property
    def running(self) -> bool:
        """True between a successful ``start()`` and ``stop()``."""
        return self._monitor is not None

    def start(self) -> bool:
        """Start sampling; True when the monitor runs."""
        if importlib.util.find_spec("psutil") is None:
            logger.warning("system metrics are off: the package psutil is not installed (pip install psutil)")
            return False
        # Deferred: this module of MLflow imports psutil, which is optional (checked just above).
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        try:
            monitor = SystemMetricsMonitor(
                self.run_id,
                sampling_interval=self.sampling_interval_s,
                resume_logging=not self.new_run,
                tracking_uri=self.tracking_uri,
            )
            monitor.start()
        except Exception as exc:  # the run goes on without them
            logger.warning("system metrics are off: MLflow's monitor did not start (%s)", exc)
            return False
        self._monitor = monitor
        return True

    def stop(self) -> None:
        """Stop sampling and log what was sampled since the last logged point."""
        monitor, self._monitor = self._monitor, None
        if monitor is None:
            return
        monitor.finish()
        try:
            if any(m.metrics for m in monitor.monitors):
                monitor.publish_metrics(monitor.aggregate_metrics())
                monitor.mlflow_logger.flush()
        except Exception as exc:  # a late sample is not worth failing a finished run
            logger.warning("system metrics: the last sample was not logged (%s)", exc)


@contextlib.contextmanager
def system_metrics(
    run_id: str,
    enabled: bool = True,
    sampling_interval_s: float = DEFAULT_SAMPLING_INTERVAL_S,
    *,
    new_run: bool = False,
) -> Iterator[SystemMetrics | None]:
    """Log MLflow's system metrics for ``run_id`` while the block runs (nothing when not ``enabled``);
    ``new_run``: see :class:`SystemMetrics`."""
    if not enabled:
        yield None
        return
    metrics = SystemMetrics(run_id, sampling_interval_s, new_run=new_run)
    metrics.start()
    try:
        yield metrics
    finally:
        metrics.stop()
