"""Fixed cost of a train run: the full entry point against the bare training loop.

For one small configuration, interleaved ``--repeats`` times in one session:

  (a) bare: the workload's training loop in this process (model, AdamW, warm-up, then the
      timed ``num_steps`` steps): the training time itself;
  (b) full: ``mlflow-roofline train`` as a fresh process against an SQLite store that
      already exists (as in a sweep): checks, launch, imports, FLOP count, meter,
      MLflow run and logging, everything.

It prints the medians of both, the run's own measured window (``time_s``), the fixed
overhead ``(b) - (a)`` and its ratio to the training time. Target: overhead < 5 s per run.

    python benchmarks/train_overhead.py [--strategy single|ddp|fsdp|tp] [--num-devices N]
                                        [--num-steps 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPE = {"num_layers": 2, "hidden_size": 64, "num_heads": 2, "ffn_size": 256, "seq_len": 32, "batch_size": 8}


def bare_loop_s(config) -> float:
    """Seconds of ``num_steps`` training steps in this process, after the warm-up (the job's loop)."""
    from mlflow_roofline.train.workload import Trainer, batches, build_model, build_optimizer

    model = build_model(config)
    trainer = Trainer(model, build_optimizer(model), config.precision, "cpu")
    data = batches(config, slice(0, config.batch_size))
    for _ in range(config.warmup_steps):
        trainer.step(*next(data))
    window = [next(data) for _ in range(config.num_steps)]
    start = time.perf_counter()
    for input_ids, labels in window:
        trainer.step(input_ids, labels)
    return time.perf_counter() - start


def full_run_s(args: argparse.Namespace, env: dict[str, str], experiment: str) -> tuple[float, float, float]:
    """Wall seconds of ``mlflow-roofline train``, the run's own ``time_s``, and the CPU seconds
    of its whole process tree (launcher, torchrun, ranks: what a busy machine makes you wait for)."""
    from mlflow.tracking import MlflowClient

    command = [
        sys.executable,
        "-m",
        "mlflow_roofline.cli",
        "train",
        "--experiment",
        experiment,
        "--strategy",
        args.strategy,
        "--num-devices",
        str(args.num_devices),
        "--device",
        "cpu",
        "--num-steps",
        str(args.num_steps),
        "--warmup-steps",
        "3",
        "--meter",
        "estimate",
    ]
    for key, value in SHAPE.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    client = MlflowClient()
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    [run] = client.search_runs([experiment_id], order_by=["attributes.start_time DESC"], max_results=1)
    return wall, run.data.metrics["time_s"], cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategy", default="single")
    parser.add_argument("--num-devices", type=int, default=1)
    parser.add_argument("--num-steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from mlflow_roofline.core.config import TrainConfig

    workdir = Path(tempfile.mkdtemp(prefix="train-overhead-"))
    os.chdir(workdir)
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    os.environ["MLFLOW_TRACKING_URI"] = uri
    threads = os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(threads))
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID")}
    from mlflow.tracking import MlflowClient

    MlflowClient().create_experiment("overhead")  # the store exists, as in a sweep
    # The bare loop runs what one rank runs: under ddp/fsdp its share of the batch.
    config = TrainConfig(**SHAPE, num_steps=args.num_steps, warmup_steps=3)
    if args.strategy in ("ddp", "fsdp"):
        config = TrainConfig(
            **{**SHAPE, "batch_size": SHAPE["batch_size"] // args.num_devices}, num_steps=args.num_steps, warmup_steps=3
        )

    bare, full, window, cpu = [], [], [], []
    for _ in range(args.repeats):
        bare.append(bare_loop_s(config))
        wall, time_s, cpu_s = full_run_s(args, env, "overhead")
        full.append(wall)
        window.append(time_s)
        cpu.append(cpu_s)
    b, f, w, c = (statistics.median(x) for x in (bare, full, window, cpu))
    overhead = f - b
    print(
        f"configuration: {SHAPE} steps={args.num_steps} strategy={args.strategy} x{args.num_devices} "
        f"OMP_NUM_THREADS={threads} cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f}"
    )
    print(f"bare training loop (in-process, median of {args.repeats}): {b:8.3f} s")
    print(f"full entry point (mlflow-roofline train, wall):      {f:8.3f} s")
    print(f"  its measured window (time_s):                      {w:8.3f} s")
    print(f"  CPU seconds of its process tree:                   {c:8.3f} s   (on {os.cpu_count()} cores)")
    print(f"fixed overhead (full - bare):                        {overhead:8.3f} s   (target < 5 s)")
    print(f"overhead / training time:                            {overhead / b:8.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
