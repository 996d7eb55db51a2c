"""Job scripts forked from one warm Python: torch, transformers and MLflow imported once, not once per job.

``python tests/integration_jobs.py KIND OUT`` pays those imports again for every job (about 8 of
its 11 CPU-seconds). :class:`WarmJobs` starts one server that imports them, then forks each job
from it: a real process all the same, with its own pid, the test's environment, folder and
arguments, the script run from its top as ``__main__``, its own signals and its own exit (an
uncaught KeyboardInterrupt re-raised as SIGINT, the atexit handlers, the watchdog it starts). Its
stdout is a pipe the test reads, as ``Popen(stdout=PIPE)``'s; its stderr goes to a file the test
reads after the exit. The server forks one job at a time and reports its exit status as
:class:`subprocess.Popen` does (``-N`` for a signal N).

What a ``preexec_fn`` did before ``exec`` the child does before the script (``prepare``: root's
file-mode override lost at once, :func:`support.file_modes.honour_file_modes_now`). What tests the
process start-up itself (what an import pulls in) stays a fresh ``python``.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

PRELOAD = (
    "torch",
    "transformers",
    "transformers.trainer",
    "transformers.models.bert.modeling_bert",
    "mlflow",
    "mlflow.store.tracking.sqlalchemy_store",
    "mlflow_roofline",
    "mlflow_roofline.integrations.transformers",
)
"""What the server imports before it forks a job: what every integration job imports first."""


class WarmJob:
    """One forked job, read as a :class:`subprocess.Popen` with ``stdout=PIPE, text=True``."""

    def __init__(self, server: WarmJobs, pid: int, stdout: IO[str], stderr: Path) -> None:
        self.server, self.pid, self.stdout, self.stderr_path = server, pid, stdout, stderr
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        """The exit status (``-N``: killed by signal N), once the job is gone; raises TimeoutExpired."""
        if self.returncode is None:
            self.returncode = self.server.exit_status(self.pid, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the job unless its exit was reported (as Popen does, its pid never one reused)."""
        if self.returncode is None:
            self.returncode = self.server.exit_status_if_reported(self.pid)
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # ended, its exit not read yet
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def finish(self, timeout: float) -> subprocess.CompletedProcess[str]:
        """Read stdout to its end, wait for the exit; what ``subprocess.run(capture_output=True)`` returns.

        Past ``timeout`` seconds the job is killed and TimeoutExpired raised, as ``subprocess.run`` does.
        """
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(self.stdout.read()), daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self.kill()
            raise subprocess.TimeoutExpired(str(self.pid), timeout)
        self.stdout.close()
        code = self.wait(timeout)
        return subprocess.CompletedProcess([str(self.pid)], code, out[0], self.stderr_path.read_text())


class WarmJobs:
    """The test's side: start the warm server for ``script``, fork jobs from it, stop it at :meth:`close`."""

    def __init__(self, script: Path, preload: tuple[str, ...] = PRELOAD) -> None:
        self.script = script
        self.channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}  # each job gets the test's own
        self.server = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno()), str(script), *preload],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=env,
        )
        theirs.close()
        self.running: WarmJob | None = None

    def start(
        self,
        *args: str,
        stderr: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        prepare: str | None = None,
    ) -> WarmJob:
        """Fork ``script ARGS`` in ``env`` and ``cwd`` (default: this process's); its stderr to the file ``stderr``.

        ``prepare``: ``module:function`` the child calls before the script (a ``preexec_fn`` with no exec after it).
        """
        if self.running is not None and self.running.returncode is None:
            self.running.kill()  # a test that failed before its job ended: the server waits for it
            self.running.wait(60)
        read, write = os.pipe()
        err = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        request = {
            "argv": [str(self.script), *args],
            "cwd": str(cwd or os.getcwd()),
            "env": dict(os.environ if env is None else env),
            "prepare": prepare,
        }
        try:
            socket.send_fds(self.channel, [json.dumps(request).encode()], [write, err])
        finally:
            os.close(write)
            os.close(err)
        pid = int(self._reply(None)["started"])  # the server replies or exits (its imports may be slow)
        self.running = WarmJob(self, pid, os.fdopen(read, "r"), stderr)
        return self.running

    def run(
        self,
        *args: str,
        stderr: Path,
        timeout: float = 300,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        prepare: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """:meth:`start` the job and :meth:`WarmJob.finish` it."""
        return self.start(*args, stderr=stderr, env=env, cwd=cwd, prepare=prepare).finish(timeout)

    def exit_status(self, pid: int, timeout: float | None) -> int:
        reply = self._reply(timeout)
        if reply.get("pid") != pid:
            raise AssertionError(f"the warm server answered {reply} while job {pid} ran")
        return int(reply["exit"])

    def exit_status_if_reported(self, pid: int) -> int | None:
        """Job ``pid``'s exit status if the server has reported it already, else None (without waiting)."""
        self.channel.setblocking(False)
        try:
            message = self.channel.recv(4096, socket.MSG_PEEK)
        except BlockingIOError:
            return None
        return self.exit_status(pid, None) if message else None

    def _reply(self, timeout: float | None) -> dict[str, Any]:
        self.channel.settimeout(timeout)
        try:
            message = self.channel.recv(4096)
        except TimeoutError as exc:
            raise subprocess.TimeoutExpired(str(self.script), timeout or 0.0) from exc
        if not message:
            raise AssertionError(f"the warm server for {self.script} exited ({self.server.wait()})")
        return dict(json.loads(message))

    def close(self) -> None:
        """Stop the server (a job still running is killed first) and reap it."""
        if self.running is not None and self.running.returncode is None:
            self.running.kill()
        self.channel.close()  # the server reads the end of its requests and exits
        try:
            self.server.wait(60)
        finally:
            self.server.kill()


def _serve(channel: socket.socket) -> None:
    """Fork a job per request, report its pid and then its exit status; return at the channel's end."""
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 2)
        if not message:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            channel.close()
            _become_job(json.loads(message), fds)  # ends this process as the script ends
        for fd in fds:
            os.close(fd)
        channel.send(json.dumps({"started": pid}).encode())
        _, status = os.waitpid(pid, 0)
        channel.send(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(status)}).encode())


def _become_job(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: the request's streams, folder, environment and argv, then the script as ``__main__``.

    An exception leaves it as it leaves a script run by ``python``: the traceback on stderr and
    exit status 1, a KeyboardInterrupt by SIGINT; ``SystemExit`` carries its code.
    """
    devnull = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((devnull, 0), (fds[0], 1), (fds[1], 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    if request["prepare"]:
        module, function = request["prepare"].split(":")
        getattr(importlib.import_module(module), function)()
    runpy.run_path(sys.argv[0], run_name="__main__")
    raise SystemExit(0)


if __name__ == "__main__":
    fd, script, *modules = sys.argv[1:]
    sys.path[0] = str(Path(script).resolve().parent)  # as `python SCRIPT` has it
    for module in modules:
        importlib.import_module(module)
    _serve(socket.socket(fileno=int(fd)))
    os._exit(0)  # the jobs are reaped; unloading torch and MLflow would only cost the test time
