"""Start the processes of a training job on this node, follow them, stop them.

A job of N > 1 processes runs under ``python -m torch.distributed.run`` (torchrun) with a
c10d rendezvous on ``127.0.0.1:0``: the agent's store binds a free port chosen by the
kernel (no guess-a-port race with other jobs) and the workers use that store, with
``MASTER_ADDR=127.0.0.1``. ``--max-restarts=0``: a rank that dies takes the job down
(torchrun terminates the other ranks) and the exit status says so. Going past one node
is torchrun's own business (its rendezvous options), not this module's.

A job of one process is a plain ``python -m module``: no agent, no rendezvous.

:class:`Job` starts the processes and returns at once, so that the caller can do its
own work (opening the MLflow run) while they import torch and build the model; their
output is copied line by line to this process's stderr by a background thread.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import TextIO

from mlflow_roofline.system.liveness import group_alive
from mlflow_roofline.system.processes import die_with_parent, stop_group

OUTPUT_TAIL_LINES = 120  # room for torchrun's failure summary of every rank
STOP_GRACE_S = 10.0
RENDEZVOUS_FILE_ENV = "ROOFLINE_RENDEZVOUS_FILE"
"""The file the ranks of a warm-launched job meet in (unset under torchrun). Defined here, with the
launchers, rather than in :mod:`~mlflow_roofline.train.parallel.dist`, which reads it: a launcher
(the sweep) must not import torch for a name."""
OMP_WAIT_POLICY = "PASSIVE"
"""How a rank's OpenMP threads wait for work (``OMP_WAIT_POLICY``), unless the caller set it: asleep.

OpenMP's default spins a thread at the end of every parallel region before it sleeps. A spinning
thread holds a core; on a CPU shared with other work, or with more threads than cores, that time
is taken from whoever else runs, and it is CPU time of the job's process, which the ``estimate``
meter counts as energy: it grows with the machine's load, not with the job (measured in
docs/benchmarks.md, ``benchmarks/omp_wait.py``). Read once, when torch loads its OpenMP runtime."""


@dataclasses.dataclass(frozen=True)
class LaunchResult:
    """How a job ended.

    Attributes:
        returncode: exit status (0 when every rank succeeded; negative: killed by that signal).
        output_tail: the last lines the job printed (stdout and stderr together).
        rank_codes: each failed rank's exit code, when the launcher followed the ranks
            itself (None under torchrun: its summary in ``output_tail`` says).
    """

    returncode: int
    output_tail: str
    rank_codes: Mapping[int, int] | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def torchrun_command(nproc: int, module: str, args: Sequence[str]) -> list[str]:
    """The torchrun command line that runs ``python -m module *args`` in ``nproc`` processes."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=127.0.0.1:0",
        f"--rdzv-id={uuid.uuid4().hex}",
        "--local-addr=127.0.0.1",
        "--max-restarts=0",
        "--module",
        module,
        *args,
    ]


def job_command(nproc: int, module: str, args: Sequence[str]) -> list[str]:
    """``python -m module *args`` for one process, the torchrun command for more."""
    if nproc == 1:
        return [sys.executable, "-m", module, *args]
    return torchrun_command(nproc, module, args)


def worker_env(nproc: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the workers: ``base`` plus a CPU-thread share per rank and how threads wait.

    For N > 1, ``OMP_NUM_THREADS`` defaults to the machine's cores divided among the ranks
    (torchrun would otherwise force 1); ``OMP_WAIT_POLICY`` defaults to :data:`OMP_WAIT_POLICY`;
    a value already set is kept.
    """
    env = dict(os.environ if base is None else base)
    if nproc > 1:
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    env.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class Job:
    """The processes of one training job, started now, followed in the background.

    Args:
        nproc: processes (ranks) to run.
        module: the module every process runs (``python -m module *args``).
        args: its arguments.
        env: the base environment (default: this process's).
        echo: where the job's output is copied (default: this process's stderr).
    """

    def __init__(
        self,
        nproc: int,
        module: str,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        echo: TextIO | None = None,
    ) -> None:
        self._echo = sys.stderr if echo is None else echo
        self._tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_TAIL_LINES)
        self.process = subprocess.Popen(
            job_command(nproc, module, args),
            env=worker_env(nproc, env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # a process group of its own, so that stop() reaches every rank
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        self._pump = threading.Thread(target=self._copy_output, name="job-output", daemon=True)
        self._pump.start()

    def _copy_output(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._tail.append(line)
            try:
                self._echo.write(line)
                self._echo.flush()
            except (OSError, ValueError):  # our stderr went away: keep draining the pipe
                pass

    def wait(self) -> LaunchResult:
        """Wait for the job to end; its exit status and output tail."""
        returncode = self.process.wait()
        self._pump.join()
        return LaunchResult(returncode=returncode, output_tail="".join(self._tail))

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Terminate every process of the job if it still runs (SIGTERM, SIGKILL after ``grace_s``)."""
        if self.process.poll() is not None and not group_alive(self.process.pid):
            return
        stop_group(self.process, grace_s)
