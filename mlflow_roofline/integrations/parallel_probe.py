"""Which parallel strategy and how many devices a training job really ran with.

Read from what happened, never from what a launcher was asked for: the world size from
``torch.distributed`` (1 when no process group exists), the strategy from the types of
the model's modules and parameters:

- FSDP: a ``FullyShardedDataParallel`` module (FSDP1) or an ``FSDPModule`` (FSDP2,
  ``fully_shard``) anywhere in the model -> ``fsdp``;
- tensor parallel: parameters that are ``DTensor`` without FSDP -> ``tp``;
- a ``DistributedDataParallel`` wrapper -> ``ddp``;
- none of these in one process -> ``single``.

Several processes with none of these (each trains its own copy, or an engine this
probe does not know, such as DeepSpeed) give no strategy: the caller reports it missing.
:class:`WrapperSpy` sees the wrapper that called the model's forward when only the inner
model is at hand (the Trainer passes its callbacks the unwrapped model).
"""

from __future__ import annotations

import dataclasses
import functools
import os

import torch
import torch.distributed as dist
from torch.utils.hooks import RemovableHandle


@dataclasses.dataclass(frozen=True)
class ParallelRun:
    """What ran: the strategy (None when unrecognised), processes, this process's ranks."""

    strategy: str | None
    num_devices: int
    rank: int
    local_rank: int
    why_unknown: str = ""

    @property
    def is_main(self) -> bool:
        """True on the process that talks to MLflow (global rank 0)."""
        return self.rank == 0


def world() -> tuple[int, int]:
    """(world size, rank) of the default process group; (1, 0) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def local_rank() -> int:
    """This process's rank on its node (torchrun's ``LOCAL_RANK``; 0 without it)."""
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


def strategy_of(modules: list[torch.nn.Module]) -> str | None:
    """The strategy the modules' own types show (see the module docstring), None if none shows."""
    fsdp_types = _fsdp_types()
    seen_ddp = False
    for root in modules:
        for module in root.modules():
            if fsdp_types and isinstance(module, fsdp_types):
                return "fsdp"
            if isinstance(module, torch.nn.parallel.DistributedDataParallel):
                seen_ddp = True
    if any(_is_dtensor(p) for root in modules for p in root.parameters()):
        return "tp"
    return "ddp" if seen_ddp else None


def probe(modules: list[torch.nn.Module]) -> ParallelRun:
    """The :class:`ParallelRun` of a job whose model is ``modules`` (wrappers and/or inner model)."""
    size, rank = world()
    found = strategy_of(modules)
    why = ""
    if found is None and size == 1:
        found = "single"
    elif found is None:
        why = f"{size} processes but the model is wrapped by neither DDP, FSDP nor tensor parallel"
    elif found in ("ddp", "fsdp", "tp") and size == 1:
        found, why = None, f"the model is wrapped for {found} but only one process ran"
    return ParallelRun(found, size, rank, local_rank(), why)


class WrapperSpy:
    """Records the modules whose forward runs during one training step (a global forward pre-hook).

    Armed for one step only, so its cost (a Python call per module call) is paid once.
    """

    def __init__(self) -> None:
        self.wrappers: list[torch.nn.Module] = []
        self._handle: RemovableHandle | None = None

    @property
    def armed(self) -> bool:
        """True while recording."""
        return self._handle is not None

    def arm(self) -> None:
        """Start recording module calls."""
        if self._handle is None:
            self._handle = torch.nn.modules.module.register_module_forward_pre_hook(self._record)

    def disarm(self) -> None:
        """Stop recording."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _record(self, module: torch.nn.Module, _args: tuple[object, ...]) -> None:
        wrapper = isinstance(module, torch.nn.parallel.DistributedDataParallel) or (
            bool(_fsdp_types()) and isinstance(module, _fsdp_types())
        )
        if wrapper and not any(module is w for w in self.wrappers):
            self.wrappers.append(module)


@functools.lru_cache(maxsize=1)
def _fsdp_types() -> tuple[type, ...]:
    # optional parts of torch.distributed (absent from some builds and versions): imported when probing
    types: list[type] = []
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel

        types.append(FullyShardedDataParallel)
    except ImportError:
        pass
    try:
        from torch.distributed.fsdp import FSDPModule

        types.append(FSDPModule)
    except ImportError:
        pass
    return tuple(types)


def _is_dtensor(param: torch.Tensor) -> bool:
    try:
        from torch.distributed.tensor import DTensor  # optional part of torch.distributed, as above
    except ImportError:
        return False
    return isinstance(param, DTensor)
