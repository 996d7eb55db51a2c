"""MLflow plugins of this checkout for a child process, before the package is reinstalled.

MLflow finds plugins through the installed package's metadata (``entry_points.txt``), which
``pip install -e .`` writes from setup.cfg. A plugin group setup.cfg declares but the installed
metadata lacks (the checkout changed setup.cfg since) is declared to the child in a small
dist-info directory on its ``PYTHONPATH``, with setup.cfg's own lines.
"""

from __future__ import annotations

import configparser
import os
from importlib import metadata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def declared_entry_points(group: str) -> str:
    """The lines setup.cfg declares for the entry point group ``group``."""
    parser = configparser.ConfigParser()
    parser.read(REPO_ROOT / "setup.cfg")
    return parser["options.entry_points"][group].strip()


def env_with_plugin(group: str, directory: Path) -> dict[str, str]:
    """This process's environment, with ``group`` declared in ``directory`` unless it is installed already."""
    env = dict(os.environ)
    installed = {ep.group for ep in metadata.distribution("mlflow-roofline").entry_points}
    if group in installed:
        return env
    info = directory / "mlflow_roofline_checkout-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mlflow-roofline-checkout\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{declared_entry_points(group)}\n")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(directory), env.get("PYTHONPATH", "")) if p)
    return env
