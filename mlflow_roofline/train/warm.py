"""Warm launch: the ranks of each job forked from a server that has imported torch already.

A fresh ``python -m mlflow_roofline.train.worker`` spends several CPU-seconds importing torch
and transformers before its first step, and torchrun's agent imports torch once more. A
sweep runs many short jobs one after another, so it starts one :class:`WarmServer`
(multiprocessing's forkserver, preloaded with :mod:`mlflow_roofline.train.preload`) and
forks the ranks of every job from it (:class:`WarmJob`): a rank is training within
milliseconds of being asked for.

A forked rank is the same job as a launched one (:func:`mlflow_roofline.train.worker.main`):

- it leaves the sweep's process group (``setsid``), so that a Ctrl-C reaches the sweep,
  which then stops the ranks itself and marks the run;
- it gets SIGTERM when the server dies, and the server ends when the process that
  started it does: a sweep killed outright leaves no rank training on;
- its output goes to ``rank-<i>.log`` in the job's folder; its environment is the
  launcher's at the time of the job (``OMP_NUM_THREADS`` applied with
  ``torch.set_num_threads``, since OpenMP read it when the server imported torch;
  ``OMP_WAIT_POLICY`` is the server's, read then);
- the ranks of a job of N > 1 meet in the file ``rendezvous`` of the job's folder
  (:data:`~mlflow_roofline.train.launch.RENDEZVOUS_FILE_ENV`).

:class:`WarmJob` follows every rank itself, as torchrun with ``--max-restarts=0`` would:
when one fails, the others are stopped (SIGTERM, SIGKILL after a grace) and each failed
rank's exit code is reported (:class:`~mlflow_roofline.train.launch.LaunchResult`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import multiprocessing.util
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mlflow_roofline.system.processes import die_with_parent
from mlflow_roofline.train.launch import (
    OMP_WAIT_POLICY,
    RENDEZVOUS_FILE_ENV,
    STOP_GRACE_S,
    LaunchResult,
    worker_env,
)

PRELOAD_MODULE = "mlflow_roofline.train.preload"
RANK_LOG = "rank-{rank}.log"
RENDEZVOUS_FILE = "rendezvous"
TAIL_BYTES = 16384
"""The end of each rank's log kept in the job's output tail."""
SOCKET_PATH_MAX_BYTES = 107
"""The longest Unix socket path Linux takes (``sun_path`` holds 108 bytes with the NUL)."""
LISTENER_SUFFIX_BYTES = len("/pymp-12345678/listener-12345678")
"""What multiprocessing appends to the temp folder for the forkserver's socket."""
SHORT_TEMP_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
"""Where the socket goes when ``TMPDIR`` is too long for it, first writable one wins."""


class WarmServer:
    """The server the ranks are forked from: one per launching process, started once.

    multiprocessing keeps one forkserver per process; this object names it and fixes what
    it preloads. The server ends by itself when the launching process exits.
    """

    def __init__(self) -> None:
        self.context: multiprocessing.context.ForkServerContext = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload([PRELOAD_MODULE])

    def start(self) -> WarmServer:
        """Start the server now; it imports in the background while the caller goes on.

        Its OpenMP runtime is loaded with torch, so it reads ``OMP_WAIT_POLICY`` here, once, for
        every rank it forks (:data:`~mlflow_roofline.train.launch.OMP_WAIT_POLICY` unless set).
        """
        wait_policy = os.environ.get("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
        _make_socket_folder_fit()
        with _environment(PYTORCH_NVML_BASED_CUDA_CHECK="1", OMP_WAIT_POLICY=wait_policy):
            multiprocessing.forkserver.ensure_running()
        return self


class WarmJob:
    """The N ranks of one job, forked from ``server`` now and followed until they end.

    Args:
        server: a started :class:`WarmServer`.
        nproc: ranks (processes) of the job.
        job_dir: the job's folder (holding ``job.json``; rank logs and results go there).
        env: the ranks' environment (default: this process's).
    """

    def __init__(self, server: WarmServer, nproc: int, job_dir: Path, env: Mapping[str, str] | None = None) -> None:
        self.nproc = nproc
        self.job_dir = job_dir
        base = worker_env(nproc, env)
        if nproc > 1:
            base[RENDEZVOUS_FILE_ENV] = str(job_dir / RENDEZVOUS_FILE)
        self.ranks: list[Any] = []  # started processes: their pid and exitcode are set
        try:
            for rank in range(nproc):
                ids = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc)}
                process = server.context.Process(
                    target=run_rank, args=(str(job_dir), rank, {**base, **ids}), name=f"roofline-rank-{rank}"
                )
                process.start()
                self.ranks.append(process)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        """Rank 0's process id (the process that reports the job's result)."""
        return int(self.ranks[0].pid)

    def wait(self, timeout_s: float | None = None) -> LaunchResult | None:
        """Wait for every rank to end; None if ``timeout_s`` seconds passed first (the ranks still run).

        The first rank to fail ends the job: the others are stopped.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while alive := [p for p in self.ranks if p.exitcode is None]:
            if any(p.exitcode for p in self.ranks):
                self.stop()
                continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            multiprocessing.connection.wait([p.sentinel for p in alive], timeout=remaining)
        codes = {rank: int(p.exitcode) for rank, p in enumerate(self.ranks)}
        failed = {rank: code for rank, code in codes.items() if code != 0}
        returncode = codes[0] if self.nproc == 1 else int(bool(failed))
        return LaunchResult(returncode, self.output_tail(), failed)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop every rank still running: SIGTERM, SIGKILL after ``grace_s`` seconds."""
        alive = [p for p in self.ranks if p.exitcode is None]
        for process in alive:
            _signal_rank(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None:
                _signal_rank(process.pid, signal.SIGKILL)
                process.join()

    def output_tail(self) -> str:
        """The end of every rank's log, each line led by ``[rank i]`` when there are several."""
        lines = []
        for rank in range(self.nproc):
            text = _tail(self.job_dir / RANK_LOG.format(rank=rank))
            prefix = f"[rank {rank}] " if self.nproc > 1 else ""
            lines += [f"{prefix}{line}" for line in text.splitlines()]
        return "\n".join(lines)


def run_rank(job_dir: str, rank: int, env: Mapping[str, str]) -> None:
    """A forked rank: leave the launcher's group, log to its file, run the job, exit with its status."""
    os.setsid()
    detach_from_server()
    log = os.open(Path(job_dir) / RANK_LOG.format(rank=rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.clear()
    os.environ.update(env)
    code = 1
    try:
        import torch

        if "OMP_NUM_THREADS" in env:
            torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
        from mlflow_roofline.train import worker  # imports torch and the workload: the forked rank pays, not the server

        code = worker.main([job_dir])
    except BaseException:
        traceback.print_exc()
    finally:
        # As a launched rank: no interpreter finalization, where gloo's threads can abort.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def detach_from_server() -> None:
    """In a process forked from the server: end with it, and let it end with its launcher.

    The process gets SIGTERM when the server dies, and drops its copy of the pipe that tells
    the server its launcher died (:func:`_release_server_liveness`).
    """
    _release_server_liveness()
    die_with_parent()


def _make_socket_folder_fit() -> None:
    """Have multiprocessing make its temp folder (the forkserver's socket lives there) where the path fits.

    The socket goes under ``tempfile.gettempdir()``; a long ``TMPDIR`` (a job folder on a
    cluster, a test's temp folder) makes the path longer than Linux takes, and the server
    would not start (``OSError: AF_UNIX path too long``). Then the folder is made in the first
    writable of :data:`SHORT_TEMP_FOLDERS` instead, for this process only; anything else the
    process puts in its temp folder stays under ``TMPDIR``. multiprocessing removes the folder
    at exit. Where none fits, the error says so and names ``TMPDIR``.
    """
    if _fits(tempfile.gettempdir()):
        return
    short = next((folder for folder in SHORT_TEMP_FOLDERS if _fits(folder) and os.access(folder, os.W_OK)), None)
    if short is None:
        raise OSError(
            f"TMPDIR={tempfile.gettempdir()!r} is too long for the warm launch's Unix socket "
            f"(at most {SOCKET_PATH_MAX_BYTES - LISTENER_SUFFIX_BYTES} bytes) and none of "
            f"{', '.join(SHORT_TEMP_FOLDERS)} is writable: "
            "set TMPDIR to a shorter folder, or launch with --launch fresh"
        )
    before = tempfile.tempdir
    tempfile.tempdir = short
    try:
        multiprocessing.util.get_temp_dir()  # made now under the short folder (unless made before), kept
    finally:
        tempfile.tempdir = before


def _fits(folder: str) -> bool:
    return len(os.fsencode(folder)) + LISTENER_SUFFIX_BYTES <= SOCKET_PATH_MAX_BYTES


def _release_server_liveness() -> None:
    """Close this rank's copy of the pipe whose end tells the server that its launcher died.

    multiprocessing hands every forked child the write end of that pipe (so that the child
    could start processes of its own); while a rank holds it, the server would outlive a
    launcher killed outright, and so would the ranks it forked (their SIGTERM on the
    server's death is what stops them).
    """
    server = multiprocessing.forkserver._forkserver
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None  # type: ignore[attr-defined]


def _signal_rank(pid: int, signum: int) -> None:
    """Signal a rank's process group (it is its own group's leader once it ran ``setsid``), else the rank."""
    with contextlib.suppress(ProcessLookupError):
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:  # not yet its own group's leader
            os.kill(pid, signum)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set environment variables for the duration of the block (what a process started in it inherits)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
