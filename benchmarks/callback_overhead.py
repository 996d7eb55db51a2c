"""Overhead of ``RooflineCallback`` on a Trainer job, beside Hugging Face's own ``MLflowCallback``.

Targets: paired step-time ratio <= 1.01 at a logging step every 10 steps of a >= 10 ms
step, no worse than ``MLflowCallback`` + 0.5 %; fixed cost per ``train()`` <= 0.3 s.

Runs the same tiny Trainer job (``BertForSequenceClassification`` built from ``BertConfig``,
random tokens, CPU, one thread) in five arms: no callback (``none``), the same once more
(``none-again``: what the paired ratio reads for no difference at all), HF's ``MLflowCallback``
(``report_to="mlflow"``: ``mlflow``), ``RooflineCallback`` (``roofline``: its own run) and both
(``both``: the callback joins HF's run), the arms of each round in random order so drift
hits all alike. The callback under test runs with its defaults (meter ``auto``, a sample
cut at every step, a history point and a forecast at every logging step). The store is a
SQLite file, as a user's default store is.

Per job it records:

- **the step time**: the time from one step's ``on_step_begin`` to the next one's, so it
  holds the step, every callback (``on_step_end``, ``on_log``: the logging step's work)
  and whatever the store writes cost the training thread. The steady mean drops the first
  two steps. Also in process CPU time (every thread: MLflow's logging threads, the
  callback's history writer), which other processes on a shared machine do not inflate.
- **the fixed cost of a train() call**: the whole ``train()`` minus its number of steps
  times its steady step: what the job costs beyond its steps (opening and ending the run,
  the summary, the first steps' extras). An arm's fixed cost is the median over rounds of
  its figure minus the ``none`` arm's of the same round.
- the wall time inside the callbacks' ``on_train_begin`` and ``on_train_end``, and the
  training thread's CPU time inside their per-step code (``on_step_end``, ``on_log``, the
  batch hook) per step, and the CPU of the process's other threads per step (MLflow's
  logging threads, the callback's history writer). The **CPU cost** is the per-step code
  plus the other threads' CPU beyond the ``none`` arm's, as a share of a plain step's CPU:
  CPU seconds of fixed work, which a shared machine's slow spells inflate on both sides
  alike; it leaves out the training thread's waits for the GIL, which the wall ratio holds.

Prints, for each arm against ``none`` (``none-again`` first: the noise floor), the geometric
mean of the paired per-round step-time ratios with a bootstrap 95 % interval (wall and CPU),
the fixed cost and the CPU cost; then
``roofline`` against ``mlflow`` and ``both`` against ``mlflow``, the comparisons the
targets name. Usage::

    python benchmarks/callback_overhead.py [--rounds 12] [--steps 150] [--logging-steps 10]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

ARMS = ("none", "none-again", "mlflow", "roofline", "both")
"""``none-again`` is ``none`` once more: its ratio to ``none`` is what the benchmark reads for no difference."""
EDGES = ("on_train_begin", "on_train_end")
PER_STEP = ("on_step_begin", "on_step_end", "on_log", "_batch_hook")


class StepClock(TrainerCallback):
    """Wall time, process CPU time and the training thread's CPU time at each ``on_step_begin``."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.training_thread: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())
        self.training_thread.append(time.thread_time())

    def steady(self) -> tuple[float, float, float]:
        """Mean seconds per step from one step's begin to the next one's (the first two steps left out):
        wall, process CPU (every thread, ended ones too), and the CPU of every thread but the training one
        (MLflow's logging threads, the callback's history writer, a meter's sampler)."""
        wall = np.diff(self.wall)[2:]
        cpu = np.diff(self.cpu)[2:]
        training = np.diff(self.training_thread)[2:]
        return float(wall.mean()), float(cpu.mean()), float((cpu - training).mean())


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seq: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 1000, (n, seq), generator=generator)
        self.labels = torch.randint(0, 2, (n,), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


@dataclass
class Job:
    """One job's figures (seconds)."""

    step_wall: float
    step_cpu: float
    step_other_threads_cpu: float
    whole: float
    fixed: float
    edges: float
    inside_cpu: float


@dataclass
class CallbackTimes:
    """Time spent in the measured callbacks of one job: wall seconds in ``on_train_begin``/``on_train_end``,
    and CPU seconds of the training thread in their per-step code (:data:`PER_STEP`; the batch hook
    is ``RooflineCallback``'s forward pre-hook)."""

    edges: float = 0.0
    per_step_cpu: float = 0.0

    def wrap(self, callback: TrainerCallback) -> None:
        """Time this callback's methods (on the instance: the Trainer calls them through it)."""
        for name in (*EDGES, *PER_STEP):
            if hasattr(callback, name):
                setattr(callback, name, self._timed(getattr(callback, name), name in EDGES))

    def _timed(self, method: Callable[..., Any], edge: bool) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                if edge:
                    self.edges += time.perf_counter() - t0
                else:
                    self.per_step_cpu += time.thread_time() - c0

        return timed


def job(args: argparse.Namespace, arm: str, out: str) -> Job:
    """One Trainer job in ``arm``."""
    from transformers.integrations import MLflowCallback

    from mlflow_roofline.integrations.transformers import RooflineCallback

    torch.manual_seed(0)
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=1000,
            hidden_size=args.hidden,
            num_hidden_layers=args.layers,
            num_attention_heads=args.heads,
            intermediate_size=4 * args.hidden,
            max_position_embeddings=args.seq,
        )
    )
    clock = StepClock()
    ours: list[TrainerCallback] = (
        [RooflineCallback(experiment="callback-overhead")] if arm in ("roofline", "both") else []
    )
    training = TrainingArguments(
        out,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch,
        logging_steps=args.logging_steps,
        report_to=["mlflow"] if arm in ("mlflow", "both") else [],
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=training, train_dataset=Tokens(4096, args.seq), callbacks=[*ours, clock])
    times = CallbackTimes()
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, (MLflowCallback, RooflineCallback)):
            times.wrap(callback)
    with contextlib.redirect_stdout(io.StringIO()):  # the Trainer prints every logging step's dict
        t0 = time.perf_counter()
        trainer.train()
        whole = time.perf_counter() - t0
    step_wall, step_cpu, other_threads = clock.steady()
    fixed = whole - args.steps * step_wall
    return Job(step_wall, step_cpu, other_threads, whole, fixed, times.edges, times.per_step_cpu / args.steps)


def geometric_ci(ratios: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Geometric mean of the paired ratios and its bootstrap 95 % interval."""
    logs = np.log(ratios)
    rng = np.random.default_rng(seed)
    boots = [np.exp(rng.choice(logs, size=len(logs)).mean()) for _ in range(5000)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(np.exp(logs.mean())), float(lo), float(hi)


def cpu_cost(ours: list[Job], none: list[Job]) -> float:
    """The callbacks' CPU per step as a share of a plain step's CPU (median over rounds).

    Their per-step code on the training thread, plus what the other threads burned beyond the
    ``none`` arm's of the same round (MLflow's logging threads, the history writer). CPU seconds
    of fixed work, so a machine that runs slower for a while inflates both sides alike; what it
    leaves out is the training thread waiting for the GIL while another thread holds it.
    """
    return statistics.median(
        (a.inside_cpu + max(0.0, a.step_other_threads_cpu - b.step_other_threads_cpu)) / b.step_cpu
        for a, b in zip(ours, none)
    )


def report(results: dict[str, list[Job]], steps: int) -> None:
    """Print each arm against ``none`` (the A/A arm first), and ``roofline`` and ``both`` against ``mlflow``."""
    none = results["none"]
    print(
        f"none: step {statistics.median(j.step_wall for j in none) * 1e3:.2f} ms wall, "
        f"{statistics.median(j.step_cpu for j in none) * 1e3:.2f} ms CPU, "
        f"train() {statistics.median(j.whole for j in none):.2f} s (medians over rounds)"
    )
    pairs = (("none-again", "none"), ("mlflow", "none"), ("roofline", "none"), ("both", "none"), ("roofline", "mlflow"))
    for arm, base in pairs:
        ours, theirs = results[arm], results[base]
        line = [f"{arm} / {base}:"]
        for what, get in (("step wall", lambda j: j.step_wall), ("step CPU", lambda j: j.step_cpu)):
            ratio, lo, hi = geometric_ci([get(a) / get(b) for a, b in zip(ours, theirs)])
            line.append(f"{what} ratio {ratio:.4f} [{lo:.4f}, {hi:.4f}]")
        fixed = statistics.median(a.fixed - b.fixed for a, b in zip(ours, theirs))
        line.append(f"fixed cost {fixed:+.3f} s per train()")
        if base == "none" and arm != "none-again":
            inside = statistics.median(j.inside_cpu for j in ours)
            plain = statistics.median(j.step_cpu for j in none)
            line.append(f"in on_train_begin/end {statistics.median(j.edges for j in ours):.3f} s")
            line.append(f"per-step code {inside * 1e6:.0f} us CPU = {inside / plain:.2%} of a plain step")
            line.append(f"CPU cost with its threads {cpu_cost(ours, none):.2%} of a plain step")
        print("  ".join(line))
    both = geometric_ci([a.step_wall / b.step_wall for a, b in zip(results["both"], results["mlflow"])])
    print(f"both / mlflow: step wall ratio {both[0]:.4f} [{both[1]:.4f}, {both[2]:.4f}] (roofline added to HF's run)")
    print(
        f"{len(none)} rounds x {steps} steps; targets: roofline / none <= 1.01, "
        "roofline / none <= mlflow / none + 0.005, roofline fixed cost <= 0.3 s; "
        "none-again / none is the ratio this machine reads for two identical arms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--logging-steps", type=int, default=10)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{tmp}/mlflow.db")
        os.environ.setdefault("MLFLOW_EXPERIMENT_NAME", "callback-overhead")  # where MLflowCallback opens its runs
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        logging.getLogger("transformers").setLevel(logging.WARNING)
        for arm in ARMS:  # warm every path (imports, the store's schema, the law lookup)
            job(args, arm, f"{tmp}/out")
        results: dict[str, list[Job]] = {arm: [] for arm in ARMS}
        for _ in range(args.rounds):
            for arm in random.sample(ARMS, len(ARMS)):
                results[arm].append(job(args, arm, f"{tmp}/out"))
    report(results, args.steps)


if __name__ == "__main__":
    main()
