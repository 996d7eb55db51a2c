"""Run MLflow's own scoring server for a model on a free loopback port, and stop it again.

Used by the serving tests, the latency benchmark and ``make demo``; users run
``mlflow models serve`` themselves. The server is started in its own session, so that
:meth:`ScoringServer.stop` ends it and the uvicorn workers it spawns by its process
group id (the PID of the process started here), and nothing else.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import requests

from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.system.liveness import group_alive
from mlflow_roofline.system.processes import stop_group

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ScoringServer:
    """``mlflow models serve -m MODEL_URI --env-manager local`` on 127.0.0.1, as a context manager.

    Args:
        model_uri: any MLflow model URI (``models:/NAME@ALIAS``, ``runs:/...``, a path).
        env: extra environment variables for the server (e.g. ``MLFLOW_TRACKING_URI``).
        startup_timeout_s: seconds to wait for ``/ping`` to answer 200.
        workers: uvicorn worker processes.
    """

    def __init__(
        self,
        model_uri: str,
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 180.0,
        workers: int = 1,
    ) -> None:
        self.model_uri = model_uri
        self.env = {**os.environ, **(env or {})}
        # MLflow execs `uvicorn` by name: it must be this interpreter's (the venv's) one.
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.startup_timeout_s = startup_timeout_s
        self.workers = workers
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="mlflow-serve-", suffix=".log", delete=False)
        self.session = requests.Session()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321``."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the ``mlflow models serve`` process (also its process group id)."""
        return self.process.pid if self.process else None

    def start(self) -> ScoringServer:
        """Start the server and wait until ``/ping`` answers; raises RooflineError with its log if not."""
        self.port = free_port()
        command = [
            sys.executable, "-m", "mlflow", "models", "serve",
            "-m", self.model_uri,
            "--env-manager", "local",
            "-h", LOOPBACK,
            "-p", str(self.port),
            "-w", str(self.workers),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RooflineError(
                    f"mlflow models serve exited with code {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                if self.session.get(f"{self.url}/ping", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RooflineError(
            f"mlflow models serve did not answer /ping in {self.startup_timeout_s:.0f} s:\n{self.log_tail()}"
        )

    def invocations(self, payload: Mapping[str, object], timeout_s: float = 60.0) -> requests.Response:
        """POST ``payload`` as JSON to ``/invocations``."""
        return self.session.post(f"{self.url}/invocations", json=payload, timeout=timeout_s)

    def log_tail(self, n_chars: int = 4000) -> str:
        """The end of the server's combined stdout/stderr."""
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-n_chars:]

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the server's process group (its own PID), then SIGKILL after ``grace_s``."""
        self.session.close()
        if self.process is not None and (self.process.poll() is None or group_alive(self.process.pid)):
            stop_group(self.process, grace_s)
        self._cleanup_log()

    def _cleanup_log(self) -> None:
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)

    def __enter__(self) -> ScoringServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
