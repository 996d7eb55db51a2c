"""Tiny PyTorch Lightning jobs for the Lightning integration tests (not a test module).

A LightningModule around the tiny BERT of :mod:`integration_jobs` (a config, no download) on
generated tokens, on CPU. Imported by the tests, and run by them as a script that Lightning
itself launches on two processes (its own subprocess launcher, gloo)::

    python tests/lightning_jobs.py ddp OUT_DIR        # mlflow.pytorch.autolog() + mlflow_roofline.autolog()
    python tests/lightning_jobs.py ddp-logger OUT_DIR # Lightning's MLFlowLogger + mlflow_roofline.autolog()
    python tests/lightning_jobs.py fsdp2 OUT_DIR      # FSDP2 (fully_shard in configure_model) + the callback

Every rank writes OUT_DIR/rank<i>.json: the world size, the rank and the model's wrapper as
``torch.distributed`` and the strategy say inside ``fit`` (what really ran).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from integration_jobs import TokenData, tiny_bert

OPTIONS: dict[str, Any] = {"meter": "estimate", "warmup_steps": 2, "forecast_after_steps": 4}
"""Our measurement's options in these jobs: the CPU estimate (no counter here), a short warm-up."""


class TinyBertModule(pl.LightningModule):
    """A LightningModule fine-tuning the tiny BERT classifier; logs ``train_loss`` every step."""

    def __init__(self, shard: bool = False) -> None:
        super().__init__()
        self.model = tiny_bert()
        self.shard = shard
        self.seen: dict[str, Any] = {}

    def configure_model(self) -> None:
        """Under ModelParallelStrategy: FSDP2 shards each encoder layer and the whole model."""
        if not self.shard:
            return
        from torch.distributed.fsdp import fully_shard

        mesh = self.device_mesh["data_parallel"]
        for layer in self.model.bert.encoder.layer:
            fully_shard(layer, mesh=mesh)
        fully_shard(self.model, mesh=mesh)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model(**batch).loss
        self.log("train_loss", loss)
        if not self.seen:
            self.seen = _what_runs(self.trainer)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def _what_runs(trainer: pl.Trainer) -> dict[str, Any]:
    dist = torch.distributed
    on = dist.is_available() and dist.is_initialized()
    return {
        "world_size": dist.get_world_size() if on else 1,
        "rank": dist.get_rank() if on else 0,
        "backend": dist.get_backend() if on else None,
        "wrapper": type(trainer.strategy.model).__name__,
        "fsdp2_modules": sum(type(m).__name__.startswith("FSDP") for m in trainer.lightning_module.modules()),
    }


def data(rows: int = 400, batch: int = 4) -> torch.utils.data.DataLoader:
    """Generated token rows in batches of ``batch``."""
    return torch.utils.data.DataLoader(TokenData(rows), batch_size=batch)


def trainer(**kwargs: Any) -> pl.Trainer:
    """A lean CPU Trainer: 10 steps, logging every 2, no checkpoint, progress bar or summary; ``kwargs`` win."""
    settings: dict[str, Any] = dict(
        accelerator="cpu",
        devices=1,
        max_steps=10,
        log_every_n_steps=2,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
    )
    return pl.Trainer(**{**settings, **kwargs})


def _distributed_job(kind: str, out: Path) -> None:
    import mlflow

    import mlflow_roofline

    module = TinyBertModule(shard=kind == "fsdp2")
    callbacks: list[pl.Callback] = []
    options: dict[str, Any] = {"strategy": "ddp", "devices": 2}
    if kind == "ddp":
        mlflow.set_experiment("lightning-ddp")
        mlflow.pytorch.autolog(log_models=False, checkpoint=False)
        mlflow_roofline.autolog(**OPTIONS)
    elif kind == "ddp-logger":
        mlflow_roofline.autolog(**OPTIONS)
        from lightning.pytorch.loggers import MLFlowLogger

        options["logger"] = MLFlowLogger("lightning-ddp", tracking_uri=mlflow.get_tracking_uri())
    else:
        from lightning.pytorch.strategies import ModelParallelStrategy

        from mlflow_roofline.integrations.lightning import RooflineCallback

        options["strategy"] = ModelParallelStrategy(data_parallel_size=2, tensor_parallel_size=1)
        callbacks.append(RooflineCallback(**OPTIONS, experiment="lightning-fsdp"))
    job = trainer(callbacks=callbacks, max_steps=8, **options)
    job.fit(module, data(rows=160))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{module.seen['rank']}.json").write_text(json.dumps(module.seen))


if __name__ == "__main__":
    _distributed_job(sys.argv[1], Path(sys.argv[2]))
