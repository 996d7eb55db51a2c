"""Carbon beyond the meter: a job's share of its hardware's embodied carbon, and its electricity's water.

Two formulas, on numbers or numpy arrays alike (the result has the inputs' shape):

- ``embodied_co2e_g = device_hours x manufacturing_g / life_hours``, with ``device_hours =
  num_devices x time_s / 3600``: the job holds ``num_devices`` GPUs for ``time_s`` seconds, and
  each hour of a GPU's service life carries an equal share of what making it (and its share of
  the server) emitted. Amortised over the life, not the hours of use: idle hours carry their
  share too, so a cluster used half the time makes each job's share look half as large as it is.
- ``water_l = energy_kwh x (site_wue + pue x grid_water)``: the site's water use effectiveness
  (The Green Grid's WUE) is litres per kWh of **IT** energy, so it multiplies the measured
  energy as is; the grid's water intensity is litres per kWh **generated**, and the facility
  draws ``pue`` times the IT energy from the grid, so it multiplies ``energy_kwh x pue``. This is
  the form of Li et al., "Making AI Less Thirsty" (arXiv:2304.03271) and of EcoLogits.

The figures come from the shipped tables (:mod:`~mlflow_roofline.core.embodied_table`,
:mod:`~mlflow_roofline.core.water_table`); a missing one leaves its result missing, never 0.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

S_PER_HOUR = 3600.0
Number = TypeVar("Number", float, np.ndarray)


def device_hours(num_devices: Number, time_s: Number) -> Number:
    """Hours of device time a job holds: ``num_devices x time_s / 3600``."""
    return num_devices * time_s / S_PER_HOUR


def embodied_co2e_g(num_devices: Number, time_s: Number, manufacturing_kg_co2e: float, life_hours: float) -> Number:
    """Grams CO2e of manufacturing a job's share: its device-hours x (kg CO2e x 1000 / life hours).

    Args:
        num_devices: devices the job holds.
        time_s: the job's wall time, seconds.
        manufacturing_kg_co2e: one device's manufacturing emissions (and its server share), kg CO2e.
        life_hours: the device's expected service life, hours.
    """
    return device_hours(num_devices, time_s) * (manufacturing_kg_co2e * 1000.0 / life_hours)


def water_l(energy_kwh: Number, pue: float, site_wue_l_per_kwh: float, grid_l_per_kwh: float) -> Number:
    """Litres of water a job's electricity costs: ``energy_kwh x (site_wue + pue x grid_water)``.

    Args:
        energy_kwh: the measured (IT) energy, kWh, without PUE.
        pue: the facility's power usage effectiveness (>= 1): grid kWh per IT kWh.
        site_wue_l_per_kwh: on-site water (cooling, humidification) per kWh of IT energy, L/kWh.
        grid_l_per_kwh: water the power plants consume per kWh generated, L/kWh.
    """
    return energy_kwh * (site_wue_l_per_kwh + pue * grid_l_per_kwh)
