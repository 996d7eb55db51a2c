"""The measurement of a user's training loop, shared by the Trainer callback and the Accelerate hook.

Life of a job, on every process: :meth:`JobTracker.begin` builds the meter (and, on the
main process, opens or joins the MLflow run); :meth:`JobTracker.step_end` after each
optimizer step opens the energy window once ``warmup_steps`` are done, cuts it into
samples, and at each logging step (and at the K-th measured step) gathers every rank's
samples, logs the history and the forecast, and says whether the energy budget stops the
job; :meth:`JobTracker.end` closes the window at the last step and logs the run's params,
proxies, totals and the power timeline (:mod:`mlflow_roofline.integrations.summary`).
"""

from __future__ import annotations

import logging
from typing import Any

import torch.distributed as dist

from mlflow_roofline.core.schema import (
    M_ENERGY_FORECAST_J,
    M_ENERGY_FORECAST_LOWER_J,
    M_ENERGY_FORECAST_UPPER_J,
    M_ENERGY_INTERVAL_J,
    M_ENERGY_J,
    M_ENERGY_PER_STEP_J,
    M_POWER_W,
    M_TIME_FORECAST_S,
    M_TIME_S,
    TAG_CONFIG_WARNING,
    TAG_ENERGY_BUDGET_KWH,
    TAG_FORECAST_PRIOR,
    TAG_STOP_REASON,
)
from mlflow_roofline.integrations.energy_window import (
    RankWindow,
    Sample,
    combine,
    gather,
)
from mlflow_roofline.integrations.forecast import Forecast, Prior, StepSamples, forecast
from mlflow_roofline.integrations.job_facts import JobFacts
from mlflow_roofline.integrations.options import JOULES_PER_KWH, TrackOptions

logger = logging.getLogger(__name__)

ESTIMATE_RESCAN_S = 10.0
"""Seconds between two listings of live descendants by the ``estimate`` meter inside a loop.

Listing them walks ``/proc`` (milliseconds on a busy machine); the default once a second
costs more than the per-step cuts themselves. CPU time of descendants already listed is
still read at every cut; a new one (a data-loader worker) is found within this time, and
its CPU time so far lands in the sample where it is found."""


class JobTracker:
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

    @property
    def planned_measured(self) -> int | None:
        """Measured steps the job plans (its planned steps after warm-up)."""
        planned = self.facts.planned_steps if self.facts else None
        return None if planned is None else max(planned - self.options.warmup_steps, 1)

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

    def _sync(self, global_step: int) -> bool:
        """Gather the samples since the last sync, log the history and the forecast; the stop decision."""
        assert self.window is not None and self.facts is not None
        report = self.window.take(self.facts.parallel.rank, self.facts.tokens, self.facts.rows)
        reports = gather(report)
        new = combine(reports)
        self._account(reports, new)
        if self.facts.parallel.is_main and not self._warned and self.measured >= 1:
            self._warn_missing()
        fc = None
        if self.measured >= self.options.forecast_after_steps:
            self._ensure_prior()
            if self.energy_error is None and self.planned_measured is not None:
                fc = forecast(self.samples, self.planned_measured, self.prior)
        self.last_forecast = fc or self.last_forecast
        stop = self._over_budget(fc)
        if self.run is not None:
            self.run.log(global_step, self._history(new, fc), {TAG_STOP_REASON: self.stop_reason} if stop else None)
        self.last_sync_step = global_step
        return stop

    def _account(self, reports: list[Any], new: list[Sample]) -> None:
        self.facts.job_tokens = sum(r.tokens for r in reports)  # type: ignore[union-attr]
        self.facts.job_rows = sum(r.rows for r in reports)  # type: ignore[union-attr]
        for r in reports:
            joules = [s.energy_j for s in r.samples]
            before = self.rank_energy.get(r.rank, 0.0)
            failed = before is None or any(j is None for j in joules)
            self.rank_energy[r.rank] = None if failed or not r.read else before + sum(joules)
            self.rank_time[r.rank] = self.rank_time.get(r.rank, 0.0) + sum(s.time_s for s in r.samples)
            if r.error and self.energy_error is None:
                self.energy_error = f"rank {r.rank}: {r.error}" if len(reports) > 1 else r.error
            if r.warning:
                self.energy_warning = r.warning
        for s in new:
            self.timeline.append((self.last_step, s.time_s, s.steps, s.energy_j))
            self.total_time_s += s.time_s
            if s.energy_j is not None:
                self.total_energy_j += s.energy_j
                self.samples.add(s.steps, s.energy_j, s.time_s)

    def _ensure_prior(self) -> None:
        """Once, on every rank together: the law's prediction, computed on main and broadcast."""
        if self._prior_done:
            return
        self._prior_done = True
        found: list[Any] = [None, ""]
        if self.facts.parallel.is_main:  # type: ignore[union-attr]
            config, why = self.facts.config(self.planned_measured or 1, self.options.warmup_steps)  # type: ignore
            found = list(self.law.prior(config, self.hardware, why))
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            dist.broadcast_object_list(found, src=0)
        self.prior, self.prior_note = found[0], found[1]
        if self.run is not None:
            self.run.log(self.last_step, tags={TAG_FORECAST_PRIOR: self.prior_note})

    def _over_budget(self, fc: Forecast | None) -> bool:
        budget = self.options.budget_j
        if budget is None or fc is None or fc.lower_j <= budget:
            return False
        self.stop_reason = (
            f"energy budget: at step {self.last_step} the forecast's lower bound "
            f"{fc.lower_j / JOULES_PER_KWH:.4g} kWh exceeds the budget {self.options.energy_budget_kwh:g} kWh"
        )
        if self.facts is not None and self.facts.parallel.is_main:
            logger.warning("roofline: stopping training: %s", self.stop_reason)
        return True

    def _history(self, new: list[Sample], fc: Forecast | None) -> dict[str, float]:
        metrics = {M_TIME_S: self.total_time_s}
        interval_s = sum(s.time_s for s in new)
        steps = sum(s.steps for s in new)
        if self.energy_error is None:
            interval_j = sum(s.energy_j for s in new)  # type: ignore[misc]
            metrics.update({M_ENERGY_J: self.total_energy_j, M_ENERGY_INTERVAL_J: interval_j})
            if steps:
                metrics[M_ENERGY_PER_STEP_J] = interval_j / steps
            if interval_s > 0:
                metrics[M_POWER_W] = interval_j / interval_s
        if fc is not None:
            metrics.update(
                {
                    M_ENERGY_FORECAST_J: fc.energy_j,
                    M_ENERGY_FORECAST_LOWER_J: fc.lower_j,
                    M_ENERGY_FORECAST_UPPER_J: fc.upper_j,
                    M_TIME_FORECAST_S: fc.time_s,
                }
            )
        return metrics

    def _warn_missing(self) -> None:
        self._warned = True
        missing = self.facts.missing()  # type: ignore[union-attr]
        if missing:
            _, why = self.facts.config(1, self.options.warmup_steps)  # type: ignore[union-attr]
            logger.warning("roofline: %s from the model; logging energy and time without them", why)
            self.run.log(self.last_step, tags={TAG_CONFIG_WARNING: why})


def budget_tag(options: TrackOptions) -> dict[str, str]:
    """The budget tag of a job held to one."""
    return {} if options.energy_budget_kwh is None else {TAG_ENERGY_BUDGET_KWH: f"{options.energy_budget_kwh:g}"}
