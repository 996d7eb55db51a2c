"""What a fit does not trust: measurements and fitted exponents a physical reading rules out.

Each finding is a sentence for the fit report and the fit run's description; none stops the
fit (nothing measured is thrown away, the run still logs):

- a parallel run whose measured speedup exceeds its device count by more than
  :data:`SUPERLINEAR_TOLERANCE` (superlinear scaling: on shared CPUs, contention or noise);
- repeats of one configuration that disagree by more than :data:`REPEAT_SPREAD_LIMIT_PCT`
  (median relative std of energy): differences smaller than that are noise;
- an energy exponent of the wrong sign (alpha_C or alpha_M below zero: energy falling as work
  grows) and a time law that falls with size (beta_C + beta_M below zero).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.fit.runs.noise import RepeatSpread

SUPERLINEAR_TOLERANCE = 0.10
"""A measured speedup S above N * (1 + this) on N devices is flagged as superlinear."""
REPEAT_SPREAD_LIMIT_PCT = 10.0
"""Repeats whose median relative std of energy (%) exceeds this are flagged as disagreeing."""


def superlinear_note(frame: pd.DataFrame) -> str | None:
    """The runs whose measured speedup exceeds their device count, in one sentence (None when none does)."""
    if "speedup" not in frame or "eta_source" not in frame:
        return None
    measured = frame[(frame["eta_source"] == "measured") & (frame["num_devices"] > 1)]
    speedup = measured["speedup"].to_numpy(dtype=float)
    n = measured["num_devices"].to_numpy(dtype=float)
    above = np.isfinite(speedup) & (speedup > n * (1.0 + SUPERLINEAR_TOLERANCE))
    if not above.any():
        return None
    worst = int(np.argmax(np.where(above, speedup / n, -np.inf)))
    return (
        f"{int(above.sum())} of {len(measured)} parallel runs measured a speedup above their device count "
        f"(up to {speedup[worst]:.3g}x on {int(n[worst])} devices; more than {SUPERLINEAR_TOLERANCE:.0%} over N): "
        "superlinear scaling is contention or noise on a shared machine, not the strategy; their efficiency "
        "and the speedup laws fitted on them are not to be trusted"
    )


def repeat_note(noise: RepeatSpread) -> str | None:
    """A sentence when repeats of one configuration disagree beyond :data:`REPEAT_SPREAD_LIMIT_PCT`."""
    if not noise.n_configs or not noise.median_rel_std_pct > REPEAT_SPREAD_LIMIT_PCT:
        return None
    return (
        f"repeats disagree: median relative std of energy {noise.median_rel_std_pct:.3g}% over "
        f"{noise.n_configs} repeated configurations (above {REPEAT_SPREAD_LIMIT_PCT:g}%): differences between "
        "configurations smaller than that are noise (measure longer runs or more repeats)"
    )


def sign_notes(exponents: Mapping[str, float], time_betas: tuple[float, float]) -> list[str]:
    """Sentences for energy exponents below zero (``exponents``: label -> value) and a time law that falls
    with size (``time_betas``: beta_C, beta_M of the single-device time law)."""
    notes = [
        f"{label} = {value:.3g} < 0: energy falling as the work grows is not physical (collinear proxies, or "
        "too narrow a range of sizes); read the exponents, not only the errors"
        for label, value in exponents.items()
        if np.isfinite(value) and value < 0
    ]
    beta_c, beta_m = time_betas
    if np.isfinite(beta_c + beta_m) and beta_c + beta_m < 0:
        notes.append(
            f"the time law falls with size (beta_C + beta_M = {beta_c + beta_m:.3g} < 0): larger models predicted "
            "faster, which no hardware does; its speedups and time predictions are not to be trusted"
        )
    return notes
