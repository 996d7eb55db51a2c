"""Run by tests/parallel_checks.py inside its torchrun job (2 ranks, gloo): not a test module.

Wraps the project's BERT with each of its strategies (DDP, FSDP2, tensor parallel) and
returns what :func:`mlflow_roofline.integrations.parallel_probe.probe` reads from the
wrapped model, and from the inner model plus the wrappers seen running one forward
(tests/train/test_parallel.py checks it).
"""

from __future__ import annotations

import torch

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.integrations.parallel_probe import WrapperSpy, probe
from mlflow_roofline.train.parallel import strategy
from mlflow_roofline.train.parallel.dist import DistEnv
from mlflow_roofline.train.workload import build_model

SHAPE = {"num_layers": 2, "hidden_size": 32, "num_heads": 2, "ffn_size": 64, "seq_len": 8, "batch_size": 4}


def probe_strategies(env: DistEnv) -> dict[str, dict[str, object]]:
    """What the probe says of each strategy's model on this rank, and of an unwrapped model."""
    found: dict[str, dict[str, object]] = {}
    for name in ("ddp", "fsdp", "tp"):
        config = TrainConfig(**SHAPE, strategy=name, num_devices=2)
        inner = build_model(config, env.device)
        wrapped = strategy(name).wrap(inner, env)
        spy = WrapperSpy()
        spy.arm()
        wrapped(torch.zeros(2, SHAPE["seq_len"], dtype=torch.long))
        spy.disarm()
        direct, seen = probe([wrapped]), probe([inner, *spy.wrappers])
        found[name] = {"direct": direct.strategy, "inner_and_seen": seen.strategy, "num_devices": direct.num_devices}
    plain = probe([build_model(TrainConfig(**SHAPE), env.device)])
    found["unwrapped"] = {"strategy": plain.strategy, "why": plain.why_unknown}
    return found
