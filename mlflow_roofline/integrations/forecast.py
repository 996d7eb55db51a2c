"""Forecast of a training job's energy and time from its first measured steps.

The window is cut into samples of whole optimizer steps; sample ``i`` holds ``n_i`` steps
and ``E_i`` joules (all devices). Model: the steps of a job are independent draws of one
per-step energy with mean ``mu`` and variance ``sigma^2``, so a sample's per-step mean
``y_i = E_i / n_i`` has variance ``sigma^2 / n_i``. With ``n = sum n_i`` steps and ``E = sum E_i``
joules measured in ``m`` samples:

- ``mu_hat = E / n`` and ``sigma_hat^2 = sum n_i (y_i - mu_hat)^2 / (m - 1)`` (the weighted
  variance; exact for per-step samples, ``n_i = 1``).
- **From the measured steps alone**, the ``R`` remaining steps sum to ``R mu`` with the
  prediction variance ``R sigma^2 + R^2 Var(mu_hat)``, ``Var(mu_hat) = sigma_hat^2 / n``:
  the first term is the noise of the steps still to come, the second the uncertainty of the
  mean they are extrapolated from.
- **With a registered law as prior**: the law's prediction for the planned window,
  ``E_law`` with its 95 % interval ``[L, U]``, becomes a normal prior on ``log mu``:
  ``m0 = log(E_law / N)`` (``N`` planned steps) and ``s0 = (log U - log L) / (2 * 1.96)``.
  The measured mean is a normal observation of ``log mu`` with variance
  ``v = sigma_hat^2 / (n mu_hat^2)`` (delta method). The conjugate update gives the
  posterior ``1 / s^2 = 1 / s0^2 + 1 / v`` and ``m = s^2 (m0 / s0^2 + log(mu_hat) / v)``;
  the forecast uses ``mu = exp(m)`` and ``Var(mu) = mu^2 s^2`` in the formula above. Early
  on the law dominates; as ``n`` grows ``v`` shrinks and the measurements take over.

The forecast of ``energy_j`` for the planned window is ``E + R mu``; its 95 % prediction
interval is ``E + R mu -/+ t * sqrt(R sigma_hat^2 + R^2 Var(mu))`` with ``t`` the 97.5 %
quantile of Student's t with ``m - 1`` degrees of freedom, the lower end never below
``E`` (energy already spent). Time: ``T + R * T / n``.

What the interval promises: for a job whose steps are independent draws of one cost, the
planned window's energy lies inside it with probability 95 %. Over many such jobs it misses
one in twenty (``tests/integrations/test_forecast.py`` checks its coverage); a single job
can neither confirm nor refute it. A cost that changes during the job for a reason outside
the job is not in the model: other processes on shared cores (under contention, what the
``estimate`` meter charges a step is mostly OpenMP threads spinning while a sibling waits
for a core, and it follows the machine's load: 54 mJ a step of a tiny BERT on one thread,
2.3 J on two, on a loaded two-core machine), throttling, later batches that are longer.
No trend or random-walk term is added for it: at the first forecast (K samples, typically
4 or 5) a random walk's variance ``q`` cannot be told from the steps' own noise. Estimated
there by moments (sample variance against half the mean squared successive difference),
``q`` comes out positive for half of the jobs whose steps are independent, and the
``q R^3 / 3`` it adds to the prediction variance widens their interval more than twofold
for 44 % of them (4 samples, 18 steps to go; a simulation), which would make the lower
bound, on which the energy budget stops, say little exactly when it is read first, without
knowing any job's future load. Drift shows in the later forecasts instead: each logging
step forecasts again from every step measured so far. Nor can the model apply when one
sample holds more than its steps: the window opens at the first measured step's beginning,
not before the framework's bookkeeping of the last warm-up step, which made the first
sample the costliest (:mod:`~mlflow_roofline.integrations.measurement`). Pure
numpy/scipy: no MLflow, no torch.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from scipy import stats

Z95 = 1.959963984540054
"""97.5 % quantile of the standard normal: a 95 % interval is +- Z95 standard deviations."""


@dataclasses.dataclass(frozen=True)
class Prior:
    """A law's prediction for the planned window: joules and its 95 % interval."""

    energy_j: float
    lower_j: float
    upper_j: float
    source: str = ""

    def log_mean_sd(self, planned_steps: int) -> tuple[float, float]:
        """Prior mean and standard deviation of log(joules per step)."""
        mean = math.log(self.energy_j / planned_steps)
        sd = (math.log(self.upper_j) - math.log(self.lower_j)) / (2 * Z95)
        return mean, max(sd, 1e-6)


@dataclasses.dataclass(frozen=True)
class Forecast:
    """Forecast of the whole planned window (joules, seconds) and its 95 % interval (joules)."""

    energy_j: float
    lower_j: float
    upper_j: float
    time_s: float
    per_step_j: float
    used_prior: bool


@dataclasses.dataclass
class StepSamples:
    """Running sums of the measured samples: O(1) memory however long the job."""

    steps: int = 0
    energy_j: float = 0.0
    time_s: float = 0.0
    samples: int = 0
    _sum_sq_per_step: float = 0.0  # sum of E_i^2 / n_i

    def add(self, steps: int, energy_j: float, time_s: float) -> None:
        """Record a sample of ``steps`` optimizer steps that took ``energy_j`` joules and ``time_s`` seconds."""
        if steps <= 0:
            raise ValueError(f"a sample holds at least one step, got {steps}")
        self.steps += steps
        self.energy_j += energy_j
        self.time_s += time_s
        self.samples += 1
        self._sum_sq_per_step += energy_j * energy_j / steps

    @property
    def mean_j(self) -> float:
        """Mean joules per step."""
        return self.energy_j / self.steps

    @property
    def variance_j2(self) -> float:
        """Weighted per-step variance sigma_hat^2 (joules^2); needs two samples."""
        spread = self._sum_sq_per_step - self.energy_j**2 / self.steps
        return max(spread, 0.0) / (self.samples - 1)


def forecast(samples: StepSamples, planned_steps: int, prior: Prior | None = None) -> Forecast | None:
    """Forecast the planned window of ``planned_steps`` measured steps, or None before two samples.

    More steps measured than planned leaves nothing to forecast (R = 0).

    Raises:
        ValueError: a non-positive ``planned_steps``.
    """
    if planned_steps <= 0:
        raise ValueError(f"planned_steps must be positive, got {planned_steps}")
    if samples.samples < 2 or samples.steps <= 0:
        return None
    remaining = max(planned_steps - samples.steps, 0)
    sigma2 = samples.variance_j2
    mu, var_mu = samples.mean_j, sigma2 / samples.steps
    used_prior = prior is not None and samples.mean_j > 0
    if used_prior:
        assert prior is not None
        mu, var_mu = _posterior(prior, planned_steps, samples.mean_j, var_mu)
    t = _t975(samples.samples - 1)
    half = t * math.sqrt(remaining * sigma2 + remaining**2 * var_mu)
    centre = samples.energy_j + remaining * mu
    time_s = samples.time_s + remaining * samples.time_s / samples.steps
    return Forecast(centre, max(centre - half, samples.energy_j), centre + half, time_s, mu, used_prior)


@functools.lru_cache(maxsize=4096)
def _t975(dof: int) -> float:
    """97.5 % quantile of Student's t with ``dof`` degrees of freedom (scipy's is slow: cached)."""
    return float(stats.t.ppf(0.975, dof))


def _posterior(prior: Prior, planned_steps: int, mean_j: float, var_mean: float) -> tuple[float, float]:
    """Conjugate normal update of log(per-step joules): posterior mean joules and its variance."""
    m0, s0 = prior.log_mean_sd(planned_steps)
    v = max(var_mean / mean_j**2, 1e-12)
    post_var = 1.0 / (1.0 / s0**2 + 1.0 / v)
    post_mean = post_var * (m0 / s0**2 + math.log(mean_j) / v)
    mu = math.exp(post_mean)
    return mu, mu * mu * post_var
