"""A command that runs out of memory says so in one line, never a traceback.

A real memory error: the sweep's planner lists a spec's (configuration, repeat) units,
in a process whose address space is capped at 1 GB (``RLIMIT_AS``).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).parent / "mlflow-roofline")
MEMORY_CAP_BYTES = 1_000_000_000

SPEC = """\
description: far more repeats than memory holds
experiment: roofline-bert
device: cpu
precision: fp32
num_steps: 2
warmup_steps: 0
seq_len: 16
batch_size: 2
num_heads: 2
ffn_ratio: 4
repeats: 100000000
grid:
  - {num_layers: [1, 2], hidden_size: [32, 64, 128]}
"""


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def test_running_out_of_memory_while_planning_is_one_line(tracking_uri: str, tmp_path: Path) -> None:
    spec = tmp_path / "huge.yaml"
    spec.write_text(SPEC)
    done = subprocess.run(
        # the size bound (sweep --max-configs) refuses such a spec up front: lift it to reach the planner
        [CLI, "sweep", str(spec), "--dry-run", "--no-progress", "--max-configs", "1000000000000"],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_cap_memory,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip() and " INFO " not in line]
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("Error: sweep: "), done.stderr[-3000:]
