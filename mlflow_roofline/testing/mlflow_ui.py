"""The MLflow UI in a real browser: ``mlflow server`` on loopback and Debian's Chromium under Playwright.

Used by the browser test and ``make screenshots``. Chromium is the system one
(``/usr/bin/chromium``, from apt), driven through Playwright's ``executable_path``:
no browser is downloaded. The flags keep a headless Chromium on a machine without
internet quiet (no background networking, no component updates, no sync, no QUIC)
and each browser gets a fresh profile, so nothing (such as the UI's GenAI / Model
training switch, kept in local storage) carries over between runs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import requests

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.system.processes import stop_group
from mlflow_roofline.testing.scoring_server import LOOPBACK, free_port
from mlflow_roofline.tracking.ui_links import MODEL_TRAINING, experiment_url, run_url

__all__ = ["MODEL_TRAINING", "chromium_page", "experiment_url", "mlflow_ui", "run_url"]

if TYPE_CHECKING:  # playwright is optional and heavy: only the browser tests install and start it
    from playwright.sync_api import Page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS: tuple[str, ...] = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)  # fmt: skip


@contextlib.contextmanager
def mlflow_ui(backend_store_uri: str, *, cwd: Path, startup_timeout_s: float = 180.0) -> Iterator[str]:
    """``mlflow server`` on a free loopback port for ``backend_store_uri``; yields its base URL.

    The server runs in its own session and is stopped by its process group at the end.

    Raises:
        RooflineError: the server exited or did not answer ``/health`` in time (with its log).
    """
    port = free_port()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # No job runner: MLflow 3 starts it and three huey consumers (each importing MLflow, then
    # polling) beside every server; the UI and the tracking API do not use them.
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    log = tempfile.NamedTemporaryFile(prefix="mlflow-ui-", suffix=".log", delete=False)
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        backend_store_uri,
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://{LOOPBACK}:{port}"
    try:
        _wait_healthy(base, process, Path(log.name), startup_timeout_s)
        yield base
    finally:
        stop_group(process, grace_s=10.0)
        log.close()
        Path(log.name).unlink(missing_ok=True)


def _wait_healthy(base: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RooflineError(f"mlflow server exited with code {process.returncode}:\n{log.read_text()[-4000:]}")
        with contextlib.suppress(requests.RequestException):  # not listening yet, or busy starting
            if requests.get(f"{base}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise RooflineError(f"mlflow server did not answer /health in {timeout_s:.0f} s:\n{log.read_text()[-4000:]}")


@contextlib.contextmanager
def chromium_page(width: int = 1600, height: int = 1000, timeout_s: float = 90.0) -> Iterator[Page]:
    """A Playwright page in Debian's headless Chromium with a fresh profile (see the module docstring)."""
    from playwright.sync_api import sync_playwright  # deferred: optional, only the browser tests need it

    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            args=list(CHROMIUM_ARGS),
            headless=True,
            viewport={"width": width, "height": height},
        )
        context.set_default_timeout(timeout_s * 1000)
        try:
            yield context.new_page()
        finally:
            context.close()
