"""The strategy probe on the project's own DDP, FSDP2 and tensor-parallel models (torchrun, 2 gloo ranks)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mlflow_roofline.integrations.parallel_probe import probe
from mlflow_roofline.train.launch import torchrun_command, worker_env

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_probe_reads_the_strategy_from_the_models_own_types(tmp_path: Path) -> None:
    command = torchrun_command(2, "tests.probe_checks", [str(tmp_path)])
    done = subprocess.run(
        command, cwd=REPO, env=worker_env(2), capture_output=True, text=True, timeout=400, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads((tmp_path / "probe.json").read_text())
    for name in ("ddp", "fsdp", "tp"):
        assert found[name] == {"direct": name, "inner_and_seen": name, "num_devices": 2}
    assert found["unwrapped"]["strategy"] is None
    assert found["unwrapped"]["why"] == "2 processes but the model is wrapped by neither DDP, FSDP nor tensor parallel"


def test_one_process_without_wrappers_is_single() -> None:
    import torch

    run = probe([torch.nn.Linear(2, 2)])
    assert (run.strategy, run.num_devices, run.is_main) == ("single", 1, True)
