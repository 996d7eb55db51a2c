"""The sweep end to end: real train processes, a real SQLite store, `mlflow run`, kills and resumes.

Tiny configurations (one or two layers, width 16-32, a few steps) keep each train
process to seconds; the multi-device ones are real gloo process groups.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest
from support.cli_in_process import run_cli
from support.sweeps import CLI, HANG_GUARD_S, init_store, runs_of, unsplittable_tp_config, wait_until, write_spec

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import TAG_CONFIG_HASH, TAG_ERROR, TAG_PARENT_RUN_ID
from mlflow_roofline.tracking.client import TrackingClient

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_mlflow_run_sweep_nests_finished_children_and_resumes_as_a_no_op(tracking_uri: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    # two depths on one device, and the ddp run of one of them on a two-process gloo group
    spec = write_spec(
        tmp_path / "tiny.yaml",
        "e2e",
        "[{num_layers: [1, 2], hidden_size: 16}, {num_layers: 1, hidden_size: 16, strategy: ddp, num_devices: 2}]",
    )
    # The project's entry points run in the repository: an experiment the sweep created there would keep
    # its artifacts under the checkout's ./mlruns, so the spec's experiment is made here, artifacts in tmp_path.
    MlflowClient().create_experiment("e2e", artifact_location=(tmp_path / "artifacts").as_uri())
    # 1) the project run in another experiment (the user chose "Default"), the sweep's runs in the spec's experiment
    first = subprocess.run(
        ["mlflow", "run", str(REPO_ROOT), "-e", "sweep", "--env-manager", "local", "--experiment-id", "0"]
        + ["-P", f"spec={spec}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    client = MlflowClient()
    (parent,) = runs_of("e2e", "sweep")
    assert parent.info.artifact_uri.startswith((tmp_path / "artifacts").as_uri())
    children = runs_of("e2e", "train")
    assert len(children) == 3
    assert Counter(c.info.status for c in children) == {"FINISHED": 3}
    assert len({c.data.tags[TAG_CONFIG_HASH] for c in children}) == 3
    assert {c.data.tags[TAG_PARENT_RUN_ID] for c in children} == {parent.info.run_id}
    assert sorted((c.data.params["num_layers"], c.data.params["strategy"]) for c in children) == [
        ("1", "ddp"),
        ("1", "single"),
        ("2", "single"),
    ]
    assert all("energy_j" in c.data.metrics and c.data.metrics["time_s"] > 0 for c in children)
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["configs_finished"] == 3 and parent.data.metrics["configs_failed"] == 0
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"plan.json", "plan.txt", "skipped.json", "spec.yaml", "results.json"} <= artifacts
    launcher_id = parent.data.tags["roofline.launcher_run_id"]
    launcher = client.get_run(launcher_id)
    assert launcher.data.tags["roofline.sweep_run_id"] == parent.info.run_id
    assert launcher.info.status == "FINISHED" and launcher.info.run_name == parent.info.run_name == "sweep-tiny"

    # 2) again, in the spec's experiment: the project run is the parent and nothing reruns
    again = subprocess.run(
        [
            "mlflow",
            "run",
            str(REPO_ROOT),
            "-e",
            "sweep",
            "--env-manager",
            "local",
            "--experiment-name",
            "e2e",
            "-P",
            f"spec={spec}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(runs_of("e2e", "train")) == 3
    parents = runs_of("e2e", "sweep")
    assert len(parents) == 2
    second = next(p for p in parents if p.info.run_id != parent.info.run_id)
    assert second.data.params.get("spec") == str(spec)  # the project run itself
    assert second.info.status == "FINISHED"
    assert second.data.metrics["configs_already_done"] == 3 and second.data.metrics["configs_finished"] == 0


def test_sigkill_then_resume_finishes_every_configuration_exactly_once(tracking_uri: str, tmp_path: Path) -> None:
    # the configurations after the first train for ~1 s each: a fixed cost of ~0.3 s a configuration
    # would let a loaded machine's sweep end between the first run finishing and the kill
    grid = "[{num_layers: 1, hidden_size: 16}, {num_layers: [1, 2], hidden_size: 32, num_steps: 120}]"
    spec = write_spec(tmp_path / "resume.yaml", "resume", grid, steps=3)
    init_store()
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the sweep's temp folder, which its watchdog removes
    sweep = subprocess.Popen(
        [*CLI, "sweep", str(spec), "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    try:
        wait_until(
            lambda: any(r.info.status == "FINISHED" for r in runs_of("resume", "train")),
            "a first finished configuration",
        )
        assert sweep.poll() is None, "the sweep ended before it could be killed"
        finished_before = sum(r.info.status == "FINISHED" for r in runs_of("resume", "train"))
        assert finished_before < 3
        sweep.send_signal(signal.SIGKILL)
    finally:
        if sweep.poll() is None:
            sweep.kill()
        sweep.wait()
    # SIGKILL runs no handler: the sweep's watchdog ends the parent and the warm run in flight
    wait_until(lambda: not _running("resume"), "the watchdog to end the killed sweep's runs")
    (killed_parent,) = runs_of("resume", "sweep")
    assert killed_parent.info.status == "KILLED"
    assert "died without ending it" in killed_parent.data.tags[TAG_ERROR]
    wait_until(lambda: not list(tmp_path.glob("roofline-*")), "the watchdog to remove the sweep's folder")

    resumed = run_cli("sweep", str(spec), "--no-progress")  # the resume reads the store: this process will do
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    runs = runs_of("resume", "train")
    finished = Counter(r.data.tags[TAG_CONFIG_HASH] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == 3 and set(finished.values()) == {1}, finished
    assert all(r.info.status in ("FINISHED", "KILLED") for r in runs)  # nothing left RUNNING
    statuses = {p.info.run_id: p.info.status for p in runs_of("resume", "sweep")}
    assert statuses.pop(killed_parent.info.run_id) == "KILLED"
    assert list(statuses.values()) == ["FINISHED"]


def _running(experiment: str) -> list[str]:
    """Ids of the experiment's runs still RUNNING, sweep and train."""
    return [
        r.info.run_id for kind in ("sweep", "train") for r in runs_of(experiment, kind) if r.info.status == "RUNNING"
    ]


def test_a_failing_configuration_is_a_failed_child_and_the_others_finish(tracking_uri: str) -> None:
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.sweep.plan import Plan
    from mlflow_roofline.sweep.runner import run_sweep
    from mlflow_roofline.sweep.spec import parse_spec
    from mlflow_roofline.train.device import hardware_name

    good = TrainConfig(
        num_layers=1, hidden_size=16, num_heads=2, ffn_size=32, seq_len=8, batch_size=4, num_steps=2, warmup_steps=1
    )
    # 3 heads cannot split over 2 ranks: planning would skip it, so force it past planning
    bad = unsplittable_tp_config()
    hw = hardware_name("cpu")
    plan = Plan(configs=(bad, good), skipped=(), hardware=hw, device="cpu")
    spec = parse_spec(
        {
            "device": "cpu",
            "meter": "estimate",
            "grid": {"num_layers": 1, "hidden_size": 16, "num_heads": 2, "ffn_size": 32, "seq_len": 8, "batch_size": 4},
        },
        name="forced",
    )
    client = MlflowClient()
    exp = client.create_experiment("failing")
    result = run_sweep(spec, plan, exp, client=TrackingClient(), progress=False, echo=lambda _: None)
    assert result.exit_code == 1
    assert [e.config for e in result.failed] == [bad]
    by_name = {r.info.run_name: r for r in runs_of("failing", "train")}
    assert by_name[good.run_name].info.status == "FINISHED"
    failed = by_name[bad.run_name]
    assert failed.info.status == "FAILED"
    assert "num_heads" in failed.data.tags[TAG_ERROR]
    assert failed.data.tags[TAG_PARENT_RUN_ID] == result.parent_run_id
    assert client.get_run(result.parent_run_id).info.status == "FAILED"


def test_a_train_process_killed_from_outside_is_marked_failed_with_the_signal(tracking_uri: str) -> None:
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.sweep.child_run import run_configuration
    from mlflow_roofline.system.liveness import TAG_PID
    from mlflow_roofline.train.device import hardware_name

    client = MlflowClient()
    exp = client.create_experiment("oom")
    config = TrainConfig(
        num_layers=2,
        hidden_size=32,
        num_heads=2,
        ffn_size=64,
        seq_len=16,
        batch_size=4,
        num_steps=100000,
        warmup_steps=1,
    )
    outcome = {}
    worker = threading.Thread(
        target=lambda: outcome.update(
            result=run_configuration(
                config, exp, None, hardware=hardware_name("cpu"), meter="estimate", client=TrackingClient()
            )
        )
    )
    worker.start()
    try:
        wait_until(lambda: any(TAG_PID in r.data.tags for r in runs_of("oom", "train")), "the train process")
        (run,) = runs_of("oom", "train")
        os.kill(int(run.data.tags[TAG_PID]), signal.SIGKILL)  # what the OOM killer does
    finally:
        worker.join(timeout=120)
    result = outcome["result"]
    assert result.status == "FAILED" and result.returncode == -signal.SIGKILL
    run = client.get_run(result.run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags[TAG_ERROR].startswith("train process killed by SIGKILL without ending its run")


def test_sigterm_marks_the_in_flight_child_and_the_parent_killed(tracking_uri: str, tmp_path: Path) -> None:
    from mlflow_roofline.system.liveness import TAG_PID, group_alive

    spec = write_spec(tmp_path / "term.yaml", "term", "{num_layers: [1, 2], hidden_size: 16}", steps=100000)
    init_store()
    sweep = subprocess.Popen(
        [*CLI, "sweep", str(spec), "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_until(lambda: any(TAG_PID in r.data.tags for r in runs_of("term", "train")), "the train process")
        sweep.send_signal(signal.SIGTERM)
        try:
            out, _ = sweep.communicate(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            sweep.kill()
            out, _ = sweep.communicate()
            raise AssertionError(f"the sweep did not exit within {HANG_GUARD_S:g} s of SIGTERM:\n{out}") from None
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 128 + signal.SIGTERM, out
    assert "interrupted by SIGTERM" in out
    (child,) = runs_of("term", "train")  # the second configuration never started
    assert child.info.status == "KILLED"
    assert not group_alive(int(child.data.tags[TAG_PID]), 0.0)
    (parent,) = runs_of("term", "sweep")
    assert parent.info.status == "KILLED"


@pytest.mark.parametrize("launch", ["warm", "fresh"])
def test_a_configuration_past_its_timeout_fails_and_the_sweep_exits_1(
    tracking_uri: str, tmp_path: Path, launch: str
) -> None:
    spec = write_spec(tmp_path / "slow.yaml", "slow", "{num_layers: 1, hidden_size: 16}", steps=100000, timeout_s=2)
    proc = run_cli("sweep", str(spec), "--no-progress", "--launch", launch)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 configuration(s) failed:" in proc.stderr
    assert "single-x1-L1-d16-h2-ff32-S8-B4" in proc.stderr and "timed out after 2 s" in proc.stderr
    (run,) = runs_of("slow", "train")
    assert run.info.status == "FAILED"
    what = "train job" if launch == "warm" else "train process"  # warm: the ranks, forked; fresh: train's process
    assert run.data.tags[TAG_ERROR].startswith(f"{what} timed out after 2 s and was killed")
    (parent,) = runs_of("slow", "sweep")
    assert parent.info.status == "FAILED" and parent.data.metrics["configs_failed"] == 1


def test_repeats_are_each_a_finished_child_and_resume_counts_them(
    tracking_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow_roofline.core.schema import TAG_REPEAT, TAG_WORKLOAD_HASH

    spec = write_spec(tmp_path / "twice.yaml", "twice", "{num_layers: [1, 2], hidden_size: 16}", repeats=2)
    first = run_cli("sweep", str(spec))  # in this process: what is checked is the store, not a process
    assert first.returncode == 0, first.stdout + first.stderr
    children = runs_of("twice", "train")
    assert Counter(c.info.status for c in children) == {"FINISHED": 4}
    by_hash: dict[str, list[str]] = {}
    for child in children:
        by_hash.setdefault(child.data.tags[TAG_CONFIG_HASH], []).append(child.data.tags[TAG_REPEAT])
    assert {h: sorted(r) for h, r in by_hash.items()} == {h: ["0", "1"] for h in by_hash} and len(by_hash) == 2
    assert len({c.data.tags[TAG_WORKLOAD_HASH] for c in children}) == 2  # repeats share their workload
    from mlflow_roofline.fit.runs.noise import repeat_spread
    from mlflow_roofline.fit.runs.run_data import runs_to_frame

    assert repeat_spread(runs_to_frame(children).frame).n_configs == 2  # the fit sees both repeats of each
    # one repeat's run is deleted: resuming measures that repeat only
    from mlflow.tracking import MlflowClient

    lost = next(c for c in children if c.data.tags[TAG_REPEAT] == "1")
    MlflowClient().delete_run(lost.info.run_id)
    again = run_cli("sweep", str(spec))
    assert again.returncode == 0, again.stdout + again.stderr
    after = runs_of("twice", "train")
    assert len(after) == 4 and all(c.info.status == "FINISHED" for c in after)
    (rerun,) = [c for c in after if c.info.run_id not in {x.info.run_id for x in children}]
    assert rerun.data.tags[TAG_CONFIG_HASH] == lost.data.tags[TAG_CONFIG_HASH]
    assert rerun.data.tags[TAG_REPEAT] == "1"

    # once more: every unit is done, so no warm server (torch's import) is started for it
    from mlflow_roofline.train.warm import WarmServer

    started: list[WarmServer] = []
    start = WarmServer.start
    monkeypatch.setattr(WarmServer, "start", lambda server: started.append(server) or start(server))
    done = run_cli("sweep", str(spec))
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(runs_of("twice", "train")) == 4 and started == []
