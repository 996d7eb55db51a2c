"""Sweeps past one node: Ray and Slurm (submitit) executors against a real MLflow server on PostgreSQL.

Everything is real and started here on loopback: a PostgreSQL cluster (Debian's server),
``mlflow server`` on it with an artifact root, a Ray cluster of two nodes
(``ray start --head`` + ``ray start --address``, each with the per-node meter slot), and
submitit's local executor (the same job objects Slurm would run, as local processes).
The sweeps run as ``mlflow-roofline sweep`` processes and every worker logs over HTTP.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_in_process import run_cli
from support.services import MlflowServer, RayCluster, start_mlflow_server, start_postgres, start_ray_cluster
from support.sweeps import write_spec

from mlflow_roofline.core.schema import TAG_CONFIG_HASH, TAG_ERROR, TAG_NODE, TAG_PARENT_RUN_ID, TAG_PID, TAG_RUN_TYPE
from mlflow_roofline.sweep.remote.executors import NODE_METER_RESOURCE

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "mlflow_roofline.cli"]
RAY_HOME = Path(tempfile.gettempdir()) / f"roofline-ray-home-{os.getpid()}"
"""HOME of the Ray cluster, the sweeps and this process's Ray client: a local ``ray.init()`` run
elsewhere leaves ``~/.ray/auth_token`` behind, and Ray 2.60 then refuses a worker node joining a
head started without it. A home of their own keeps the test independent of that."""
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """``mlflow server`` on a fresh PostgreSQL database, artifacts under a temp dir."""
    pytest.importorskip("psycopg2")
    root = tmp_path_factory.mktemp("pg-server")
    postgres = start_postgres()
    try:
        mlflow_server = start_mlflow_server(postgres.uri, root / "artifacts", root / "server.log")
        try:
            yield mlflow_server
        finally:
            mlflow_server.stop()
    finally:
        postgres.stop()


@pytest.fixture
def env(server: MlflowServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process and the sweeps it starts log to the server."""
    import mlflow

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    mlflow.set_tracking_uri(server.uri)
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": pythonpath, "HOME": str(RAY_HOME)}


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    """Two Ray nodes on this machine, one CPU and one meter slot each."""
    pytest.importorskip("ray")
    RAY_HOME.mkdir(parents=True, exist_ok=True)
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "HOME": str(RAY_HOME)}
    cluster = start_ray_cluster(1, env, {NODE_METER_RESOURCE: 1})
    try:
        yield cluster
    finally:
        cluster.stop()


def train_runs(experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id], f"tags.`{TAG_RUN_TYPE}` = 'train'", max_results=1000)


def sweep(spec: Path, env: dict[str, str], *options: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "sweep", str(spec), "--no-progress", *options], env=env, capture_output=True, text=True, timeout=timeout
    )


def one_finished_run_per_config(runs: list, configs: int) -> None:
    finished = Counter(r.data.tags[TAG_CONFIG_HASH] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == configs and set(finished.values()) == {1}, finished


def test_a_local_store_is_refused_for_remote_workers(unopened_tracking_uri: str, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "refused", "{num_layers: 1, hidden_size: 16}")
    done = run_cli("sweep", str(spec), "--no-progress", "--executor", "ray")  # the other tests run the real command
    assert done.returncode == 2
    assert "is a local store that ray workers on other hosts cannot share" in done.stderr
    assert "mlflow server" in done.stderr
    assert not (tmp_path / "mlflow.db").exists(), "the refused sweep opened (and so created) the store"


def test_ray_sweep_on_two_nodes_logs_every_config_once_and_the_fit_reads_them(
    env: dict[str, str], ray_cluster: RayCluster, tmp_path: Path
) -> None:
    grid = "{num_layers: [1, 2], hidden_size: [16, 32], strategy: [single, ddp], num_devices: [1, 2]}"
    spec = write_spec(tmp_path / "ray.yaml", "ray-sweep", grid)
    done = sweep(spec, env, "--executor", "ray", "--ray-address", ray_cluster.address)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    runs = train_runs("ray-sweep")
    one_finished_run_per_config(runs, 8)
    parents = {r.data.tags[TAG_PARENT_RUN_ID] for r in runs}
    assert len(parents) == 1
    assert len({r.data.tags[TAG_NODE] for r in runs}) == 2, "configs were not spread over both nodes"

    from mlflow_roofline.fit.pipeline import run_fit

    fitted = run_fit(
        ["ray-sweep"], model_name="roofline-energy-ray", alias="champion", allow_estimate=True, echo=lambda *_: None
    )
    assert fitted is not None
    from mlflow.tracking import MlflowClient

    version = MlflowClient().get_model_version_by_alias("roofline-energy-ray", "champion")
    assert version.status == "READY"


def test_slurm_executor_through_submitit_local(env: dict[str, str], tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "slurm.yaml", "slurm-sweep", "{num_layers: [1, 2], hidden_size: 16}")
    done = sweep(spec, env, "--executor", "slurm", "--slurm-cluster", "local", "--slurm-folder", str(tmp_path / "jobs"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    runs = train_runs("slurm-sweep")
    one_finished_run_per_config(runs, 2)
    assert all(r.data.tags.get("roofline.executor") == "slurm" for r in runs)
    assert list((tmp_path / "jobs").glob("*_submitted.pkl")), "submitit wrote no job"


def test_two_sweeps_started_together_against_the_server_run_each_config_once(
    env: dict[str, str], tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "twice.yaml", "twice", "{num_layers: [1, 2, 3], hidden_size: 16}")
    procs = [
        subprocess.Popen(
            [*CLI, "sweep", str(spec), "--no-progress"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    runs = train_runs("twice")
    one_finished_run_per_config(runs, 3)
    assert not [r for r in runs if r.info.status == "KILLED"]


def test_killing_the_worker_raylet_fails_that_config_and_it_runs_again_elsewhere(
    env: dict[str, str], ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """Last in the module: it takes the worker node down for good."""
    from mlflow.tracking import MlflowClient

    spec = write_spec(tmp_path / "kill.yaml", "kill", "{num_layers: [1, 2], hidden_size: 16}", steps=400)
    proc = subprocess.Popen(
        [*CLI, "sweep", str(spec), "--no-progress", "--executor", "ray", "--ray-address", ray_cluster.address],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    client = MlflowClient()
    worker_pid = ray_cluster.raylet_pid(ray_cluster.worker_manager_ports[0])
    worker_node = _node_of_raylet(ray_cluster)
    deadline = time.monotonic() + 300
    victim = None
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        for run in train_runs("kill") if client.get_experiment_by_name("kill") else []:
            if run.info.status == "RUNNING" and run.data.tags.get(TAG_NODE) == worker_node and TAG_PID in run.data.tags:
                victim = run
        time.sleep(0.5)
    if victim is None:
        proc.kill()
        seen = [(r.data.tags.get(TAG_NODE), r.info.status, r.data.tags.get(TAG_PID)) for r in train_runs("kill")]
        pytest.fail(
            f"no config seen running on the worker node {worker_node}; runs (node, status, pid): {seen}; "
            f"the sweep said: {proc.communicate()[0][-3000:]}"
        )
    os.kill(worker_pid, signal.SIGKILL)
    output = proc.communicate(timeout=900)[0]
    assert proc.returncode == 0, output[-3000:]
    runs = train_runs("kill")
    one_finished_run_per_config(runs, 2)
    lost = client.get_run(victim.info.run_id)
    assert lost.info.status in ("FAILED", "KILLED")
    assert lost.data.tags.get(TAG_ERROR), "the lost run says nothing about why"
    rerun = [
        r
        for r in runs
        if r.data.tags[TAG_CONFIG_HASH] == victim.data.tags[TAG_CONFIG_HASH] and r.info.status == "FINISHED"
    ]
    assert rerun and rerun[0].data.tags[TAG_NODE] != worker_node


def _node_of_raylet(cluster: RayCluster) -> str:
    """The ``roofline.node`` tag a worker on the cluster's worker node records."""
    import ray

    home = os.environ.get("HOME")
    os.environ["HOME"] = str(RAY_HOME)
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    try:
        port = cluster.worker_manager_ports[0]
        (node,) = [n for n in ray.nodes() if n["Alive"] and n["NodeManagerPort"] == port]
        return f"ray:{node['NodeID']}"
    finally:
        ray.shutdown()
        if home is not None:
            os.environ["HOME"] = home
