"""The meter's cumulative energy as MLflow system metrics, beside MLflow's own in the System metrics tab.

While a meter window is open on a run, :class:`SystemEnergy` logs what the window has
measured so far, in watt-hours: ``system/gpu_<i>_energy_wh`` per GPU,
``system/cpu_energy_wh`` (the ``estimate`` meter's process tree, RAPL's CPU packages) and
``system/dram_energy_wh`` (RAPL's DRAM zones), and tags the run with the meter
(``roofline.system_energy_source``). The figures come from the meter already running
(:class:`~mlflow_roofline.energy.live.LiveEnergy`, or the files a train job's ranks write):
nothing here reads a device.

MLflow's conventions, so that both sets sit in one tab whether or not MLflow's own monitor
runs (``mlflow.start_run(log_system_metrics=True)``, a train run's): one point every
``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` seconds (2 s by default), the names under
``system/`` (``system/<node id>/`` with ``MLFLOW_SYSTEM_METRICS_NODE_ID``), the step
counting points from the run's next ``system/`` step (MLflow's ``resume_logging`` rule),
the timestamp the reading's own time. Each point is one ``log_batch``.

One daemon thread per run, started when the window opens (:meth:`SystemEnergy.start`):
a point then (0 Wh: the window's start), one per interval, and the last one when the
window has closed (:meth:`SystemEnergy.stop`): the window's own measurement, so the last
point is the run's energy. A store that fails costs one warning, never the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Protocol

from mlflow_roofline.core.schema import (
    M_SYSTEM_CPU_ENERGY_WH,
    M_SYSTEM_DRAM_ENERGY_WH,
    SYSTEM_METRIC_PREFIX,
    TAG_SYSTEM_ENERGY_SOURCE,
    system_gpu_energy_metric,
    system_metric_on_node,
)
from mlflow_roofline.tracking.client import MetricPoint, TrackingClient
from mlflow_roofline.tracking.system_metrics_monitor import NODE_ID_ENV, sampling_interval_s

logger = logging.getLogger(__name__)

J_PER_WH = 3600.0

Reading = tuple[float, dict[str, float]]
"""``(unix time s, cumulative joules per device)`` of the window so far."""


class EnergyReadings(Protocol):
    """Where the readings come from: the meter's source, and the readings since the last call."""

    @property
    def source(self) -> str | None: ...

    def take(self) -> list[Reading]: ...


def energy_wh_metrics(per_device_j: Mapping[str, float], node_id: str | None = None) -> dict[str, float]:
    """The system metrics of cumulative joules per device (``cuda:0``, ``rocm:1``, ``cpu``, ``package-0``,
    ``package-0/dram``): watt-hours per GPU, the CPU's and the DRAM's sums."""
    metrics: dict[str, float] = {}
    for device, joules in per_device_j.items():
        kind, _, index = device.partition(":")
        if kind in ("cuda", "rocm") and index.isdigit():
            name = system_gpu_energy_metric(int(index))
        elif device.endswith("/dram"):
            name = M_SYSTEM_DRAM_ENERGY_WH
        else:  # "cpu" (estimate), "package-<i>" (rapl)
            name = M_SYSTEM_CPU_ENERGY_WH
        name = system_metric_on_node(name, node_id)
        metrics[name] = metrics.get(name, 0.0) + joules / J_PER_WH
    return metrics


class SystemEnergy:
    """Logs ``readings`` into run ``run_id`` as system metrics from :meth:`start` to :meth:`stop`.

    Args:
        run_id: the run.
        readings: the window's readings (:class:`EnergyReadings`).
        client: the store (default: MLflow's current tracking URI).
        interval_s: seconds between points (default: MLflow's sampling interval).
        new_run: the run was made for this window and holds no system metrics: the points start at
            step 0, with no read of the run (else after its last ``system/`` step).
    """

    def __init__(
        self,
        run_id: str,
        readings: EnergyReadings,
        client: TrackingClient | None = None,
        interval_s: float | None = None,
        *,
        new_run: bool = False,
    ) -> None:
        self.run_id = run_id
        self.new_run = new_run
        self.readings = readings
        self.interval_s = sampling_interval_s() if interval_s is None else interval_s
        self.node_id = os.environ.get(NODE_ID_ENV) or None
        self._client = client
        self._step = 0
        self._tagged = False
        self._failed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._write = threading.Lock()

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._thread is not None

    def start(self) -> None:
        """Log the first point and start the sampling thread (the window has just opened)."""
        if self._thread is not None:
            return
        try:
            self._client = self._client or TrackingClient()
            self._step = 0 if self.new_run else next_system_step(self._client, self.run_id)
        except Exception as exc:  # the store: one warning, the run goes on
            self._fail(exc)
            return
        self._log()
        self._thread = threading.Thread(target=self._run, name="roofline-system-energy", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; log the readings left (the window's last, once it has closed)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        if thread is not threading.current_thread():
            thread.join()
        self._log()

    def cancel(self) -> None:
        """Stop sampling without waiting and log nothing more (from a signal handler)."""
        self._failed = True
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._log()

    def _log(self) -> None:
        """Log every reading since the last call, one step each."""
        with self._write:
            if self._failed or self._client is None:
                return
            try:
                points, tags = self._points()
                if points:
                    self._client.log_history(self.run_id, points, tags)
            except Exception as exc:
                self._fail(exc)

    def _points(self) -> tuple[list[MetricPoint], dict[str, str]]:
        points: list[MetricPoint] = []
        for unix_s, per_device_j in self.readings.take():
            metrics = energy_wh_metrics(per_device_j, self.node_id)
            if not metrics:
                continue
            points += [MetricPoint(k, v, self._step, int(unix_s * 1000)) for k, v in metrics.items()]
            self._step += 1
        tags: dict[str, str] = {}
        if points and not self._tagged and self.readings.source:
            tags[TAG_SYSTEM_ENERGY_SOURCE] = self.readings.source
            self._tagged = True
        return points, tags

    def _fail(self, exc: BaseException) -> None:
        self._failed = True
        logger.warning("roofline: system energy metrics are off for run %s: %s", self.run_id, exc)


def next_system_step(client: TrackingClient, run_id: str) -> int:
    """The step after the run's last ``system/`` metric (0 when it has none): MLflow's ``resume_logging`` rule."""
    steps = [p.step for p in client.latest_metrics(run_id) if p.key.startswith(SYSTEM_METRIC_PREFIX)]
    return max(steps) + 1 if steps else 0


@contextlib.contextmanager
def system_energy(
    run_id: str, readings: EnergyReadings, client: TrackingClient | None = None, *, new_run: bool = False
) -> Iterator[SystemEnergy]:
    """Log ``readings`` as the run's ``system/..._energy_wh`` while the block runs (the last reading at its end);
    ``new_run``: see :class:`SystemEnergy`."""
    energy = SystemEnergy(run_id, readings, client, new_run=new_run)
    energy.start()
    try:
        yield energy
    finally:
        energy.stop()
