"""The measurement of a user's training loop, shared by the Trainer callback and the Accelerate hook.

Life of a job, on every process: :meth:`JobTracker.begin` builds the meter (and, on the
main process, opens or joins the MLflow run); :meth:`JobTracker.step_end` after each
optimizer step opens the energy window once ``warmup_steps`` are done, cuts it into
samples, and at each logging step (and at the K-th measured step) gathers every rank's
samples, logs the history and the forecast, and says whether the energy budget stops the
job; :meth:`JobTracker.end` closes the window at the last step and logs the run's params,
proxies, totals and the power timeline (:mod:`mlflow_roofline.integrations.summary`).
What happens at a sync point is :class:`~mlflow_roofline.integrations.tracker_sync.SyncPoint`.
"""

from __future__ import annotations

from typing import Any

from mlflow_roofline.integrations.energy_window import RankWindow
from mlflow_roofline.integrations.forecast import Forecast, Prior, StepSamples
from mlflow_roofline.integrations.job_facts import JobFacts
from mlflow_roofline.integrations.options import TrackOptions
from mlflow_roofline.integrations.tracker_sync import SyncPoint

__all__ = ["ESTIMATE_RESCAN_S", "JobTracker"]

ESTIMATE_RESCAN_S = 10.0
"""Seconds between two listings of live descendants by the ``estimate`` meter inside a loop.

Listing them walks ``/proc`` (milliseconds on a busy machine); the default once a second
costs more than the per-step cuts themselves. CPU time of descendants already listed is
still read at every cut; a new one (a data-loader worker) is found within this time, and
its CPU time so far lands in the sample where it is found."""


class JobTracker(SyncPoint):
    """Measures one training job; one instance per process, driven by an adapter."""

    def __init__(self, options: TrackOptions, source: str) -> None:
        self.options = options
        self.source = source
        self.facts: JobFacts | None = None
        self.window: RankWindow | None = None
        self.run: Any = None  # RunLog on the main process
        self.samples = StepSamples()
        self.timeline: list[tuple[int, float, int, float | None]] = []
        self.rank_energy: dict[int, float | None] = {}
        self.rank_time: dict[int, float] = {}
        self.energy_error: str | None = None
        self.energy_warning: str | None = None
        self.total_energy_j = 0.0
        self.total_time_s = 0.0
        self.measured = 0  # measured optimizer steps so far
        self.last_step = 0
        self.last_sync_step = -1  # global step of the last history point
        self.law: Any = None  # LawLoader on the main process
        self.prior: Prior | None = None
        self.prior_note = ""
        self.last_forecast: Forecast | None = None
        self.stop_reason = ""
        self._opened = False
        self._closed = False
        self._in_sample = 0
        self._prior_done = False
        self._warned = False

    # -- lifecycle ---------------------------------------------------------------------
    def begin(self, facts: JobFacts) -> None:
        """Build the meter and, on the main process, open or join the run and tag it."""
        from mlflow_roofline.energy import make_meter
        from mlflow_roofline.integrations.summary import start_tags
        from mlflow_roofline.train.device import hardware_name

        self.facts = facts
        device = facts.device if facts.device in ("cuda", "cpu") else "auto"
        gpus = None
        if device == "cuda":
            import torch

            gpus = [torch.cuda.current_device()]
        meter = make_meter(self.options.meter, device=device, gpu_indices=gpus)
        if hasattr(meter, "rescan_s"):  # estimate: the window is cut every step; list descendants less often
            meter.rescan_s = max(meter.rescan_s, ESTIMATE_RESCAN_S)
        reads = meter.scope != "node" or facts.parallel.local_rank == 0
        self.window = RankWindow(meter, reads)
        self.hardware = hardware_name(device if device != "auto" else "cpu")
        if facts.parallel.is_main:
            from mlflow_roofline.integrations.law_prior import LawLoader
            from mlflow_roofline.integrations.run_log import RunLog

            self.law = LawLoader(self.options.model_uri)
            self.run = RunLog(self.options.experiment, self.options.run_name)
            self.run.log(0, tags=start_tags(self, meter))
        if self.options.warmup_steps == 0:
            self._open()

    def batch_seen(self, rows: int, seq_len: int) -> None:
        """Count a training micro-batch of ``rows`` samples padded to ``seq_len`` tokens."""
        if self.facts is not None:
            self.facts.rows += rows
            self.facts.tokens += rows * seq_len

    def step_end(self, global_step: int, should_log: bool, stopping: bool = False) -> bool:
        """After optimizer step ``global_step``: True when the energy budget says stop now.

        ``stopping``: the job ends after this step anyway (another callback stopped it).
        """
        self.last_step = global_step
        if self._closed or self.window is None:
            return False
        if not self._opened:
            if global_step >= self.options.warmup_steps:
                self._open()
            return False
        self.measured += 1
        self._in_sample += 1
        planned = self.planned_measured
        last = stopping or (planned is not None and self.measured >= planned)
        sync = should_log or last or self.measured == self.options.forecast_after_steps
        if sync or self._in_sample >= self.options.sample_steps:
            if sync:
                self._drain()  # the queued kernels belong to this sample, not to the pause
            self.window.cut(self._in_sample, reopen=not sync)  # paused while syncing
            self._in_sample = 0
        if not sync:
            return False
        stop = self._sync(global_step)
        if last or stop:
            self._closed = True
        else:
            self.window.open()
        return stop

    def end(self) -> None:
        """At the end of training: close the window (a last sync if steps are pending), log the run."""
        from mlflow_roofline.integrations.summary import log_summary

        try:
            if self.window is not None and self._opened and not self._closed:
                self._drain()
                self.window.close(self._in_sample)  # the time after the last step is not measured
                self._in_sample = 0
                if self.window.pending:  # the same on every rank: steps are counted alike
                    self._sync(self.last_step)
                self._closed = True
            if self.run is not None:
                log_summary(self)
        finally:
            if self.window is not None:
                self.window.meter.close()
            if self.run is not None:
                self.run.finish()

    def abort(self) -> None:
        """After the loop failed: no collective (other ranks may be gone); end an own run FAILED."""
        if self.window is not None:
            self.window.meter.close()
        if self.run is not None:
            self.run.finish(failed=True)

    # -- inside -------------------------------------------------------------------------
    def _open(self) -> None:
        assert self.window is not None
        self._drain()
        self.window.open()
        self._opened = True

    def _drain(self) -> None:
        """Wait for the device's queued work (CUDA), so a window edge is where the work is."""
        if self.facts is not None and self.facts.device == "cuda":
            import torch

            torch.cuda.synchronize()
