"""Run by tests/test_parallel_strategies.py under torchrun (2 ranks, gloo): not a test module.

For each multi-device strategy it records, per rank, into OUT_DIR/rank<i>.json:
- the sharding as it really is (DTensor placements, local vs full sizes, head counts);
- the global-batch loss and the pre-clip gradient norm of each of K steps, next to
  those of the single-device model trained on the same global batches here;
- the largest difference between the trained weights and the single-device ones;
- one step in fp16 (gradient scaler) and bf16, to show they run on sharded parameters;
- what the strategy probe reads from each strategy's model (tests/probe_checks.py), in the
  same process group: one launch for both.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.train.parallel import strategy
from mlflow_roofline.train.parallel.dist import setup, teardown
from mlflow_roofline.train.parallel.tp import LAYER_PLAN
from mlflow_roofline.train.workload import Trainer, batches, build_model, build_optimizer
from tests.probe_checks import probe_strategies

STEPS = 5
CLIP = 0.05  # below every step's gradient norm here, so clipping (on DTensors too) acts on each step
SHAPE = dict(num_layers=2, hidden_size=64, num_heads=4, ffn_size=128, seq_len=16, batch_size=8)


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def train(config: TrainConfig, env, precision: str = "fp32", steps: int = STEPS):
    model = build_model(config, env.device)
    parallel = strategy(config.strategy)
    wrapped = parallel.wrap(model, env)
    trainer = Trainer(wrapped, build_optimizer(wrapped), precision, "cpu", max_grad_norm=CLIP)
    data = batches(config, parallel.rows(config.batch_size, env))
    losses, norms = [], []
    for _ in range(steps):
        loss = trainer.step(*next(data))
        if config.strategy in ("ddp", "fsdp"):
            dist.all_reduce(loss)
            loss /= env.world_size
        losses.append(float(loss))
        norms.append(float(trainer.last_grad_norm))
    return model, wrapped, losses, norms


def sharding(name: str, model: torch.nn.Module, wrapped: torch.nn.Module, env) -> dict:
    info: dict = {"wrapper": type(wrapped).__name__}
    params = dict(model.named_parameters())
    if name == "fsdp":
        info["all_dtensor_shard0"] = all(
            isinstance(p, DTensor) and [str(pl) for pl in p.placements] == ["S(0)"] for p in params.values()
        )
        info["local_numel"] = sum(p.to_local().numel() for p in params.values())
        info["full_numel"] = sum(p.numel() for p in params.values())
        info["fsdp_units"] = sum(type(m).__name__.startswith("FSDP") for m in model.modules())
    if name == "tp":
        planned = {}
        for i, layer in enumerate(model.bert.encoder.layer):
            for sub in LAYER_PLAN:
                w = layer.get_submodule(sub).weight
                planned[f"{i}.{sub}"] = {
                    "placements": [str(pl) for pl in w.placements] if isinstance(w, DTensor) else None,
                    "local": list(w.to_local().shape) if isinstance(w, DTensor) else list(w.shape),
                    "full": list(w.shape),
                }
            info["heads"] = layer.attention.self.num_attention_heads
            info["all_head_size"] = layer.attention.self.all_head_size
        info["planned"] = planned
        info["unplanned_dtensors"] = sorted(
            n for n, p in params.items() if isinstance(p, DTensor) and not any(s in n for s in LAYER_PLAN)
        )
    if name == "ddp":
        rows = strategy("ddp").rows(SHAPE["batch_size"], env)
        info["rows"] = [rows.start, rows.stop]
    return info


def main(out_dir: Path) -> None:
    torch.set_num_threads(1)
    env = setup("cpu", 2)
    record: dict = {"clip": CLIP, "rank": env.rank, "world_size": dist.get_world_size(), "backend": dist.get_backend()}
    reference = TrainConfig(**SHAPE, strategy="single", num_devices=1)
    single_model, _, record["single_losses"], record["single_norms"] = train(reference, env)
    single_weights = {n: p.detach() for n, p in single_model.named_parameters()}
    initial = dict(build_model(reference).named_parameters())
    record["single_update"] = max(float((single_weights[n] - p.detach()).abs().max()) for n, p in initial.items())
    for name in ("ddp", "fsdp", "tp"):
        config = TrainConfig(**SHAPE, strategy=name, num_devices=2)
        model, wrapped, losses, norms = train(config, env)
        weight_diff = max(
            float((full(p.detach()) - single_weights[n]).abs().max()) for n, p in model.named_parameters()
        )
        record[name] = {
            "losses": losses,
            "norms": norms,
            "max_weight_diff": weight_diff,
            "sharding": sharding(name, model, wrapped, env),
        }
        if name in ("fsdp", "tp"):
            for precision in ("fp16", "bf16"):
                record[name][precision] = train(config, env, precision, steps=2)[2]
    record["probe"] = probe_strategies(env)
    (out_dir / f"rank{env.rank}.json").write_text(json.dumps(record))
    teardown(env)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
