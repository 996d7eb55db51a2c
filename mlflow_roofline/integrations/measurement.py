"""The measurement of a user's training loop, shared by the Trainer and Lightning callbacks and the Accelerate hook.

Life of a job, on every process: :meth:`JobMeasurement.begin` builds the meter (and, on
the main process, opens or joins the MLflow run); :meth:`JobMeasurement.step_end` after
each optimizer step opens the energy window once ``warmup_steps`` are done, cuts it into
samples, and at each logging step (and at the K-th measured step) reaches a sync point:
it gathers every rank's samples, adds them to the job's totals (joules, seconds, per
rank), logs the history (``energy_j``, ``energy_interval_j``, ``energy_per_step_j``,
``power_w``, ``time_s``) and the forecast, and says whether the forecast's lower bound
exceeds the energy budget; a job that runs past its planned steps gets one warning and
is measured on. :meth:`JobMeasurement.end` closes the window at the last step
and logs the run's summary in the train run's schema.

Where the window opens: an adapter whose framework says when a step begins (the Trainer's
``on_step_begin``, Lightning's ``on_train_batch_start``; ``step_begins=True``) calls
:meth:`JobMeasurement.step_begin`, and the window opens there, at the first measured
step's beginning, and resumes there after each pause: a sync point, or a step after which
the framework does its own bookkeeping (``step_end(pause=True)``: the Trainer's logging,
evaluation, checkpoint, which run after every callback's ``on_step_end``). That
bookkeeping is no step's energy. Opened at the last warm-up step's end, as it was, the
window charged the Trainer's logging of that step to the first measured step, which the
first forecast extrapolated over the whole job (and each logging step's to the step after
it). Between two steps without a pause the window stays open (a cut: two counter reads),
so the loading of the next batch is in its step's sample, and a coarse counter's update
that lands between steps still reaches a sample: the samples sum to the window. An adapter
without a step-begin signal (the Accelerate hook, whose loop is the user's) keeps the
window open from one ``step_end`` to the next: every sample, the first one included, spans
the same part of the loop.

The summary:

- start: ``roofline.run_type=train``, ``roofline.source``, the resolved device, the
  meter and the budget;
- end: the train params as measured (``num_steps`` = the steps the window held), the
  proxies (:func:`~mlflow_roofline.core.proxies.proxy_metrics`), the train tags with
  ``roofline.config_hash`` / ``workload_hash`` computed as for a train run
  (:func:`~mlflow_roofline.train.run_logging.train_tags`), the window's totals through
  :func:`~mlflow_roofline.tracking.energy_logging.measurement_metrics` (as ``measure`` and
  ``track_energy`` log theirs), per-rank figures, and the power timeline artifact.

Only the main process talks to MLflow, through its :class:`JobRunLog`
(:class:`~mlflow_roofline.integrations.run_log.RunLog`): the run the adapter names
(:class:`RunToJoin`), else the active run, else one of its own. Importing this module
imports no MLflow.
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
from collections.abc import Callable, Mapping
from typing import Protocol

import torch.distributed as dist

from mlflow_roofline.core.carbon import J_PER_KWH
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.proxies import proxy_metrics
from mlflow_roofline.core.schema import (
    DEVICES,
    KIND_PROXY_METRICS,
    M_ENERGY_FORECAST_J,
    M_ENERGY_FORECAST_LOWER_J,
    M_ENERGY_FORECAST_UPPER_J,
    M_ENERGY_INTERVAL_J,
    M_ENERGY_J,
    M_ENERGY_PER_STEP_J,
    M_POWER_W,
    M_SAMPLES_PER_S,
    M_STEP_TIME_S,
    M_TIME_FORECAST_S,
    M_TIME_S,
    P_METER,
    TAG_CONFIG_WARNING,
    TAG_DEVICE,
    TAG_ENERGY_BUDGET_KWH,
    TAG_ENERGY_ERROR,
    TAG_ENERGY_SCOPE,
    TAG_FORECAST_PRIOR,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
    TAG_SOURCE,
    TAG_STOP_REASON,
)
from mlflow_roofline.energy import EnergyMeter, Measurement, make_meter
from mlflow_roofline.energy.devices import DEVICE_KINDS
from mlflow_roofline.energy.live import LiveEnergy
from mlflow_roofline.integrations.energy_window import RankReport, RankWindow, Sample, combine, gather
from mlflow_roofline.integrations.forecast import Forecast, Prior, StepSamples, forecast
from mlflow_roofline.integrations.job_facts import JobFacts
from mlflow_roofline.integrations.options import TrackOptions
from mlflow_roofline.integrations.safety import describe
from mlflow_roofline.train.device import hardware_name

__all__ = [
    "ESTIMATE_RESCAN_S",
    "TIMELINE_ARTIFACT",
    "JobMeasurement",
    "JobRunLog",
    "PriorSource",
    "RunToJoin",
    "timeline_csv",
]

logger = logging.getLogger(__name__)

ESTIMATE_RESCAN_S = 10.0
"""Seconds between two listings of live descendants by the ``estimate`` meter inside a loop.

Listing them walks ``/proc`` (milliseconds on a busy machine); the default once a second
costs more than the per-step cuts themselves. CPU time of descendants already listed is
still read at every cut; a new one (a data-loader worker) is found within this time, and
its CPU time so far lands in the sample where it is found."""

TIMELINE_ARTIFACT = "roofline/power_timeline.csv"

TimelineRow = tuple[int, float, int, float | None]
"""One sample of the window: global step at its end, seconds, optimizer steps, joules (None: failed)."""


@dataclasses.dataclass(frozen=True)
class RunToJoin:
    """A run the framework's own MLflow logger opened: the job logs into it (``tracking_uri`` None: MLflow's current
    store)."""

    run_id: str
    tracking_uri: str | None = None


class JobRunLog(Protocol):
    """The MLflow run a job's measurements go to (:class:`~mlflow_roofline.integrations.run_log.RunLog`)."""

    def log(
        self, step: int, metrics: Mapping[str, float] | None = None, tags: Mapping[str, str] | None = None
    ) -> None: ...

    def log_params(self, params: Mapping[str, str]) -> None: ...

    def log_text(self, text: str, path: str) -> None: ...

    def finish(self, failed: bool = False, error: BaseException | None = None) -> None: ...

    def abandon(self, reason: str) -> None: ...

    def watch_energy(self, readings: LiveEnergy) -> None: ...


class PriorSource(Protocol):
    """Where the forecast's prior comes from (:class:`~mlflow_roofline.integrations.law_prior.LawLoader`)."""

    def prior(self, config: TrainConfig | None, hardware: str, why_no_config: str = "") -> tuple[Prior | None, str]: ...


class JobMeasurement:
    """Measures one training job; one instance per process, driven by an adapter."""

    def __init__(
        self, options: TrackOptions, source: str, step_begins: bool = False, join: RunToJoin | None = None
    ) -> None:
        self.options = options
        self.source = source
        self.step_begins = step_begins  # the adapter calls step_begin: the window (re)opens there
        self.join = join  # the run to log into (main process), else the active run, else an own one
        self.facts: JobFacts | None = None
        self.window: RankWindow | None = None
        self.run: JobRunLog | None = None  # on the main process
        self.law: PriorSource | None = None  # on the main process
        self.hardware = ""
        self.samples = StepSamples()
        self.timeline: list[TimelineRow] = []
        self.rank_energy: dict[int, float | None] = {}
        self.rank_time: dict[int, float] = {}
        self.energy_error: str | None = None
        self.energy_warning: str | None = None
        self.total_energy_j = 0.0
        self.total_time_s = 0.0
        self.measured = 0  # measured optimizer steps so far
        self.last_step = 0
        self.last_sync_step = -1  # global step of the last history point
        self.prior: Prior | None = None
        self.prior_note = ""
        self.last_forecast: Forecast | None = None
        self.stop_reason = ""
        self._opened = False
        self._closed = False
        self._finished = False  # the meter closed and the run ended (or let go)
        self._paused = False  # (re)opens at the next step_begin
        self._in_sample = 0
        self._prior_done = False
        self._warned = False

    # -- lifecycle ---------------------------------------------------------------------
    def begin(self, facts: JobFacts) -> None:
        """Build the meter and, on the main process, open or join the run and tag it."""
        self.facts = facts
        device = facts.device if facts.device in DEVICES else "auto"
        indices = DEVICE_KINDS[device].current_indices() if device in DEVICE_KINDS else None
        meter = make_meter(self.options.meter, device=device, gpu_indices=indices)
        if hasattr(meter, "rescan_s"):  # estimate: the window is cut every step; list descendants less often
            meter.rescan_s = max(meter.rescan_s, ESTIMATE_RESCAN_S)
        reads = meter.scope != "node" or facts.parallel.local_rank == 0
        self.window = RankWindow(meter, reads)
        self.hardware = hardware_name(device if device != "auto" else "cpu")
        if facts.parallel.is_main:
            self._open_run(meter)
        self._warn_all_warmup(facts)
        if self.options.warmup_steps == 0:
            self._resume_next()

    def _open_run(self, meter: EnergyMeter) -> None:
        """Open or join the run and start loading the law; a store that fails: one warning, no run."""
        # Both import MLflow (seconds): only the main process, which talks to MLflow, pays for it.
        from mlflow_roofline.integrations.law_prior import LawLoader
        from mlflow_roofline.integrations.run_log import RunLog, store_failure

        try:
            join = self.join
            run_id, uri = (join.run_id, join.tracking_uri) if join is not None else (None, None)
            name = self.options.run_name or (self.facts.run_name(self.source) if self.facts else None)
            self.run = RunLog(self.options.experiment, name, run_id, uri)
        except Exception as exc:  # the store cannot be used: training is the user's, never ours to stop
            logger.warning("roofline: %s; training goes on, not measured", store_failure(exc))
            return
        meter.leave_out(self.run.watchdog_pid)  # its CPU time is not the training's
        self.law = LawLoader(self.options.model_uri)
        self.run.log(0, tags=self.start_tags(meter))

    def batch_seen(self, rows: int, seq_len: int) -> None:
        """Count a training micro-batch of ``rows`` samples padded to ``seq_len`` tokens."""
        if self.facts is not None:
            self.facts.rows += rows
            self.facts.tokens += rows * seq_len

    def step_begin(self) -> None:
        """Before an optimizer step (adapters with ``step_begins``): open or resume a paused window."""
        if self._paused and not self._closed:
            self._paused = False
            self._open()

    def step_end(self, global_step: int, should_log: bool, stopping: bool = False, pause: bool = False) -> bool:
        """After optimizer step ``global_step``: True when the energy budget says stop now.

        ``stopping``: the job ends after this step anyway (another callback stopped it).
        ``pause``: the framework does its own bookkeeping after this step (logging, evaluation,
        a checkpoint): with ``step_begins`` the window pauses until the next :meth:`step_begin`.
        """
        self.last_step = global_step
        if self._closed or self.window is None:
            return False
        if not self._opened:
            if global_step >= self.options.warmup_steps and not self._paused:
                self._resume_next()
            return False
        if self._paused:  # a step that never began (not from an adapter with step_begins): not measured
            return False
        self.measured += 1
        self._in_sample += 1
        planned = self.planned_measured
        last = stopping
        at_plan = planned is not None and self.measured == planned
        if planned is not None and self.measured == planned + 1:
            self._past_plan(planned)
        sync = should_log or last or at_plan or self.measured == self.options.forecast_after_steps
        pausing = sync or (pause and self.step_begins)
        if pausing or self._in_sample >= self.options.sample_steps:
            if pausing:
                self._drain()  # the queued kernels belong to this sample, not to the pause
            self.window.cut(self._in_sample, reopen=not pausing)
            self._in_sample = 0
        if not sync:
            if pausing:
                self._paused = True
            return False
        stop = self._sync(global_step)
        if last or stop:
            self._closed = True
        else:
            self._resume_next()
        return stop

    def end(self) -> None:
        """At the end of training: close the window (a last sync if steps are pending), log the run.

        What fails here abandons the job (its own run ends FAILED with the reason) and is raised."""
        if self._finished:
            return
        try:
            if self.window is not None and self._opened and not self._closed:
                self._drain()
                self.window.close(self._in_sample)  # the time after the last step is not measured
                self._in_sample = 0
                if self.window.pending:  # the same on every rank: steps are counted alike
                    self._sync(self.last_step)
                self._closed = True
            if self.run is not None:
                self._log_summary(self.run)
        except Exception as exc:
            self.abandon(f"logging the end of training failed ({describe(exc)})")
            raise
        finally:
            self._finish(lambda run: run.finish())

    def abort(self, error: BaseException | None = None) -> None:
        """After the loop raised ``error``: no collective (other ranks may be gone); end an own run
        KILLED after a ``KeyboardInterrupt``, else FAILED, with the reason."""
        self._finish(lambda run: run.finish(failed=True, error=error))

    def abandon(self, reason: str) -> None:
        """Our own code failed (not the training): stop measuring; an own run ends FAILED with ``reason``."""
        self._closed = True  # no more steps counted
        self._finish(lambda run: run.abandon(reason))

    def _finish(self, end_run: Callable[[JobRunLog], None]) -> None:
        """Close the meter and end the run with ``end_run`` (once; later calls do nothing)."""
        if self._finished:
            return
        self._finished = True
        try:
            if self.window is not None:
                self.window.live.close_meter()  # not while the system metrics read the window
        finally:
            if self.run is not None:
                end_run(self.run)

    def _past_plan(self, planned: int) -> None:
        """The job runs past its planned steps: say so once (main process), and measure on."""
        if self.facts is not None and self.facts.parallel.is_main:
            logger.warning(
                "roofline: step %d runs past the %s planned steps; measuring on "
                "(the forecast and the budget cover the planned steps)",
                self.last_step,
                self.facts.planned_steps,
            )

    def unmeasured_reason(self) -> str:
        """Why no step was measured: the job ended within its warm-up."""
        return (
            f"no step was measured: the job ended after {self.last_step} optimizer steps, "
            f"within warmup_steps={self.options.warmup_steps}"
        )

    def _warn_all_warmup(self, facts: JobFacts) -> None:
        """At the start: a warm-up covering every planned step leaves nothing to measure (said once, on main)."""
        planned = facts.planned_steps
        if facts.parallel.is_main and planned is not None and self.options.warmup_steps >= planned:
            logger.warning(
                "roofline: warmup_steps=%d covers all %d planned steps: no step will be measured "
                "(the run will hold no energy)",
                self.options.warmup_steps,
                planned,
            )

    @property
    def planned_measured(self) -> int | None:
        """Measured steps the job plans (its planned steps after warm-up)."""
        planned = self.facts.planned_steps if self.facts else None
        return None if planned is None else max(planned - self.options.warmup_steps, 1)

    def start_tags(self, meter: EnergyMeter) -> dict[str, str]:
        """The tags known before training: what kind of run this is, where it runs, how it is measured."""
        tags = {
            TAG_RUN_TYPE: "train",
            TAG_SOURCE: self.source,
            TAG_HARDWARE: self.hardware,
            TAG_ENERGY_SCOPE: meter.scope,
            **budget_tag(self.options),
        }
        if self.facts is not None and self.facts.device:
            tags[TAG_DEVICE] = self.facts.device
        return tags

    # -- the window ----------------------------------------------------------------------
    def _resume_next(self) -> None:
        """Open (or resume) the window for the next step: at its beginning if the adapter says when, else now."""
        if self.step_begins:
            self._paused = True
        else:
            self._open()

    def _open(self) -> None:
        assert self.window is not None
        self._drain()  # what the device still runs from before (the warm-up, the bookkeeping) stays out
        self.window.open()
        if not self._opened and self.run is not None and self.window.reads:
            self.run.watch_energy(self.window.live)  # this process's devices, in the System metrics tab
        self._opened = True

    def _drain(self) -> None:
        """Wait for the device's queued work (an accelerator's), so a window edge is where the work is."""
        if self.facts is not None and self.facts.device in DEVICE_KINDS:
            DEVICE_KINDS[self.facts.device].synchronize()

    # -- a sync point --------------------------------------------------------------------
    def _sync(self, global_step: int) -> bool:
        """Gather the samples since the last sync, log the history and the forecast; the stop decision."""
        assert self.window is not None and self.facts is not None
        report = self.window.take(self.facts.parallel.rank, self.facts.tokens, self.facts.rows)
        reports = gather(report)
        new = combine(reports)
        self._account(self.facts, reports, new)
        if self.facts.parallel.is_main and not self._warned and self.measured >= 1:
            self._warn_missing(self.facts)
        fc = None
        if self.options.forecast and self.measured >= self.options.forecast_after_steps:
            self._ensure_prior(self.facts)
            if self.energy_error is None and self.planned_measured is not None:
                fc = forecast(self.samples, self.planned_measured, self.prior)
        self.last_forecast = fc or self.last_forecast
        stop = self._over_budget(fc)
        if self.run is not None:
            self.run.log(global_step, self._history(new, fc), {TAG_STOP_REASON: self.stop_reason} if stop else None)
        self.last_sync_step = global_step
        return stop

    def _account(self, facts: JobFacts, reports: list[RankReport], new: list[Sample]) -> None:
        facts.job_tokens = sum(r.tokens for r in reports)
        facts.job_rows = sum(r.rows for r in reports)
        for r in reports:
            joules = [s.energy_j for s in r.samples]
            before = self.rank_energy.get(r.rank, 0.0)
            if before is None or not r.read or any(j is None for j in joules):
                self.rank_energy[r.rank] = None
            else:
                self.rank_energy[r.rank] = before + sum(j for j in joules if j is not None)
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

    def _ensure_prior(self, facts: JobFacts) -> None:
        """Once, on every rank together: the law's prediction, computed on main and broadcast."""
        if self._prior_done:
            return
        self._prior_done = True
        found: list[Prior | str | None] = [None, ""]
        if facts.parallel.is_main and self.law is not None:
            config, why = facts.config(self.planned_measured or 1, self.options.warmup_steps)
            found = list(self.law.prior(config, self.hardware, why))
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            dist.broadcast_object_list(found, src=0)
        prior, note = found
        self.prior = prior if isinstance(prior, Prior) else None
        self.prior_note = str(note)
        if self.run is not None:
            self.run.log(self.last_step, tags={TAG_FORECAST_PRIOR: self.prior_note})

    def _over_budget(self, fc: Forecast | None) -> bool:
        budget = self.options.budget_j
        if budget is None or fc is None or fc.lower_j <= budget:
            return False
        self.stop_reason = (
            f"energy budget: at step {self.last_step} the forecast's lower bound "
            f"{fc.lower_j / J_PER_KWH:.4g} kWh exceeds the budget {self.options.energy_budget_kwh:g} kWh"
        )
        if self.facts is not None and self.facts.parallel.is_main:
            logger.warning("roofline: stopping training: %s", self.stop_reason)
        return True

    def _history(self, new: list[Sample], fc: Forecast | None) -> dict[str, float]:
        metrics = {M_TIME_S: self.total_time_s}
        interval_s = sum(s.time_s for s in new)
        steps = sum(s.steps for s in new)
        if self.energy_error is None:
            interval_j = sum(s.energy_j or 0.0 for s in new)  # no None: a failed reading sets energy_error
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

    def _warn_missing(self, facts: JobFacts) -> None:
        self._warned = True
        if facts.missing():
            _, why = facts.config(1, self.options.warmup_steps)
            logger.warning("roofline: %s from the model; logging energy and time without them", why)
            if self.run is not None:
                self.run.log(self.last_step, tags={TAG_CONFIG_WARNING: why})

    # -- the summary ---------------------------------------------------------------------
    def _log_summary(self, run: JobRunLog) -> None:
        """Log the run's params, proxies, totals, per-rank figures, tags and power timeline."""
        # Both import MLflow (seconds): deferred to the main process's end of training.
        from mlflow_roofline.tracking.energy_logging import measurement_metrics, measurement_tags
        from mlflow_roofline.train.run_logging import train_tags

        assert self.facts is not None and self.window is not None
        facts = self.facts
        steps = self.samples.steps if self.energy_error is None else sum(r[2] for r in self.timeline)
        if steps == 0:
            why = self.unmeasured_reason()
            logger.warning("roofline: %s; no energy logged", why)
            run.log(self.last_step, tags={TAG_ENERGY_ERROR: why})
            return
        config, why = facts.config(steps, self.options.warmup_steps)
        params = {k: str(v) for k, v in facts.values(steps, self.options.warmup_steps).items()}
        unread = facts.kind_unread  # left unlogged: a default would be a guess presented as fact
        logged = {k: v for k, v in (config.to_params() if config else params).items() if k not in unread}
        run.log_params({**logged, P_METER: self.options.meter})
        measurement = Measurement(
            self.total_energy_j if self.energy_error is None else None,
            {},
            self.total_time_s,
            self.window.meter.source,
            self.energy_error,
            self.energy_warning,
        )
        metrics = {**measurement_metrics(measurement), **self._throughput(facts, steps)}
        if self.last_sync_step == self.last_step:  # the history's last point already holds the totals
            metrics.pop(M_ENERGY_J, None)
            metrics.pop(M_TIME_S, None)
        tags = measurement_tags(measurement, self.hardware)
        if config is not None:
            proxies = proxy_metrics(config)
            if unread:  # the proxies beyond the paper's need the model's kind
                proxies = {k: v for k, v in proxies.items() if k not in KIND_PROXY_METRICS}
                tags[TAG_CONFIG_WARNING] = (
                    f"could not read {'; '.join(facts.kind_unknown)}: left out, with {', '.join(KIND_PROXY_METRICS)}"
                )
            metrics.update(proxies)
            tags.update(train_tags(config, self.hardware))
        else:
            tags[TAG_CONFIG_WARNING] = why
        for rank, seconds in self.rank_time.items():
            metrics[f"{M_TIME_S}_rank_{rank}"] = seconds
            energy = self.rank_energy.get(rank)
            if energy is not None:
                metrics[f"{M_ENERGY_J}_rank_{rank}"] = energy
        run.log(self.last_step, metrics, tags)
        run.log_text(timeline_csv(self.timeline), TIMELINE_ARTIFACT)

    def _throughput(self, facts: JobFacts, steps: int) -> dict[str, float]:
        per_step = [seconds / n for _, seconds, n, _ in self.timeline if n > 0]
        metrics = {M_STEP_TIME_S: statistics.median(per_step)} if per_step else {}
        if facts.batch_size and self.total_time_s > 0:
            metrics[M_SAMPLES_PER_S] = facts.batch_size * steps / self.total_time_s
        return metrics


def budget_tag(options: TrackOptions) -> dict[str, str]:
    """The budget tag of a job held to one."""
    return {} if options.energy_budget_kwh is None else {TAG_ENERGY_BUDGET_KWH: f"{options.energy_budget_kwh:g}"}


def timeline_csv(rows: list[TimelineRow]) -> str:
    """The power timeline: one line per sample of the window.

    ``rows`` are (global step at the sample's end, seconds, optimizer steps, joules or None);
    the CSV adds the time since the window opened and the sample's mean power in watts.
    """
    lines = ["global_step,t_end_s,duration_s,steps,energy_j,power_w"]
    t = 0.0
    for step, duration, steps, energy in rows:
        t += duration
        watts = "" if energy is None or duration <= 0 else f"{energy / duration:.6g}"
        joules = "" if energy is None else f"{energy:.6g}"
        lines.append(f"{step},{t:.6f},{duration:.6f},{steps},{joules},{watts}")
    return "\n".join(lines) + "\n"
