"""What a tracked job does at a sync point: gather every rank's samples, log, forecast, judge the budget.

:class:`SyncPoint` holds the methods :class:`~mlflow_roofline.integrations.tracker.JobTracker`
runs at a logging step (and at the K-th measured step and the last one): it adds the
gathered samples to the job's totals (joules, seconds, per rank), logs the history
(``energy_j``, ``energy_interval_j``, ``energy_per_step_j``, ``power_w``, ``time_s``) and
the forecast, and says whether the forecast's lower bound exceeds the energy budget.
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
from mlflow_roofline.integrations.energy_window import RankWindow, Sample, combine, gather
from mlflow_roofline.integrations.forecast import Forecast, Prior, StepSamples, forecast
from mlflow_roofline.integrations.job_facts import JobFacts
from mlflow_roofline.integrations.options import JOULES_PER_KWH, TrackOptions

logger = logging.getLogger("mlflow_roofline.integrations.tracker")


class SyncPoint:
    """The sync-point half of a job tracker: the state it reads and writes, and its steps."""

    options: TrackOptions
    facts: JobFacts | None
    window: RankWindow | None
    run: Any  # RunLog on the main process
    law: Any  # LawLoader on the main process
    hardware: str
    samples: StepSamples
    timeline: list[tuple[int, float, int, float | None]]
    rank_energy: dict[int, float | None]
    rank_time: dict[int, float]
    energy_error: str | None
    energy_warning: str | None
    total_energy_j: float
    total_time_s: float
    measured: int
    last_step: int
    last_sync_step: int
    prior: Prior | None
    prior_note: str
    last_forecast: Forecast | None
    stop_reason: str
    _prior_done: bool
    _warned: bool

    @property
    def planned_measured(self) -> int | None:
        """Measured steps the job plans (its planned steps after warm-up)."""
        planned = self.facts.planned_steps if self.facts else None
        return None if planned is None else max(planned - self.options.warmup_steps, 1)

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
