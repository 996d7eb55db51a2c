"""Claims of a configuration and the liveness they rest on, against a real SQLite store and real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import TAG_CLAIM, TAG_CONFIG_HASH, TAG_RUN_TYPE
from mlflow_roofline.sweep.child_run import create_child_run
from mlflow_roofline.sweep.claim import check_claim, withdraw
from mlflow_roofline.sweep.lookup import config_status, train_runs
from mlflow_roofline.system.liveness import (
    TAG_HOST,
    liveness,
    process_tags,
    sweep_process_tags,
)
from mlflow_roofline.tracking.client import TrackingClient

HW = "cpu:test"
CONFIG = TrainConfig(num_layers=1, hidden_size=16, num_heads=2, ffn_size=32, seq_len=8, batch_size=4)
HASH = CONFIG.config_hash(HW)

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
CLAIMANTS = 4


@pytest.fixture
def store(tracking_uri: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    return client, client.create_experiment("claims")


def ticket(client, exp: str, tags: dict[str, str]) -> str:
    """A RUNNING train run of CONFIG carrying ``tags`` (how another sweep's ticket looks)."""
    base = {TAG_RUN_TYPE: "train", TAG_CONFIG_HASH: HASH}
    return client.create_run(exp, tags={**base, **tags}).info.run_id


def test_a_lone_ticket_wins_and_a_second_live_one_loses(store) -> None:
    client, exp = store
    seen = config_status(TrackingClient(), exp, HASH).run_ids
    mine = create_child_run(CONFIG, exp, None, hardware=HW, client=TrackingClient())
    assert check_claim(TrackingClient(), exp, HASH, mine, seen).won
    # another sweep, alive on this host, created its ticket for the same config: neither may run it now
    other = subprocess.Popen(SLEEP)
    try:
        rival = ticket(client, exp, sweep_process_tags(other.pid))
        mine_again = check_claim(TrackingClient(), exp, HASH, mine, seen)
        theirs = check_claim(TrackingClient(), exp, HASH, rival, seen)
        assert not mine_again.won and mine_again.rival == rival
        assert not theirs.won and theirs.rival == mine
        withdraw(TrackingClient(), rival, theirs)
    finally:
        other.kill()
        other.wait()
    # the withdrawn ticket is gone from the experiment, ended and tagged with why
    assert [r.info.run_id for r in train_runs(TrackingClient(), exp, HASH)] == [mine]
    gone = client.get_run(rival)
    assert gone.info.lifecycle_stage == "deleted" and gone.info.status == "KILLED"
    assert f"claimed by run {mine}" in gone.data.tags[TAG_CLAIM]
    assert check_claim(TrackingClient(), exp, HASH, mine, seen).won


def test_dead_tickets_block_nothing_but_other_hosts_and_finished_runs_do(store) -> None:
    client, exp = store
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    ticket(client, exp, sweep_process_tags(gone.pid))  # a sweep that died after creating its ticket
    ticket(client, exp, {})  # an old run with no process recorded
    mine = ticket(client, exp, sweep_process_tags(os.getpid()))
    assert check_claim(TrackingClient(), exp, HASH, mine, frozenset()).won

    remote = ticket(client, exp, {TAG_HOST: "node-17", "roofline.sweep_pid": "4242"})
    assert (
        check_claim(TrackingClient(), exp, HASH, mine, frozenset()).rival == remote
    )  # cannot be checked: counts as live
    client.set_terminated(remote, "KILLED")
    assert check_claim(TrackingClient(), exp, HASH, mine, frozenset()).won

    done = ticket(client, exp, {})
    client.set_terminated(done, "FINISHED")
    verdict = check_claim(TrackingClient(), exp, HASH, mine, frozenset())
    assert not verdict.won and "finished meanwhile" in verdict.reason


def test_a_failure_the_claimant_did_not_see_loses_the_claim(store) -> None:
    client, exp = store
    earlier = ticket(client, exp, {})
    client.set_terminated(earlier, "FAILED")
    seen = config_status(TrackingClient(), exp, HASH).run_ids  # a retry of the failure it saw
    mine = ticket(client, exp, sweep_process_tags(os.getpid()))
    assert check_claim(TrackingClient(), exp, HASH, mine, seen).won
    meanwhile = ticket(client, exp, {})
    client.set_terminated(meanwhile, "FAILED")  # another sweep ran and failed it meanwhile
    verdict = check_claim(TrackingClient(), exp, HASH, mine, seen)
    assert not verdict.won and verdict.rival == meanwhile


def test_liveness_tests_the_recorded_process_itself_not_a_group_it_does_not_lead() -> None:
    # started from a script or by `mlflow run`, a sweep shares its parent's process group
    child = subprocess.Popen(SLEEP)
    assert os.getpgid(child.pid) != child.pid
    tags, sweep_tags = process_tags(child.pid), sweep_process_tags(child.pid)
    try:
        assert liveness(tags) == "alive" and liveness(sweep_tags) == "alive"
        reused = {**tags, "roofline.pid_start": "1000.000"}  # the same pid, started at another time
        assert liveness(reused) == "dead"
    finally:
        child.kill()
        child.wait()
    assert liveness(tags) == "dead" and liveness(sweep_tags) == "dead"


# One claimant: says it is ready, waits for the start signal, then claims each config hash in turn, as a
# sweep does; it stays alive until every claimant has claimed (the others check this process's tickets).
CLAIMANT = """
import os, sys, time
from pathlib import Path
from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.sweep.child_run import create_child_run
from mlflow_roofline.sweep.claim import check_claim, withdraw
from mlflow_roofline.sweep.lookup import config_status
exp, go, hw, done, claimants = sys.argv[1], Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), int(sys.argv[5])
client = TrackingClient()
configs = [TrainConfig(num_layers=n, hidden_size=16, num_heads=2, ffn_size=32, seq_len=8, batch_size=4)
           for n in range(1, 6)]
print("ready", flush=True)
while not go.exists():
    time.sleep(0.005)
for config in configs:
    key = config.config_hash(hw)
    seen = config_status(client, exp, key).run_ids
    ticket = create_child_run(config, exp, None, hardware=hw, client=client)
    claim = check_claim(client, exp, key, ticket, seen)
    if not claim.won:
        withdraw(client, ticket, claim)
    print(key, "won" if claim.won else "lost", flush=True)
(done / str(os.getpid())).touch()
deadline = time.monotonic() + 300  # a hang guard: a claimant that died shows in its own exit status
while len(list(done.iterdir())) < claimants and time.monotonic() < deadline:
    time.sleep(0.05)
"""


@pytest.mark.slow
def test_claimants_racing_in_real_processes_never_both_win(store, tmp_path) -> None:
    from collections import Counter

    _, exp = store
    go, done = tmp_path / "go", tmp_path / "done"
    done.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMANT, exp, str(go), HW, str(done), str(CLAIMANTS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(CLAIMANTS)
    ]
    try:
        for proc in procs:  # every claimant has imported MLflow and waits at the line
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n", proc.communicate()[1]
        go.touch()
        outputs = [proc.communicate(timeout=300) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0] * CLAIMANTS, [err for _, err in outputs]
    verdicts = [line.split() for out, _ in outputs for line in out.splitlines()]
    assert len(verdicts) == CLAIMANTS * 5
    wins = Counter(key for key, verdict in verdicts if verdict == "won")
    assert all(n == 1 for n in wins.values()), wins  # never two winners of one configuration
    # the store agrees: one live ticket per won configuration, every lost one withdrawn
    runs = train_runs(TrackingClient(), exp)
    assert Counter(r.data.tags[TAG_CONFIG_HASH] for r in runs) == wins


def test_each_repeat_is_claimed_on_its_own(store) -> None:
    from mlflow_roofline.core.schema import TAG_REPEAT
    from mlflow_roofline.sweep.status import DONE

    client, exp = store
    first = create_child_run(CONFIG, exp, None, hardware=HW, client=TrackingClient(), repeat=0)
    assert client.get_run(first).data.tags[TAG_REPEAT] == "0"
    assert check_claim(TrackingClient(), exp, HASH, first, frozenset(), 0).won
    # repeat 1 of the same configuration does not compete with repeat 0's live ticket
    second = create_child_run(CONFIG, exp, None, hardware=HW, client=TrackingClient(), repeat=1)
    assert check_claim(TrackingClient(), exp, HASH, second, frozenset(), 1).won
    # a second ticket for repeat 1 loses to the first one
    again = create_child_run(CONFIG, exp, None, hardware=HW, client=TrackingClient(), repeat=1)
    verdict = check_claim(TrackingClient(), exp, HASH, again, frozenset(), 1)
    assert not verdict.won and verdict.rival == second
    client.set_terminated(first, "FINISHED")
    assert config_status(TrackingClient(), exp, HASH, 0).state == DONE
    assert config_status(TrackingClient(), exp, HASH, 1).state != DONE
    # a run logged before repeats existed (no tag) is repeat 0
    legacy = ticket(client, exp, {})
    assert legacy in config_status(TrackingClient(), exp, HASH, 0).run_ids
    assert legacy not in config_status(TrackingClient(), exp, HASH, 1).run_ids
