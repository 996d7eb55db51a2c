"""The known laws synthetic train runs are drawn from: energy, time and speedup (see :mod:`testing.synthetic`).

Energy ``E = exp(log_kappa) * C^alpha_c * M^alpha_m * eta^alpha_eta * exp(psi[strategy])``
(joules), single-device time ``t1 = exp(log_tau) * C^beta_c * M^beta_m`` (seconds), and a
true speedup law S(N) per strategy, with the noise each draw carries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from mlflow_roofline.law.speedup import AMDAHL, CONSTANT, SATURATING_EXP, SpeedupLaw

DEFAULT_HARDWARE = "Synthetic GPU"


def default_speedup_laws() -> dict[str, SpeedupLaw]:
    """Plausible true speedup laws: tp saturates near 2.6x, ddp scales better than fsdp."""
    return {
        "single": SpeedupLaw("single", CONSTANT, {}),
        "ddp": SpeedupLaw("ddp", AMDAHL, {"p": 0.95, "c": 0.02}),
        "fsdp": SpeedupLaw("fsdp", AMDAHL, {"p": 0.9, "c": 0.04}),
        "tp": SpeedupLaw("tp", SATURATING_EXP, {"s_max": 2.6, "k": 0.45}),
    }


@dataclasses.dataclass(frozen=True)
class GroundTruth:
    """The known laws synthetic runs are drawn from.

    Attributes:
        log_kappa: log of the energy law's constant (log joules at C = M = eta = 1).
        alpha_c: energy exponent of the compute proxy C (FLOPs).
        alpha_m: energy exponent of the memory-traffic proxy M (elements).
        alpha_eta: energy exponent of the hardware efficiency eta = S/N.
        psi: log energy offset of each strategy (0 for ``single``).
        speedup_laws: true speedup law S(N) of each strategy.
        log_tau: log of the time law's constant (log seconds).
        beta_c: time exponent of C for single-device jobs.
        beta_m: time exponent of M for single-device jobs.
        noise_sd: standard deviation of log energy noise.
        time_noise_sd: standard deviation of log time noise.
        speedup_jitter: standard deviation of the per-workload log factor on S(N) - 1.
    """

    log_kappa: float = -17.3
    alpha_c: float = 0.75
    alpha_m: float = 0.25
    alpha_eta: float = -1.0
    psi: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {"single": 0.0, "ddp": 0.10, "fsdp": 0.05, "tp": 0.20}
    )
    speedup_laws: Mapping[str, SpeedupLaw] = dataclasses.field(default_factory=default_speedup_laws)
    log_tau: float = -23.6
    beta_c: float = 0.8
    beta_m: float = 0.2
    noise_sd: float = 0.05
    time_noise_sd: float = 0.02
    speedup_jitter: float = 0.15

    def log_energy(
        self, log_c: np.ndarray, log_m: np.ndarray, log_eta: np.ndarray, strategy: Sequence[str]
    ) -> np.ndarray:
        """Noise-free log energy (log joules) of the energy law."""
        psi = np.array([self.psi.get(s, 0.0) for s in strategy], dtype=float)
        return self.log_kappa + self.alpha_c * log_c + self.alpha_m * log_m + self.alpha_eta * log_eta + psi

    def energy_j(
        self, log_c: np.ndarray, log_m: np.ndarray, log_eta: np.ndarray, strategy: Sequence[str]
    ) -> np.ndarray:
        """Noise-free energy of the law, joules (the median of the noisy draws)."""
        return np.exp(self.log_energy(log_c, log_m, log_eta, strategy))

    def log_time_single(self, log_c: np.ndarray, log_m: np.ndarray) -> np.ndarray:
        """Noise-free log seconds of a job on one device (the time law)."""
        return self.log_tau + self.beta_c * log_c + self.beta_m * log_m
