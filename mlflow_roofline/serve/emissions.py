"""Emissions and cost columns of a prediction: its energy in grams CO2e and in money.

``co2e_g`` (and its interval ``co2e_g_lower``/``co2e_g_upper``) is
``energy_j / 3.6e6 * pue * carbon_intensity``: grams CO2-equivalent of the energy drawn
from the grid; ``cost`` is ``energy_j / 3.6e6 * pue * price_per_kwh`` in the price's
currency. Computed by :func:`mlflow_roofline.core.carbon.emissions`; absent when the
intensity (or the price) is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlflow_roofline.core.carbon import CarbonSettings, emissions
from mlflow_roofline.core.schema import M_CO2E_G, M_COST, M_ENERGY_J

EMISSION_COLUMNS: tuple[str, ...] = (M_CO2E_G, "co2e_g_lower", "co2e_g_upper", M_COST)


def emission_columns(
    energy: Mapping[str, np.ndarray], carbon: CarbonSettings | None, interval: bool = True
) -> dict[str, np.ndarray]:
    """The emission columns of ``energy`` (``energy_j`` and, with ``interval``, its bounds) that ``carbon`` allows.

    Empty, without any arithmetic, when neither the intensity nor the price is known.
    """
    if carbon is None or (not carbon.known and carbon.price_per_kwh is None):
        return {}
    columns: dict[str, np.ndarray] = {}
    cost = None
    for suffix in ("", "_lower", "_upper") if interval else ("",):
        out = emissions(np.asarray(energy[f"{M_ENERGY_J}{suffix}"], dtype=float), carbon)
        if M_CO2E_G in out:
            columns[f"{M_CO2E_G}{suffix}"] = out[M_CO2E_G]
        if not suffix:
            cost = out.get(M_COST)  # of the median energy only
    if cost is not None:
        columns[M_COST] = cost
    return columns


def add_emissions(frame: pd.DataFrame, carbon: CarbonSettings | None, interval: bool = True) -> pd.DataFrame:
    """``frame`` with the emission columns of its ``energy_j`` (and interval) appended where known.

    ``interval=False`` leaves out ``co2e_g_lower``/``co2e_g_upper`` (the energy interval
    times the same factor), for answers whose size matters.
    """
    if carbon is None or (not carbon.known and carbon.price_per_kwh is None):
        return frame
    energy = {name: frame[name].to_numpy(dtype=float) for name in frame.columns if name.startswith(M_ENERGY_J)}
    columns = emission_columns(energy, carbon, interval)
    if not columns:
        return frame
    return pd.concat([frame, pd.DataFrame(columns, index=frame.index)], axis=1)


def unit_factors(carbon: CarbonSettings) -> dict[str, float]:
    """What one joule weighs for the ``carbon`` (g CO2e) and ``cost`` objectives, where known."""
    factors: dict[str, float] = {}
    one = emissions(1.0, carbon)
    for objective, key in (("carbon", M_CO2E_G), (M_COST, M_COST)):
        if key in one:
            factors[objective] = float(one[key])
    return factors
