"""The process group of a job: who this process is, which device it drives, how to sync.

A job of N processes gets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` from its launcher.
Under torchrun (:mod:`mlflow_roofline.train.launch`) the rendezvous is torchrun's own
(``MASTER_ADDR``/``MASTER_PORT``). Ranks forked by the warm launcher
(:mod:`mlflow_roofline.train.warm`) meet instead in a file of the job's folder named by
``ROOFLINE_RENDEZVOUS_FILE`` (a c10d ``FileStore``: no port to choose, nothing left
listening). A ``single`` job runs without a process group at all.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from mlflow_roofline.train.launch import RENDEZVOUS_FILE_ENV

if TYPE_CHECKING:  # torch.distributed.device_mesh loads the mesh machinery: only FSDP2 and TP use it
    from torch.distributed.device_mesh import DeviceMesh

PROCESS_GROUP_TIMEOUT = datetime.timedelta(minutes=10)
"""How long a collective waits for a missing rank before the job fails instead of hanging."""


@dataclasses.dataclass(frozen=True)
class DistEnv:
    """This process's place in the job.

    Attributes:
        rank: global rank (0 .. world_size-1).
        world_size: processes in the job (N).
        local_rank: rank on this node; the index of the GPU it drives on CUDA.
        device: the torch device this process computes on.
    """

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def distributed(self) -> bool:
        """Whether a process group is initialised (N > 1)."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that reports the job's results."""
        return self.rank == 0

    def mesh(self) -> DeviceMesh:
        """A 1-D device mesh over all ranks (for FSDP2 and tensor parallel)."""
        from torch.distributed.device_mesh import init_device_mesh  # slow to load: only FSDP2 and TP need it

        return init_device_mesh(self.device.type, (self.world_size,))

    def barrier(self) -> None:
        """Wait for every rank (and, on CUDA, for this device's queued work)."""
        synchronize(self.device)
        if self.distributed:
            if self.device.type == "cuda":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()


def synchronize(device: torch.device) -> None:
    """Block until ``device`` has finished its queued work (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def setup(device_type: str, world_size: int) -> DistEnv:
    """Join the job's process group (gloo on CPU, NCCL on CUDA) when ``world_size`` > 1.

    Raises:
        RuntimeError: torchrun's environment disagrees with ``world_size``.
    """
    if world_size == 1:
        device = torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else torch.device("cpu")
        return DistEnv(rank=0, world_size=1, local_rank=0, device=device)
    env_world = int(os.environ.get("WORLD_SIZE", "1"))
    if env_world != world_size:
        raise RuntimeError(f"expected {world_size} processes from the launcher, WORLD_SIZE says {env_world}")
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    rendezvous = os.environ.get(RENDEZVOUS_FILE_ENV)
    init_method = f"file://{rendezvous}" if rendezvous else None  # None: torchrun's env://
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank if rendezvous else -1,
        world_size=world_size if rendezvous else -1,
        timeout=PROCESS_GROUP_TIMEOUT,
        device_id=device if device_type == "cuda" else None,
    )
    if dist.get_world_size() != world_size:
        raise RuntimeError(f"process group has {dist.get_world_size()} ranks, expected {world_size}")
    return DistEnv(rank=rank, world_size=world_size, local_rank=local_rank, device=device)


def teardown(env: DistEnv) -> None:
    """Leave the process group, if one was joined."""
    if env.distributed and dist.is_initialized():
        dist.destroy_process_group()
