"""How the user called the package, so that a message names an option as they would type it.

The MLproject entry points (``entrypoints/*.py``) set :data:`ENV_INVOCATION` to
:data:`MLPROJECT` before they call the CLI: a message then says ``-P allow_estimate=true``
(what ``mlflow run`` takes) rather than ``--allow-estimate true`` (what ``mlflow-roofline``
takes). Processes started from there inherit it.
"""

from __future__ import annotations

import os

ENV_INVOCATION = "ROOFLINE_INVOCATION"
MLPROJECT = "mlproject"
"""The value of :data:`ENV_INVOCATION` under ``mlflow run`` (an MLproject entry point)."""


def option(name: str, value: str) -> str:
    """The option ``name`` (a snake_case parameter) set to ``value``, spelt the way this process was called."""
    if os.environ.get(ENV_INVOCATION) == MLPROJECT:
        return f"-P {name}={value}"
    return f"--{name.replace('_', '-')} {value}"
