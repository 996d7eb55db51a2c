"""Start and stop real services on loopback for the tests: PostgreSQL, ``mlflow server``, a Ray cluster.

Nothing here is a fake: PostgreSQL is Debian's server (``initdb``/``postgres`` refuse to run
as root, so as root they run as the ``postgres`` system user in a temp dir), the MLflow
server is ``mlflow server`` on that database, and the Ray cluster is ``ray start --head``
plus ``ray start --address`` nodes with their own resources. Each start function returns
an object whose ``stop()`` tears it down; the fixtures call it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check, timeout_s: float, what: str, poll_s: float = 0.2) -> None:
    """Call ``check`` until it returns truthy; fail naming ``what`` after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except RuntimeError:
            raise
        except Exception as exc:  # the service is not up yet
            last = exc
        time.sleep(poll_s)
    raise TimeoutError(f"{what} not ready after {timeout_s:g} s" + (f": {last}" if last else ""))


def postgres_bin(name: str) -> str | None:
    """Path of a PostgreSQL server program (PATH, else Debian's /usr/lib/postgresql/<v>/bin)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@dataclasses.dataclass
class Postgres:
    """A running PostgreSQL cluster in a temp dir; ``uri`` names its ``mlflow`` database."""

    process: subprocess.Popen
    directory: Path
    port: int
    user: str

    @property
    def uri(self) -> str:
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/mlflow"

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def start_postgres() -> Postgres:
    """initdb + postgres on a free loopback port, as the ``postgres`` user when run as root."""
    import psycopg2

    initdb, postgres = postgres_bin("initdb"), postgres_bin("postgres")
    if not initdb or not postgres:
        raise RuntimeError("PostgreSQL server programs not found: apt-get install postgresql (see .ci/run)")
    run_as: dict[str, int] = {}
    directory = Path(tempfile.mkdtemp(prefix="roofline-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(directory, account.pw_uid, account.pw_gid)
        run_as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    data = directory / "data"
    user = "roofline"
    subprocess.run(
        [initdb, "-D", str(data), "-U", user, "--auth=trust", "--no-sync", "-E", "UTF8"],
        check=True,
        capture_output=True,
        cwd=directory,
        **run_as,
    )
    port = free_port()
    process = subprocess.Popen(
        [postgres, "-D", str(data), "-p", str(port), "-h", "127.0.0.1", "-k", str(directory), "-F"],
        stdout=open(directory / "postgres.log", "wb"),
        stderr=subprocess.STDOUT,
        cwd=directory,
        **run_as,
    )
    server = Postgres(process, directory, port, user)
    try:
        wait_until(
            lambda: psycopg2.connect(host="127.0.0.1", port=port, user=user, dbname="postgres").close() or True,
            60,
            "PostgreSQL",
        )
        connection = psycopg2.connect(host="127.0.0.1", port=port, user=user, dbname="postgres")
        connection.autocommit = True
        connection.cursor().execute("CREATE DATABASE mlflow")
        connection.close()
    except BaseException:
        server.stop()
        raise
    return server


@dataclasses.dataclass
class MlflowServer:
    """``mlflow server`` on loopback; ``uri`` is its HTTP address."""

    process: subprocess.Popen
    port: int
    log: Path

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_group(self.process)


def start_mlflow_server(backend_uri: str, artifacts: Path, log: Path) -> MlflowServer:
    """``mlflow server`` with ``backend_uri`` and ``--artifacts-destination artifacts``, one worker."""
    port = free_port()
    mlflow = str(Path(sys.executable).with_name("mlflow"))
    process = subprocess.Popen(
        [
            mlflow,
            "server",
            "--backend-store-uri",
            backend_uri,
            "--artifacts-destination",
            str(artifacts),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # No job runner: MLflow 3 starts it and three huey consumers (each importing MLflow,
        # then polling) beside every server; the tracking API the tests use does not need them.
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    server = MlflowServer(process, port, log)

    def healthy() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"mlflow server exited with {process.returncode}: {log.read_text()[-2000:]}")
        return urllib.request.urlopen(f"{server.uri}/health", timeout=2).status == 200

    try:
        wait_until(healthy, 180, "mlflow server")
    except BaseException:
        server.stop()
        raise
    return server


@dataclasses.dataclass
class RayCluster:
    """A Ray cluster of a head and worker nodes on this machine, each node its own raylet."""

    address: str
    env: dict[str, str]
    worker_manager_ports: list[int]
    temp_dir: Path
    machine_lock: int
    """A file descriptor holding :data:`RAY_MACHINE_LOCK` until :meth:`stop` (see :func:`start_ray_cluster`)."""

    def raylet_pid(self, node_manager_port: int) -> int:
        """Pid of the raylet serving ``node_manager_port`` (a worker node started by this cluster)."""
        import psutil

        for proc in psutil.process_iter(["name", "cmdline"]):
            cmdline = " ".join(proc.info["cmdline"] or [])
            if "raylet" in (proc.info["name"] or "") and f"--node_manager_port={node_manager_port}" in cmdline:
                return proc.pid
        raise LookupError(f"no raylet on node manager port {node_manager_port}")

    def stop(self) -> None:
        ray = str(Path(sys.executable).with_name("ray"))
        try:
            subprocess.run([ray, "stop", "--force"], env=self.env, capture_output=True, timeout=120)
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        finally:
            os.close(self.machine_lock)  # closing the descriptor releases the flock


RAY_MACHINE_LOCK = Path(tempfile.gettempdir()) / "mlflow-roofline-tests-ray.lock"
"""One Ray cluster on this machine at a time: ``ray stop --force`` stops every Ray process of the
machine, so a cluster of another pytest worker (``make test`` runs several) would die with it."""


def _hold_machine_lock() -> int:
    fd = os.open(RAY_MACHINE_LOCK, os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # waits while another worker's cluster runs
    return fd


def start_ray_cluster(worker_nodes: int, env: dict[str, str], node_resources: dict[str, float]) -> RayCluster:
    """``ray start --head`` plus ``worker_nodes`` × ``ray start --address``; one CPU each.

    Every node gets ``node_resources`` (e.g. the sweep's per-node meter slot). Waits for
    :data:`RAY_MACHINE_LOCK`, held until :meth:`RayCluster.stop`.
    """
    lock = _hold_machine_lock()
    try:
        return _start_ray_nodes(worker_nodes, env, node_resources, lock)
    except BaseException:
        os.close(lock)
        raise


def _start_ray_nodes(worker_nodes: int, env: dict[str, str], node_resources: dict[str, float], lock: int) -> RayCluster:
    # Ray runs its task workers at nice 15 unless told otherwise: beside any other work on the machine (a
    # busy loop, the other test worker) a niced worker got ~3 % of a core, and a warm server importing torch
    # in it stalled for minutes. The nodes start at the niceness a local instance of the sweep gets, as
    # docs/sweep.md tells users to start a measuring node (imported here: the module pulls in torch).
    from mlflow_roofline.sweep.remote.executors import LOCAL_WORKER_NICENESS

    ray = str(Path(sys.executable).with_name("ray"))
    env = {**env, "RAY_worker_niceness": str(LOCAL_WORKER_NICENESS)}
    port = free_port()
    temp_dir = Path(tempfile.mkdtemp(prefix="rr-", dir="/tmp"))  # Ray's socket paths must stay short
    common = [
        "--num-cpus",
        "1",
        "--resources",
        json.dumps(node_resources),
        "--disable-usage-stats",
        "--object-store-memory",
        str(100 * 1024 * 1024),
    ]
    subprocess.run(
        [
            ray,
            "start",
            "--head",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(port),
            "--include-dashboard",
            "false",
            "--temp-dir",
            str(temp_dir),
            *common,
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    address = f"127.0.0.1:{port}"
    manager_ports = []
    for _ in range(worker_nodes):
        manager_port = free_port()
        subprocess.run(
            [
                ray,
                "start",
                "--address",
                address,
                "--node-ip-address",
                "127.0.0.1",
                "--node-manager-port",
                str(manager_port),
                *common,
            ],
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )
        manager_ports.append(manager_port)
    return RayCluster(address, env, manager_ports, temp_dir, lock)


def stop_group(process: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM a process started in its own session, then SIGKILL its group after ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
