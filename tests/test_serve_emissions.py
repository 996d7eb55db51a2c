"""emission_columns: the columns add_emissions appends, from arrays; nothing when no figure is known."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_roofline.core.carbon import CarbonSettings
from mlflow_roofline.serve.emissions import add_emissions, emission_columns

ENERGY = {
    "energy_j": np.array([3.6e6, 7.2e6]),
    "energy_j_lower": np.array([1.8e6, 3.6e6]),
    "energy_j_upper": np.array([7.2e6, 1.44e7]),
}


def test_nothing_known_gives_no_columns() -> None:
    assert emission_columns(ENERGY, None) == {}
    assert emission_columns(ENERGY, CarbonSettings()) == {}
    assert list(add_emissions(pd.DataFrame(ENERGY), CarbonSettings()).columns) == list(ENERGY)


def test_known_figures_give_the_same_columns_as_add_emissions() -> None:
    carbon = CarbonSettings(intensity_g_per_kwh=400.0, source="option", pue=1.5, price_per_kwh=0.2)
    columns = emission_columns(ENERGY, carbon)
    assert list(columns) == ["co2e_g", "co2e_g_lower", "co2e_g_upper", "cost"]
    np.testing.assert_allclose(columns["co2e_g"], [600.0, 1200.0])  # 1 and 2 kWh x 1.5 x 400 g
    np.testing.assert_allclose(columns["cost"], [0.3, 0.6])
    framed = add_emissions(pd.DataFrame(ENERGY), carbon)
    pd.testing.assert_frame_equal(framed, pd.concat([pd.DataFrame(ENERGY), pd.DataFrame(columns)], axis=1))
    price_only = emission_columns(ENERGY, CarbonSettings(price_per_kwh=0.1), interval=False)
    assert list(price_only) == ["cost"]
