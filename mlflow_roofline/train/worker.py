"""One measured training job, as each of its processes runs it.

``python -m mlflow_roofline.train.worker JOB_DIR`` reads ``JOB_DIR/job.json`` (a
:class:`~mlflow_roofline.train.job_io.JobSpec`), trains, measures, and rank 0 writes
``JOB_DIR/result.json`` (a :class:`~mlflow_roofline.train.job_io.JobResult`); a rank that fails
writes its traceback to ``JOB_DIR/error-rank<i>.txt`` and exits non-zero. A ``single``
job is one such process; a multi-device job N of them under torchrun
(:mod:`mlflow_roofline.train.launch`). :func:`run_job` also runs in-process.

The measured window: the ``warmup`` energy window opens; warm-up steps; a barrier; it
closes and the ``train`` window and the timer open; ``num_steps`` optimizer steps; a
barrier (which waits for the device too); the window closes. Both are named windows of
the meters of :mod:`mlflow_roofline.train.job_energy` (the main meter, its cross-check,
RAPL beside a GPU meter). Each rank's readings are gathered to rank 0. Nothing here
talks to MLflow: the launching process logs what rank 0 reports.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import DATA_PARALLEL_STRATEGIES
from mlflow_roofline.train.flop_count import count_step_flops
from mlflow_roofline.train.job_energy import JOB, TRAIN, WARMUP, JobMeters, combine
from mlflow_roofline.train.job_io import ERROR_FILE, JobResult, JobSpec, RankEnergy
from mlflow_roofline.train.live_energy import LIVE_FILE
from mlflow_roofline.train.parallel import strategy
from mlflow_roofline.train.parallel.dist import DistEnv, setup, teardown
from mlflow_roofline.train.workload import Trainer, batches, build_model, build_optimizer


class StepTimer:
    """Times each step without serialising the device: CUDA events on GPU, a clock on CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._events: list[torch.cuda.Event] = []
        self._times: list[float] = []

    def mark(self) -> None:
        """Record a step boundary."""
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._events.append(event)
        else:
            self._times.append(time.perf_counter())

    def durations_s(self) -> list[float]:
        """Seconds between consecutive marks (call after the device is synchronised)."""
        if self.cuda:
            return [start.elapsed_time(end) / 1e3 for start, end in zip(self._events, self._events[1:])]
        return [end - start for start, end in zip(self._times, self._times[1:])]


def run_job(spec: JobSpec, job_dir: Path | None = None) -> JobResult | None:
    """Train and measure one configuration in this process; rank 0 returns the result.

    With ``job_dir`` and ``spec.live_interval_s``, each rank that reads a meter publishes its
    train window's running energy there (:mod:`~mlflow_roofline.train.live_energy`).
    """
    config = spec.config
    env = setup(config.device, config.num_devices)
    try:
        result = _train_and_measure(config, spec, env, job_dir)
        env.barrier()  # nobody leaves the group while another rank still talks to it
        return result
    finally:
        teardown(env)


def _train_and_measure(config: TrainConfig, spec: JobSpec, env: DistEnv, job_dir: Path | None) -> JobResult | None:
    flops_per_step = 0
    if env.is_main:  # counted once per workload: a sweep hands the count of a workload it measured before
        flops_per_step = count_step_flops(config) if spec.flops_per_step is None else spec.flops_per_step
    parallel = strategy(config.strategy)
    model = parallel.wrap(build_model(config, env.device, spec.seed), env)
    trainer = Trainer(model, build_optimizer(model), config.precision, env.device.type)
    data = batches(config, parallel.rows(config.batch_size, env), seed=spec.seed, device=env.device)
    gpus = [env.device.index] if env.device.type == "cuda" else None
    meters = JobMeters(spec.meter, env.device.type, gpus, env.local_rank)
    reads_meter = meters.reads  # one reader per node for node-wide meters
    if job_dir is not None and spec.live_interval_s:
        meters.publish_to(job_dir / LIVE_FILE.format(rank=env.rank), spec.live_interval_s)
    try:
        meters.begin(JOB)  # spans both windows: one power timeline for the whole job
        if config.warmup_steps:
            meters.begin(WARMUP)
        for _ in range(config.warmup_steps):
            trainer.step(*next(data))
        window = [next(data) for _ in range(config.num_steps)]  # the measured steps' batches, on the device

        env.barrier()
        if config.warmup_steps:
            meters.end(WARMUP)
        meters.begin(TRAIN)
        timer = StepTimer(env.device)
        t0 = time.perf_counter()
        timer.mark()
        losses = []
        for input_ids, labels in window:
            losses.append(trainer.step(input_ids, labels))
            timer.mark()
            meters.step_done()
        env.barrier()  # every rank done, the device drained
        time_s = time.perf_counter() - t0
        measurement = meters.end(TRAIN)
        meters.end(JOB)
        windows = meters.finish() if reads_meter else None
    finally:
        meters.close()
    meter = meters.main

    own = RankEnergy(
        rank=env.rank,
        read=reads_meter,
        energy_j=measurement.energy_j if measurement else None,
        time_s=time_s,
        error=measurement.error if measurement else None,
        warning=measurement.warning if measurement else None,
        windows=windows,
    )
    loss_by_step = torch.stack(losses)
    ranks = [own]
    if env.distributed:
        ranks = [own] * env.world_size
        dist.all_gather_object(ranks, own)
        if config.strategy in DATA_PARALLEL_STRATEGIES:  # each rank's loss is the mean over its own rows
            dist.all_reduce(loss_by_step, op=dist.ReduceOp.SUM)
            loss_by_step /= env.world_size
    if not env.is_main:
        return None
    return _report(flops_per_step, loss_by_step.tolist(), timer.durations_s(), ranks, meter.source, meter.scope)


def _report(
    flops_per_step: int,
    losses: list[float],
    step_times_s: list[float],
    ranks: list[RankEnergy],
    source: str,
    scope: str,
) -> JobResult:
    """The job's result from every rank's window: energies summed over the readers, the longest time."""
    readers = [r for r in ranks if r.read]
    failed = [r for r in readers if r.energy_j is None]
    prefix = len(ranks) > 1
    warnings = [f"rank {r.rank}: {r.warning}" if prefix else r.warning for r in readers if r.warning]
    energy_j = None if failed else sum(r.energy_j for r in readers)  # type: ignore[misc]
    return JobResult(
        flops_per_step=flops_per_step,
        losses=losses,
        time_s=max(r.time_s for r in ranks),
        step_times_s=step_times_s,
        energy_j=energy_j,
        energy_source=source,
        energy_scope=scope,
        energy_error="; ".join(f"rank {r.rank}: {r.error}" if prefix else str(r.error) for r in failed) or None,
        energy_warning="; ".join(warnings) or None,
        ranks=[dataclasses.replace(r, windows=None) for r in ranks],  # their windows are in extras
        extras=combine([(r.rank, r.windows) for r in readers if r.windows is not None], energy_j, scope),
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of one torchrun worker: ``python -m mlflow_roofline.train.worker JOB_DIR``."""
    args = sys.argv[1:] if argv is None else argv
    job_dir = Path(args[0])
    rank = int(os.environ.get("RANK", "0"))
    try:
        result = run_job(JobSpec.read(job_dir), job_dir)
        if result is not None:
            result.write(job_dir)
    except BaseException:
        (job_dir / ERROR_FILE.format(rank=rank)).write_text(traceback.format_exc())
        raise
    return 0


if __name__ == "__main__":
    exit_code = main()
    # Everything is written and the process group destroyed. Leave without interpreter
    # finalization: there, gloo's C++ worker threads can still abort a rank (SIGABRT,
    # "terminate called without an active exception") after a job that succeeded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
