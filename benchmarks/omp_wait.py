"""CPU time of a training job whose OpenMP threads spin against one whose threads sleep.

The estimate meter charges a job its CPU seconds; an OpenMP thread that spins at the end of
every parallel region (libgomp's default) burns CPU seconds that grow with the machine's load,
not with the job. This benchmark trains a tiny BERT (built from ``BertConfig``, random tokens)
for ``--steps`` AdamW steps on ``--threads`` torch threads in a fresh process per trial, with
``OMP_WAIT_POLICY`` unset (OpenMP's default) and with
:data:`mlflow_roofline.train.launch.OMP_WAIT_POLICY`, alternated so drift hits both arms alike.
With ``--busy K`` it first starts K busy loops (one Python process each) that share the cores
with the job, as other jobs on a shared node would, and stops them at the end. Prints each
trial's process CPU seconds and wall seconds, then each arm's range. Usage::

    python benchmarks/omp_wait.py [--busy 2] [--trials 3] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable

from mlflow_roofline.train.launch import OMP_WAIT_POLICY

TRIAL = """
import json, sys, time
import torch
from transformers import BertConfig, BertForSequenceClassification

hidden, steps = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
config = BertConfig(vocab_size=1000, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=4 * hidden, max_position_embeddings=64, num_labels=2)
model = BertForSequenceClassification(config).train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
batch = {"input_ids": torch.randint(0, 1000, (8, 32)), "attention_mask": torch.ones(8, 32, dtype=torch.long),
         "labels": torch.randint(0, 2, (8,))}

def step():
    optimizer.zero_grad()
    model(**batch).loss.backward()
    optimizer.step()

for _ in range(5):
    step()
cpu_start, wall_start = time.process_time(), time.perf_counter()
for _ in range(steps):
    step()
print(json.dumps({"cpu_s": time.process_time() - cpu_start, "wall_s": time.perf_counter() - wall_start}))
"""

#: The OpenMP variables each arm sets (the caller's own are removed first): libgomp's default
#: (spin about 300,000 iterations before sleeping), a short spin, and never spinning.
ARMS: dict[str, dict[str, str]] = {
    "OpenMP default (spin)": {},
    "GOMP_SPINCOUNT=10000": {"GOMP_SPINCOUNT": "10000"},
    f"OMP_WAIT_POLICY={OMP_WAIT_POLICY}": {"OMP_WAIT_POLICY": OMP_WAIT_POLICY},
}
OPENMP_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def trial(arm_env: dict[str, str], args: argparse.Namespace) -> dict[str, float]:
    """One fresh process's measured steps: ``cpu_s`` (process CPU seconds) and ``wall_s``."""
    env = {key: value for key, value in os.environ.items() if key not in OPENMP_WAIT_VARIABLES}
    env["OMP_NUM_THREADS"] = str(args.threads)
    env.update(arm_env)
    command = [sys.executable, "-c", TRIAL, str(args.hidden), str(args.steps)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        settings = arm_env or "the OpenMP default"
        raise SystemExit(f"a trial with {settings} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text}")
        return value

    return parse


positive_int = int_at_least(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--busy", type=int_at_least(0), default=0, help="busy loops sharing the cores (default 0)")
    parser.add_argument("--trials", type=positive_int, default=3, help="trials per arm, alternated (default 3)")
    parser.add_argument("--steps", type=positive_int, default=40, help="measured AdamW steps per trial (default 40)")
    parser.add_argument("--threads", type=positive_int, default=2, help="torch/OpenMP threads (default 2)")
    parser.add_argument("--hidden", type=positive_int, default=256, help="BERT hidden size (default 256)")
    args = parser.parse_args()

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    results: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    try:
        for round_index in range(args.trials):
            for arm, arm_env in ARMS.items():
                result = trial(arm_env, args)
                results[arm].append(result)
                print(f"round {round_index + 1} {arm:28s} cpu {result['cpu_s']:7.2f} s  wall {result['wall_s']:7.2f} s")
    finally:
        for process in busy:
            process.kill()
            process.wait()
    print(f"\n{args.busy} busy loop(s), {os.cpu_count()} cores, {args.threads} threads, {args.steps} steps:")
    for arm, trials in results.items():
        cpu = [t["cpu_s"] for t in trials]
        wall = [t["wall_s"] for t in trials]
        print(f"  {arm:28s} cpu {min(cpu):.1f}-{max(cpu):.1f} s  wall {min(wall):.1f}-{max(wall):.1f} s")


if __name__ == "__main__":
    main()
