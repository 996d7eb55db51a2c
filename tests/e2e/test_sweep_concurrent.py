"""Two sweeps of one spec on one SQLite store, started together: real processes, real training."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
from support.sweeps import CLI, init_store, write_spec

from mlflow_roofline.core.schema import (
    TAG_CLAIM,
    TAG_CONFIG_HASH,
    TAG_PID,
    TAG_RUN_TYPE,
)

pytestmark = pytest.mark.slow


def test_two_sweeps_started_together_run_each_config_once_and_kill_nothing(tracking_uri: str, tmp_path: Path) -> None:
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    spec = write_spec(tmp_path / "twice.yaml", "twice", "{num_layers: [1, 2, 3], hidden_size: 16}")
    init_store()  # before two processes open it at once
    client = MlflowClient()
    sweeps = [
        subprocess.Popen(
            [*CLI, "sweep", str(spec), "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    outputs = [sweep.communicate(timeout=600)[0] for sweep in sweeps]
    assert [sweep.returncode for sweep in sweeps] == [0, 0], outputs

    exp = client.get_experiment_by_name("twice").experiment_id
    runs = client.search_runs([exp], filter_string=f"tags.`{TAG_RUN_TYPE}` = 'train'", max_results=100)
    finished = Counter(r.data.tags[TAG_CONFIG_HASH] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == 3 and set(finished.values()) == {1}, finished
    assert Counter(r.info.status for r in runs) == {"FINISHED": 3}  # none KILLED, FAILED or left RUNNING
    parents = client.search_runs([exp], filter_string=f"tags.`{TAG_RUN_TYPE}` = 'sweep'")
    assert [p.info.status for p in parents] == ["FINISHED", "FINISHED"]
    assert sum(p.data.metrics["configs_finished"] for p in parents) == 3  # each config ran in one sweep only

    # a lost claim leaves a deleted ticket that says so and never started a train process
    every = client.search_runs(
        [exp], filter_string=f"tags.`{TAG_RUN_TYPE}` = 'train'", max_results=100, run_view_type=ViewType.ALL
    )
    tickets = [r for r in every if r.info.lifecycle_stage == "deleted"]
    assert all(TAG_CLAIM in r.data.tags and TAG_PID not in r.data.tags for r in tickets)
    assert sum(TAG_PID in r.data.tags for r in every) == 3  # three train processes in all
