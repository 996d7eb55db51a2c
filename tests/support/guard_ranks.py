"""A rank of a real two-process gloo job for the autolog safety net's test; light to import
(no MLflow, no transformers), since each spawned rank imports it."""

from __future__ import annotations

import json
import logging
import os

from mlflow_roofline.integrations.safety import JobGuard, around


def guard_in_a_job_of_two_processes(rank: int, out: str) -> None:
    """One rank of a real gloo job: what a failure of ours does there (tests/integrations/test_autolog_safety.py)."""
    import torch.distributed as dist

    # The guard reads only the group's membership (initialised, two ranks); it sends nothing. Gloo
    # connects its full mesh of sockets at init unless told to wait for the first collective, and
    # that eager connect once failed under CI load ("connectFullMesh failed ... Connection closed
    # by peer") before the guard ran at all. The group stays a real one of two processes.
    os.environ["TORCH_GLOO_LAZY_INIT"] = "1"
    dist.init_process_group("gloo", init_method=f"file://{out}/rendezvous", rank=rank, world_size=2)
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("mlflow_roofline.integrations.safety").addHandler(handler)
    abandoned: list[str] = []
    guard = JobGuard(abandoned.append)

    def gpu_lost(_result: object) -> None:
        raise RuntimeError("NVML: GPU is lost")

    step = around(
        lambda: "the user's result", "optimizer.step", after=lambda result: guard.run("a step", gpu_lost, result)
    )
    outcome = ""
    try:
        step()
    except RuntimeError as exc:
        outcome = f"raised {exc}"
    finally:
        dist.destroy_process_group()
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump({"outcome": outcome, "warnings": seen, "abandoned": abandoned}, f)
