"""Overhead of ``RooflineCallback`` on a Trainer job (target: paired ratio <= 1.01, steps >= 10 ms).

Runs the same tiny Trainer job (``BertForSequenceClassification`` built from ``BertConfig``,
random tokens, CPU, one thread) with and without the callback, the two arms of each round
in random order so drift hits both alike. In both arms a small timing callback records
every optimizer step's wall time; the callback under test runs with its defaults
(meter ``auto``, a sample cut at every step, a history point and a forecast at every
logging step, asynchronous logging to a SQLite store). Prints the median step time of
each arm in wall and process CPU time, the paired ratio of the per-round means (geometric mean with a bootstrap
95 % interval), and the same for whole ``train()`` calls (which also pay for opening the
MLflow run and logging the summary once), and the time spent inside the callback's per-step code
(on_step_end and the batch hook) as a fraction of the plain step: the overhead without the
noise of a shared machine. Usage::

    python benchmarks/callback_overhead.py [--rounds 12] [--steps 150] [--logging-steps 10]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

import numpy as np
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)


class StepClock(TrainerCallback):
    """Wall and process CPU time of each optimizer step (on_step_begin to on_step_end of the callbacks before it).

    CPU time counts every thread of the process (MLflow's asynchronous logging thread too)
    and is insensitive to other processes taking the cores of a shared machine.
    """

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self._t0 = (0.0, 0.0)

    def on_step_begin(self, args, state, control, **kwargs):
        self._t0 = (time.perf_counter(), time.process_time())

    def on_step_end(self, args, state, control, **kwargs):
        self.wall.append(time.perf_counter() - self._t0[0])
        self.cpu.append(time.process_time() - self._t0[1])


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seq: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 1000, (n, seq), generator=generator)
        self.labels = torch.randint(0, 2, (n,), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


INSIDE: list[float] = []
"""Wall seconds spent inside the callback's per-step code (on_step_end and the batch hook)."""
INSIDE_CPU: list[float] = []
"""The same in CPU seconds of the training thread (insensitive to other processes)."""


def timed_callback() -> TrainerCallback:
    """``RooflineCallback`` that adds the time spent in its per-step code to :data:`INSIDE`."""
    from mlflow_roofline.integrations.transformers import RooflineCallback

    class Timed(RooflineCallback):
        def on_step_end(self, *a, **k):
            t0, c0 = time.perf_counter(), time.thread_time()
            super().on_step_end(*a, **k)
            INSIDE.append(time.perf_counter() - t0)
            INSIDE_CPU.append(time.thread_time() - c0)

        def _batch_hook(self, *a, **k):
            t0, c0 = time.perf_counter(), time.thread_time()
            super()._batch_hook(*a, **k)
            INSIDE.append(time.perf_counter() - t0)
            INSIDE_CPU.append(time.thread_time() - c0)

    return Timed(experiment="callback-overhead")


def job(args: argparse.Namespace, with_callback: bool, out: str) -> tuple[float, float, float]:
    """One Trainer job: mean wall and CPU seconds of a step (all but the first two); whole train() seconds."""
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
    callbacks: list[TrainerCallback] = [timed_callback()] if with_callback else []
    # The clock goes last: its on_step_end sees the step plus every callback's on_step_end but its own.
    training = TrainingArguments(
        out,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch,
        logging_steps=args.logging_steps,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=training, train_dataset=Tokens(4096, args.seq), callbacks=[*callbacks, clock])
    t0 = time.perf_counter()
    trainer.train()
    whole = time.perf_counter() - t0
    return statistics.fmean(clock.wall[2:]), statistics.fmean(clock.cpu[2:]), whole


def geometric_ci(ratios: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Geometric mean of the paired ratios and its bootstrap 95 % interval."""
    logs = np.log(ratios)
    rng = np.random.default_rng(seed)
    boots = [np.exp(rng.choice(logs, size=len(logs)).mean()) for _ in range(5000)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(np.exp(logs.mean())), float(lo), float(hi)


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
        import logging

        logging.getLogger("mlflow").setLevel(logging.WARNING)
        job(args, True, f"{tmp}/out")  # warm both paths (imports, store schema)
        job(args, False, f"{tmp}/out")
        results: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
        for _ in range(args.rounds):
            arms = [True, False]
            random.shuffle(arms)
            for arm in arms:
                results[arm].append(job(args, arm, f"{tmp}/out"))
    print(f"{args.rounds} rounds x {args.steps} steps, logging every {args.logging_steps}")
    for index, what in enumerate(("step wall time", "step CPU time", "whole train() wall time")):
        with_cb = [r[index] for r in results[True]]
        without = [r[index] for r in results[False]]
        ratio, lo, hi = geometric_ci([a / b for a, b in zip(with_cb, without)])
        print(
            f"{what}: without {statistics.median(without) * 1e3:.2f} ms, with {statistics.median(with_cb) * 1e3:.2f}"
            f" ms (medians over rounds); paired ratio {ratio:.4f}  95% CI [{lo:.4f}, {hi:.4f}]"
        )
    steps = (len(results[True]) + 1) * args.steps
    plain_cpu = statistics.median(r[1] for r in results[False])
    for what, spent in (("wall", INSIDE), ("CPU", INSIDE_CPU)):
        per_step = sum(spent) / steps
        print(
            f"inside the callback ({what}): {per_step * 1e6:.1f} us per step (mean, logging steps included) = "
            f"{per_step / plain_cpu:.2%} of the plain step's CPU time"
        )
    print("target: step time ratio <= 1.01 on a step of >= 10 ms")


if __name__ == "__main__":
    main()
