"""The served model's request params: their choices, defaults and validation."""

from __future__ import annotations

import numpy as np

from mlflow_roofline.serve.errors import invalid

MODES: tuple[str, ...] = ("predict", "recommend")
OBJECTIVES: tuple[str, ...] = ("energy", "time", "edp")
DEFAULT_MODE = "predict"
DEFAULT_OBJECTIVE = "energy"
DEFAULT_MAX_DEVICES = 8
MAX_DEVICES_LIMIT = 1024


def check_params(mode: object, max_devices: object, objective: object) -> tuple[str, int, str]:
    """Validate the inference params; returns them typed.

    Raises:
        InputError: naming the param.
    """
    if mode not in MODES:
        raise invalid("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    if objective not in OBJECTIVES:
        raise invalid("objective", f"must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if isinstance(max_devices, bool) or not isinstance(max_devices, (int, np.integer)):
        raise invalid("max_devices", f"must be an integer, got {max_devices!r}")
    if not 1 <= int(max_devices) <= MAX_DEVICES_LIMIT:
        raise invalid("max_devices", f"must be between 1 and {MAX_DEVICES_LIMIT}, got {max_devices}")
    return str(mode), int(max_devices), str(objective)
