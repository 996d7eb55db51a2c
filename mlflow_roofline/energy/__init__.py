"""Energy meters behind one interface of measurement windows.

>>> from mlflow_roofline.energy import make_meter
>>> meter = make_meter("auto", device="cpu")          # rapl if readable, else estimate
>>> with meter.window() as w:
...     run_some_steps()
>>> w.measurement.energy_j, w.measurement.source

Backends: ``nvml`` (GPU energy counter), ``nvml_power`` (sampled GPU power),
``rapl`` (CPU package + DRAM counters), ``estimate`` (CPU time x watts per core).
The interface is :class:`~mlflow_roofline.energy.base.EnergyMeter` (sessions, the power
timeline), its window bookkeeping :mod:`mlflow_roofline.energy.windows`; the value of
``roofline.hardware`` for a device comes from :mod:`mlflow_roofline.energy.hardware_naming`.
MLflow logging lives in :mod:`mlflow_roofline.tracking.energy_logging` (``track_energy``).

Imports only core; never mlflow or any stage.
"""

from mlflow_roofline.energy.base import SCOPES, EnergyMeter, Measurement, MeterError, Window
from mlflow_roofline.energy.select import METER_NAMES, make_meter

__all__ = ["METER_NAMES", "SCOPES", "EnergyMeter", "Measurement", "MeterError", "Window", "make_meter"]
