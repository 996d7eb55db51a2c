"""One configuration measured from the sweep's own process, its ranks forked warm.

The local executor's default (``--launch warm``): no ``mlflow-roofline train`` process per
configuration. The sweep, which has MLflow and its tracking store loaded already, does
what that process would do: it checks the configuration and the meter as train does,
logs the setup into the child run, forks the job's ranks from its warm server
(:mod:`mlflow_roofline.train.warm`), waits for them (within the spec's timeout), logs
what rank 0 reported and ends the run. The run ends as train would end it, with the same
metrics, tags and one-line reasons:

- FINISHED;
- FAILED, with the rank that failed first and how (``roofline.error``, the whole text
  as ``error.txt``) and the ranks' output as the artifact ``sweep/<run id>.log``; a
  timeout stops the ranks and says so. The sweep goes on with the next configuration;
- KILLED when the sweep is interrupted (SIGINT/SIGTERM): the ranks are stopped first.

``--launch fresh`` measures each configuration in an ``mlflow-roofline train`` process of
its own instead (:mod:`mlflow_roofline.sweep.fresh_child`), as Slurm jobs always do. A
Ray worker calls :func:`run_child_warm` with a server of its own (:mod:`mlflow_roofline.sweep.remote.claimed_task`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import traceback
from pathlib import Path

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.sweep.fresh_child import LOG_ARTIFACT_DIR, mark_abandoned
from mlflow_roofline.sweep.spec import CarbonKeys, resolved_carbon
from mlflow_roofline.sweep.status import Outcome
from mlflow_roofline.sweep.step_flops import StepFlops
from mlflow_roofline.system.liveness import process_tags
from mlflow_roofline.system.signals import ignore_stop_signals
from mlflow_roofline.tracking import system_metrics_monitor as sysm
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.system_energy import system_energy
from mlflow_roofline.train.job_failure import TrainingFailed
from mlflow_roofline.train.job_io import JobSpec
from mlflow_roofline.train.live_energy import LiveFiles
from mlflow_roofline.train.run import check_meter, parse_config, read_result
from mlflow_roofline.train.run_logging import log_result, log_setup, record_failure
from mlflow_roofline.train.warm import WarmJob, WarmServer


def run_child_warm(
    run_id: str,
    config: TrainConfig,
    *,
    server: WarmServer,
    hardware: str,
    client: TrackingClient,
    meter: str = "auto",
    timeout_s: float | None = None,
    carbon: CarbonKeys | None = None,
    seed: int = 0,
    job_root: str | None = None,
    step_flops: StepFlops | None = None,
) -> Outcome:
    """Measure ``config`` into the new RUNNING run ``run_id`` (made for this measurement: its system
    metrics start at step 0 unread) with ranks forked from ``server``; its outcome.

    The job's folder (spec, rendezvous file, rank logs) is made in ``job_root`` (the
    system's temp folder if None) and removed at the end. ``step_flops``: the sweep's counted
    FLOPs of one step by workload (:mod:`~mlflow_roofline.sweep.step_flops`): a workload counted
    before is handed to the ranks; this one's count is kept, and the next one counted ahead.

    Raises whatever stops the sweep (``Interrupted``, ``KeyboardInterrupt``) after
    stopping the ranks and marking the run KILLED; any other failure ends the run FAILED
    and is returned as the outcome.
    """
    started = time.monotonic()
    job_dir = Path(tempfile.mkdtemp(prefix="roofline-job-", dir=job_root))
    job: WarmJob | None = None
    returncode: int | None = None
    try:
        try:
            settings = resolved_carbon(carbon or {})
            checked = parse_config(config.to_params())  # train's own checks: devices, precision
            check_meter(meter, checked.device)
            workload = checked.workload_hash(hardware)
            known_flops = None if step_flops is None else step_flops.known(workload)
            JobSpec(checked.to_params(), meter, seed, sysm.sampling_interval_s(), known_flops).write(job_dir)
            job = WarmJob(server, checked.num_devices, job_dir)
            log_setup(client, run_id, checked, meter, hardware, tags=process_tags(job.pid))
            with (
                sysm.system_metrics(run_id, sysm.system_metrics_wanted(None), new_run=True),
                system_energy(run_id, LiveFiles(job_dir), client, new_run=True),
            ):
                launched = job.wait(timeout_s)
            if launched is None:
                job.stop()
                raise TrainingFailed(f"train job timed out after {timeout_s:g} s and was killed", job.output_tail())
            returncode = launched.returncode
            result = read_result(launched, job_dir, checked.num_devices)
            if step_flops is not None:  # the next workload is counted while this one is logged
                step_flops.record(workload, result.flops_per_step)
                step_flops.count_ahead(config)
            log_result(client, run_id, checked, result, settings)
        except Exception as exc:  # this configuration failed; the sweep goes on
            return _failed(client, run_id, exc, job, job_dir, returncode, time.monotonic() - started)
        client.end_run(run_id, "FINISHED")
        return Outcome(run_id, "FINISHED", "", time.monotonic() - started, returncode)
    except BaseException as exc:
        ignore_stop_signals()  # a second Ctrl-C must not cut the bookkeeping short
        if job is not None:
            job.stop()
        mark_abandoned(client, run_id, exc)
        raise
    finally:
        if job is not None:
            job.stop()
        shutil.rmtree(job_dir, ignore_errors=True)


def _failed(
    client: TrackingClient,
    run_id: str,
    exc: Exception,
    job: WarmJob | None,
    job_dir: Path,
    returncode: int | None,
    wall_s: float,
) -> Outcome:
    """End ``run_id`` FAILED with why (tag, ``error.txt``, the ranks' output); the outcome."""
    summary = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    detail = getattr(exc, "detail", "") if isinstance(exc, RooflineError) else traceback.format_exc()
    record_failure(client, run_id, summary, detail)
    if job is not None:
        log = job_dir / f"{run_id}.log"
        log.write_text(job.output_tail() + "\n")
        with contextlib.suppress(Exception):  # the run must still be ended; its error tag says what happened
            client.log_artifact(run_id, str(log), artifact_path=LOG_ARTIFACT_DIR)
    client.end_run(run_id, "FAILED")
    reason = f"{summary}\n{detail}".strip() if detail else summary
    return Outcome(run_id, "FAILED", reason, wall_s, returncode, summary)
