"""The noise floor: how much repeated measurements of one configuration disagree.

A configuration measured several times (a spec's ``repeats: k``, or runs imported twice
from different measurements) gives energies that differ only by measurement noise and
run-to-run variation. Their relative standard deviation, the median over every such
configuration, is the error no law can get below; the fit report puts it beside the
forms' cross-validated errors.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from mlflow_roofline.core.schema import KIND_PARAM_NAMES, M_ENERGY_J, PARAM_NAMES


@dataclasses.dataclass(frozen=True)
class RepeatSpread:
    """The repeat-to-repeat spread of energy.

    Attributes:
        n_configs: configurations with at least two runs.
        median_rel_std_pct: median over them of std(energy) / mean(energy) (sample std), %;
            NaN when no configuration was measured twice.
    """

    n_configs: int
    median_rel_std_pct: float

    def describe(self) -> str:
        """One line for the fit report."""
        if not self.n_configs:
            return "repeats: no configuration measured more than once, noise floor unknown (spec key repeats: k)"
        return (
            f"repeats: {self.n_configs} configurations measured more than once; median relative std of energy "
            f"across repeats {self.median_rel_std_pct:.3g}% (the noise floor no law can beat)"
        )


def repeat_spread(frame: pd.DataFrame, energy: str = M_ENERGY_J) -> RepeatSpread:
    """The spread of ``energy`` (joules) across runs of one configuration (same hardware and every param, the
    kind's too: a decoder is no repeat of the encoder of the same sizes)."""
    keys = ["hardware", *[name for name in (*PARAM_NAMES, *KIND_PARAM_NAMES) if name in frame.columns]]
    grouped = frame.groupby(keys, dropna=False, observed=True)[energy]
    counts = grouped.count()
    rel = (grouped.std(ddof=1) / grouped.mean())[counts >= 2]
    rel = rel[np.isfinite(rel)]
    if rel.empty:
        return RepeatSpread(0, float("nan"))
    return RepeatSpread(len(rel), float(100.0 * rel.median()))
