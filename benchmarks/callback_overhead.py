"""Overhead of ``RooflineCallback`` on a Trainer job (target: paired ratio <= 1.01, steps >= 10 ms).

Runs the same tiny Trainer job (``BertForSequenceClassification`` built from ``BertConfig``,
random tokens, CPU, one thread) with and without the callback, the two arms of each round
in random order so drift hits both alike. In both arms a small timing callback records
every optimizer step's wall time; the callback under test runs with its defaults
(meter ``auto``, a sample cut at every step, a history point and a forecast at every
logging step, asynchronous logging to a SQLite store). Prints the median step time of
each arm, the paired ratio of the per-round mean step times (geometric mean with a bootstrap
95 % interval), and the same for whole ``train()`` calls (which also pay for opening the
MLflow run and logging the summary once). Usage::

    python benchmarks/callback_overhead.py [--rounds 12] [--steps 80] [--logging-steps 10]
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
    """Wall time of each optimizer step (on_step_begin to on_step_end of the callbacks before it)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._t0 = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self._t0)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seq: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 1000, (n, seq), generator=generator)
        self.labels = torch.randint(0, 2, (n,), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def job(args: argparse.Namespace, with_callback: bool, out: str) -> tuple[float, float]:
    """One Trainer job; (mean step seconds, every step but the first two; whole train() seconds)."""
    from mlflow_roofline.integrations.transformers import RooflineCallback

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(
        vocab_size=1000, hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden, max_position_embeddings=args.seq))
    clock = StepClock()
    callbacks: list[TrainerCallback] = [RooflineCallback(experiment="callback-overhead")] if with_callback else []
    # The clock goes last: its on_step_end sees the step plus every callback's on_step_end but its own.
    training = TrainingArguments(out, max_steps=args.steps, per_device_train_batch_size=args.batch,
                                 logging_steps=args.logging_steps, report_to=[], use_cpu=True,
                                 save_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=model, args=training, train_dataset=Tokens(4096, args.seq),
                      callbacks=[*callbacks, clock])
    t0 = time.perf_counter()
    trainer.train()
    whole = time.perf_counter() - t0
    return statistics.fmean(clock.times[2:]), whole


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
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--logging-steps", type=int, default=10)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
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
        step_ratios, whole_ratios, plain, tracked = [], [], [], []
        for _ in range(args.rounds):
            arms = [True, False]
            random.shuffle(arms)
            result = {arm: job(args, arm, f"{tmp}/out") for arm in arms}
            plain.append(result[False][0])
            tracked.append(result[True][0])
            step_ratios.append(result[True][0] / result[False][0])
            whole_ratios.append(result[True][1] / result[False][1])
    print(f"median over rounds of the mean step: without {statistics.median(plain) * 1e3:.2f} ms, "
          f"with callback {statistics.median(tracked) * 1e3:.2f} ms ({args.rounds} rounds x {args.steps} steps)")
    ratio, lo, hi = geometric_ci(step_ratios)
    print(f"step time ratio with/without (paired): {ratio:.4f}  95% CI [{lo:.4f}, {hi:.4f}]  target <= 1.01")
    ratio, lo, hi = geometric_ci(whole_ratios)
    print(f"whole train() ratio with/without (paired): {ratio:.4f}  95% CI [{lo:.4f}, {hi:.4f}]")


if __name__ == "__main__":
    main()
