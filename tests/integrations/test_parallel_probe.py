"""The strategy probe in one process. On the project's own DDP, FSDP2 and tensor-parallel models (2 gloo
ranks) it runs inside tests/train/test_parallel.py's torchrun job: one launch for both."""

from __future__ import annotations

from mlflow_roofline.integrations.parallel_probe import probe


def test_one_process_without_wrappers_is_single() -> None:
    import torch

    run = probe([torch.nn.Linear(2, 2)])
    assert (run.strategy, run.num_devices, run.is_main) == ("single", 1, True)
