"""Properties every registered energy law must have, checked on a grid before it is registered.

On the fitted ranges of num_layers, hidden_size, seq_len, batch_size and num_steps
(from half the smallest to :data:`REACH` times the largest value measured, where
served requests for bigger jobs go), for every strategy the law knows at its largest
fitted device count, with eta from the law's own speedup laws:

- energy is finite and positive;
- energy never decreases when num_layers, hidden_size, seq_len or batch_size grows
  (the others held at the geometric middle of their ranges); where every run had one value of the
  size, the problem says so (the law's slope along it was never measured, and the grid still goes
  from half that value to :data:`REACH` times it, where a request for another size would);
- energy grows in proportion to num_steps once fixed costs are amortised: doubling
  the steps at :data:`REACH` times the largest measured step count multiplies energy
  by 2 within :data:`STEP_TOLERANCE` (10 %), at every corner of the size ranges.

A form that breaks one is not registered (:func:`fit.forms.energy_laws.fit_energy_laws`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from mlflow_roofline.fit.forms.fitted_form import LogEnergyLaw
from mlflow_roofline.law.log_features import law_features
from mlflow_roofline.law.speedup import SpeedupLaw

SIZE_FIELDS: tuple[str, ...] = ("num_layers", "hidden_size", "seq_len", "batch_size")
REACH = 4.0
"""How far past the measured range the grid goes, as a multiple of the largest value measured."""
STEP_TOLERANCE = 0.10
"""Allowed relative deviation (fraction, 0.10 = 10 %) of energy from doubling when num_steps doubles."""
MONOTONE_TOLERANCE = 1e-9
"""Largest relative drop in energy (fraction of the smaller size's energy) still taken as not decreasing."""


def _energy(
    law: LogEnergyLaw,
    speedup_laws: Mapping[str, SpeedupLaw],
    sizes: Mapping[str, np.ndarray],
    strategy: str,
    devices: int,
) -> np.ndarray:
    """Energy in joules of each row of ``sizes`` under ``strategy`` on ``devices`` devices."""
    n = len(sizes["num_steps"])
    ns = np.full(n, float(devices))
    features = law_features(
        **{k: np.asarray(v, dtype=float) for k, v in sizes.items()},
        num_devices=ns,
        speedup=np.asarray(speedup_laws[strategy](ns), dtype=float),
        strategy=np.full(n, strategy, dtype=object),
    )
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return np.exp(law.mean(features))


def _axis(lo: float, hi: float, count: int = 8) -> np.ndarray:
    return np.unique(np.round(np.geomspace(max(1.0, lo / 2.0), hi * REACH, count)))


def _monotone_problems(
    law: LogEnergyLaw,
    speedup: Mapping[str, SpeedupLaw],
    ranges: Mapping[str, Sequence[float]],
    strategy: str,
    devices: int,
) -> list[str]:
    middle = {f: float(np.round(np.sqrt(ranges[f][0] * ranges[f][1]))) for f in (*SIZE_FIELDS, "num_steps")}
    problems = []
    for field in SIZE_FIELDS:
        values = _axis(float(ranges[field][0]), float(ranges[field][1]))
        sizes = {f: np.full(len(values), middle[f]) for f in middle}
        sizes[field] = values
        energy = _energy(law, speedup, sizes, strategy, devices)
        if not np.all(np.isfinite(energy) & (energy > 0)):
            problems.append(f"energy not finite and positive along {field} ({strategy}{_unmeasured(ranges, field)})")
        elif np.any(np.diff(energy) < -MONOTONE_TOLERANCE * energy[:-1]):
            problems.append(f"energy decreases as {field} grows ({strategy}{_unmeasured(ranges, field)})")
    return problems


def _unmeasured(ranges: Mapping[str, Sequence[float]], field: str) -> str:
    """Why a check along ``field`` can fail though the runs do not contradict it: they held ``field`` fixed,
    so the law's slope along it is not measured (empty when the runs vary ``field``)."""
    low, high = float(ranges[field][0]), float(ranges[field][1])
    return f"; every run has {field} {low:g}: the law's slope along it is not measured" if low == high else ""


def _step_problems(
    law: LogEnergyLaw,
    speedup: Mapping[str, SpeedupLaw],
    ranges: Mapping[str, Sequence[float]],
    strategy: str,
    devices: int,
) -> list[str]:
    corners = np.array(
        list(itertools.product(*[(max(1.0, ranges[f][0] / 2.0), ranges[f][1] * REACH) for f in SIZE_FIELDS]))
    )
    steps = np.round(ranges["num_steps"][1] * REACH)
    sizes = {f: corners[:, i] for i, f in enumerate(SIZE_FIELDS)}
    once = _energy(law, speedup, {**sizes, "num_steps": np.full(len(corners), steps)}, strategy, devices)
    twice = _energy(law, speedup, {**sizes, "num_steps": np.full(len(corners), 2 * steps)}, strategy, devices)
    if not np.all(np.isfinite(once) & (once > 0) & np.isfinite(twice)):
        return [f"energy not finite and positive at the corners of the size ranges ({strategy})"]
    ratio = twice / once
    if np.any(np.abs(ratio / 2.0 - 1.0) > STEP_TOLERANCE):
        return [f"doubling num_steps multiplies energy by {ratio.min():.3g} to {ratio.max():.3g}, not 2 ({strategy})"]
    return []


def sanity_problems(
    law: LogEnergyLaw, speedup_laws: Mapping[str, SpeedupLaw], ranges: Mapping[str, Sequence[float]]
) -> list[str]:
    """What the energy ``law`` gets wrong of the properties in the module docstring (empty: none)."""
    problems: list[str] = []
    max_devices = int(ranges["num_devices"][1]) if "num_devices" in ranges else 1
    for strategy in sorted(speedup_laws):
        devices = 1 if strategy == "single" else max(2, max_devices)
        problems += _monotone_problems(law, speedup_laws, ranges, strategy, devices)
        problems += _step_problems(law, speedup_laws, ranges, strategy, devices)
    return problems
