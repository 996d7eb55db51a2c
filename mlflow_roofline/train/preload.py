"""What the warm server imports once, so that the ranks it forks start training at once.

Importing this module loads every module a rank of any strategy needs: torch and its
distributed, FSDP2 and tensor-parallel packages, transformers' BERT, the FLOP counter,
the energy meters and the job itself (several CPU-seconds in a fresh interpreter). It
runs no tensor operation: a process that has run one holds OpenMP worker threads, and a
fork copies only the calling thread. Nor does it touch CUDA, which cannot be used in a
child forked after it was initialised: the server is started with
``PYTORCH_NVML_BASED_CUDA_CHECK=1``, so that even an availability check asks NVML
instead of the CUDA driver. (Were CUDA initialised anyway, a rank would fail with
torch's "Cannot re-initialize CUDA in forked subprocess", named in the run's error;
``--launch fresh`` runs each job in processes of its own.)
"""

from __future__ import annotations

import importlib

WARM_MODULES: tuple[str, ...] = (
    "torch.distributed.device_mesh",
    "torch.distributed.fsdp",
    "torch.distributed.tensor.parallel",
    "torch.utils.flop_counter",
    "transformers.models.bert.modeling_bert",
    "mlflow_roofline.energy",
    "mlflow_roofline.train.worker",
    "mlflow_roofline.train.parallel.ddp",
    "mlflow_roofline.train.parallel.fsdp",
    "mlflow_roofline.train.parallel.single",
    "mlflow_roofline.train.parallel.tp",
)
"""What a rank of any strategy imports before its first step."""

for _name in WARM_MODULES:
    importlib.import_module(_name)
