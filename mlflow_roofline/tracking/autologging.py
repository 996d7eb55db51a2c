"""MLflow's own autologging as ``mlflow_roofline.autolog()`` meets it: is a flavor's on, and a call without it.

Under a Lightning job of several processes, ``mlflow.pytorch.autolog()`` opens a run around
``Trainer.fit`` on every process, and only rank 0 logs into it (its callback is rank-zero
only): every other rank leaves an empty run behind. ``autolog`` runs the other ranks'
``fit`` through :func:`without_mlflow_autologging`, so the job is one run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import ParamSpec, TypeVar

from mlflow.utils.autologging_utils import autologging_is_disabled, disable_autologging
from mlflow.utils.import_hooks import register_post_import_hook

P = ParamSpec("P")
R = TypeVar("R")


def mlflow_autologging_on(flavor: str) -> bool:
    """Whether ``mlflow.<flavor>.autolog()`` is on in this process."""
    return not autologging_is_disabled(flavor)


def without_mlflow_autologging(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run with every MLflow autologging off for the call (MLflow's patches call straight through)."""

    @functools.wraps(fn)
    def quiet(*args: P.args, **kwargs: P.kwargs) -> R:
        with disable_autologging():
            return fn(*args, **kwargs)

    return quiet


def when_imported(module: str, hook: Callable[[ModuleType], None]) -> None:
    """Call ``hook(module)`` once ``module`` is imported (now, if it is already), through MLflow's post-import
    hooks (those its own autologging uses); a hook registered again under the same function name replaces it."""
    register_post_import_hook(hook, module, overwrite=True)
