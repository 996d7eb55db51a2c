"""The ``roofline`` MLflow run context provider: tag every run with the hardware it ran on.

Installed as the entry point ``roofline`` of MLflow's plugin group
``mlflow.run_context_provider`` (setup.cfg). MLflow asks every installed provider when a
run starts (``mlflow.start_run``, whatever code calls it); this one answers only when
``ROOFLINE_RUN_CONTEXT`` is ``true`` (or ``1``/``yes``), with:

- ``roofline.hardware``: spelt as train runs spell it (the GPU model, else ``cpu:`` and the
  CPU model), so runs from any code can be grouped by hardware in the UI;
- ``roofline.device_count``: the GPUs this process can see (``CUDA_VISIBLE_DEVICES``), 0 on
  a CPU host;
- ``roofline.driver_version`` and ``roofline.cuda_driver_version`` where NVML answers;
- ``roofline.region``, ``roofline.carbon_intensity_g_per_kwh`` and ``roofline.carbon_source``
  where ``ROOFLINE_REGION`` or ``ROOFLINE_CARBON_INTENSITY`` give them (a bad value of another
  ``ROOFLINE_*`` carbon variable, ``ROOFLINE_PUE`` say, is a warning naming it; these tags stay).

MLflow loads this module while ``mlflow`` itself is being imported (``import mlflow``
registers the entry points): so the module imports nothing of MLflow, and
:class:`RooflineRunContext` has the provider's interface (``in_context``, ``tags``) without
subclassing MLflow's ``RunContextProvider``, which would import ``mlflow`` from inside its
own import whenever this module is imported first. The host is read when a run starts,
once per process.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping

from mlflow_roofline.core.carbon import (
    ENV_CARBON_INTENSITY,
    ENV_PRICE_PER_KWH,
    ENV_PUE,
    ENV_REGION,
    CarbonSettings,
    resolve_carbon,
)
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.host import cpu_hardware_name, nvidia_driver_present
from mlflow_roofline.core.schema import (
    TAG_CARBON_INTENSITY,
    TAG_CARBON_SOURCE,
    TAG_CUDA_VERSION,
    TAG_DEVICE_COUNT,
    TAG_DRIVER_VERSION,
    TAG_HARDWARE,
    TAG_REGION,
)
from mlflow_roofline.energy.hardware_naming import hardware_name
from mlflow_roofline.energy.nvml_devices import load_pynvml, visible_nvml_indices
from mlflow_roofline.energy.readings import MeterError

logger = logging.getLogger(__name__)

ENV_RUN_CONTEXT = "ROOFLINE_RUN_CONTEXT"
"""Set to ``true`` to tag every run the process starts (unset: the provider adds nothing)."""

TRUE_WORDS = ("true", "1", "yes", "on")


class RooflineRunContext:
    """An MLflow run context provider: the host's hardware tags when ``ROOFLINE_RUN_CONTEXT`` is true."""

    def in_context(self) -> bool:
        """Whether ``ROOFLINE_RUN_CONTEXT`` says to tag runs (MLflow asks at every run start)."""
        return os.environ.get(ENV_RUN_CONTEXT, "").strip().lower() in TRUE_WORDS

    def tags(self) -> dict[str, str]:
        """The tags of a starting run: the host's (read once) and the carbon figures the environment gives now."""
        return {**host_tags(), **carbon_context_tags(os.environ)}


@functools.cache
def host_tags() -> dict[str, str]:
    """The hardware name, the visible GPU count and, with GPUs, the driver's versions (read once)."""
    if not nvidia_driver_present():
        return {TAG_HARDWARE: cpu_hardware_name(), TAG_DEVICE_COUNT: "0"}
    try:
        nvml = load_pynvml()
        nvml.nvmlInit()
    except Exception as error:  # a driver without NVML: still a host we can name
        logger.warning("roofline run context: NVML cannot be read (%s); tagging the CPU", error)
        return {TAG_HARDWARE: cpu_hardware_name(), TAG_DEVICE_COUNT: "0"}
    try:
        visible = visible_nvml_indices(nvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
        tags = {TAG_DEVICE_COUNT: str(len(visible))}
        driver = nvml.nvmlSystemGetDriverVersion()
        tags[TAG_DRIVER_VERSION] = driver.decode() if isinstance(driver, bytes) else str(driver)
        cuda = int(nvml.nvmlSystemGetCudaDriverVersion())  # e.g. 12040 for 12.4
        tags[TAG_CUDA_VERSION] = f"{cuda // 1000}.{cuda % 1000 // 10}"
    except MeterError as error:
        logger.warning("roofline run context: %s", error)
        visible, tags = [], {TAG_DEVICE_COUNT: "0"}
    finally:
        nvml.nvmlShutdown()
    tags[TAG_HARDWARE] = hardware_name("cuda") if visible else cpu_hardware_name()
    return tags


def carbon_context_tags(env: Mapping[str, str]) -> dict[str, str]:
    """The grid region and carbon intensity the environment gives.

    Each tag stands on its own settings: a bad ``ROOFLINE_PUE`` or ``ROOFLINE_PRICE_PER_KWH`` (which
    these tags do not carry) leaves them as they are, a bad intensity leaves the region's tag; what is
    refused is logged as a warning naming the variable, and its tag is left out.
    """
    for name in (ENV_PUE, ENV_PRICE_PER_KWH):
        _resolved({name: env.get(name, "")}, "the run's tags do not carry it")
    tags = {}
    figures = {ENV_CARBON_INTENSITY: env.get(ENV_CARBON_INTENSITY, "")}
    region = env.get(ENV_REGION, "").strip()
    if region and _resolved({ENV_REGION: region}, f"no {TAG_REGION} tag") is not None:
        tags[TAG_REGION] = figures[ENV_REGION] = region
    settings = _resolved(figures, f"no {TAG_CARBON_INTENSITY} tag")
    if settings is not None and settings.intensity_g_per_kwh is not None:
        tags[TAG_CARBON_INTENSITY] = f"{settings.intensity_g_per_kwh:g}"
        tags[TAG_CARBON_SOURCE] = str(settings.source)
    return tags


def _resolved(env: Mapping[str, str], consequence: str) -> CarbonSettings | None:
    """``resolve_carbon`` of these variables alone, or None with a warning saying what is refused and what follows."""
    try:
        return resolve_carbon(env=env)
    except ConfigError as error:
        logger.warning("roofline run context: %s; %s", error, consequence)
        return None
