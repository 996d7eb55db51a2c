"""A train run: one configuration, trained and measured, logged as one MLflow run.

The order of things, which is what makes a run trustworthy:

1. the configuration is parsed and checked: every rule of :meth:`TrainConfig.validate`,
   device availability (N no more than the visible GPUs), precision, meter. A bad field
   opens the run only to end it FAILED with ``roofline.error`` and is raised as a
   one-line :class:`~mlflow_roofline.core.errors.ConfigError`; no process is started;
2. the job starts in its own processes (:mod:`mlflow_roofline.train.launch`): one for
   ``single``, N under torchrun for the others. It starts before this process imports
   MLflow, so that its imports and model building overlap with the MLflow work;
3. the run is opened: the one ``MLFLOW_RUN_ID`` names (``mlflow run`` and the sweep set
   it), else a new one; params, tags and proxies are logged
   (:mod:`mlflow_roofline.train.run_logging`). A named run that is not RUNNING, does not
   exist, already holds a measurement or whose params contradict the configuration is
   refused untouched (:mod:`mlflow_roofline.tracking.run_ownership`) and the job stopped;
4. rank 0 reports the measured window in a file; its metrics are logged and the run ends
   FINISHED. Any failure (a crash, an OOM, a rank that dies, SIGTERM) ends it FAILED or
   KILLED, with the error's last lines in ``roofline.error`` and the whole text in the
   artifact ``error.txt``, and the job's processes are stopped. Never left RUNNING: if
   this process is killed outright (SIGKILL), its watchdog
   (:mod:`mlflow_roofline.system.watchdog`) stops the job, removes the temp folder and
   ends the run KILLED within seconds.

Only this (launching) process talks to MLflow; the training processes write files.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlflow_roofline.core.carbon import resolve_carbon_live
from mlflow_roofline.core.config import TrainConfig, precision_problem
from mlflow_roofline.core.errors import ConfigError, Interrupted, RooflineError
from mlflow_roofline.core.schema import P_METER
from mlflow_roofline.system.signals import raising_on_signals
from mlflow_roofline.system.watchdog import Watchdog
from mlflow_roofline.tracking.system_metrics_monitor import sampling_interval_s
from mlflow_roofline.train.device import DEVICE_KINDS, hardware_name, resolve_device
from mlflow_roofline.train.job_failure import TrainingFailed, job_error
from mlflow_roofline.train.job_io import JobResult, JobSpec
from mlflow_roofline.train.launch import Job, LaunchResult
from mlflow_roofline.train.live_energy import LiveFiles

JOB_MODULE = "mlflow_roofline.train.worker"


def train(
    options: Mapping[str, object],
    meter: str = "auto",
    experiment: str | None = None,
    seed: int = 0,
    carbon: Mapping[str, Any] | None = None,
    system_metrics: bool | None = None,
) -> tuple[str, JobResult]:
    """Run and log one train run; return its MLflow run id and the job's result.

    Args:
        options: the train params as given (strings or numbers; ``device`` may be ``auto``).
        meter: the energy meter (``auto``, ``nvml``, ``nvml_power``, ``rapl``, ``estimate``).
        experiment: the experiment of a new run (ignored when ``MLFLOW_RUN_ID`` names one).
        seed: seed of the weights and of the synthetic batches.
        carbon: keyword arguments of :func:`~mlflow_roofline.core.carbon.resolve_carbon`
            (``carbon_intensity``, ``region``, ``pue``, ``price_per_kwh``); the env vars
            fill what they leave out.
        system_metrics: log MLflow's system metrics for the run (None: on unless
            ``MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING`` says false).

    Raises:
        ConfigError: a bad param or carbon setting (the run has ended FAILED).
        MeterError: the meter is unknown or unavailable (the run has ended FAILED).
        TrainingFailed: the job failed (the run has ended FAILED).
        Interrupted: SIGTERM or SIGINT (the run has ended KILLED, the job is stopped).
    """
    # SIGTERM/SIGINT while the run is in flight: end it KILLED and stop its processes.
    with raising_on_signals(Interrupted):
        return _train(options, meter, experiment, seed, carbon or {}, system_metrics)


def _train(
    options: Mapping[str, object],
    meter: str,
    experiment: str | None,
    seed: int,
    carbon: Mapping[str, Any],
    system_metrics: bool | None = None,
) -> tuple[str, JobResult]:
    try:
        config = parse_config(options)
        check_meter(meter, config.device)
        settings = resolve_carbon_live(**carbon)
    except RooflineError as bad_input:
        from mlflow_roofline.tracking.client import TrackingClient  # imports MLflow, heavy: only once it is needed
        from mlflow_roofline.train.run_logging import train_run

        with train_run(TrackingClient(), experiment, _run_name(options)):
            raise bad_input
    # The watchdog cleans up if this process is killed outright: job, temp folder, run.
    with Watchdog() as watchdog, tempfile.TemporaryDirectory(prefix="roofline-job-") as tmp:
        watchdog.remove(tmp)
        job_dir = Path(tmp)
        JobSpec(config.to_params(), meter=meter, seed=seed, live_interval_s=sampling_interval_s()).write(job_dir)
        job = Job(config.num_devices, JOB_MODULE, [str(job_dir)])
        watchdog.stop_group(job.process.pid)
        try:
            # MLflow's import is heavy: imported here, it overlaps the job's start
            from mlflow_roofline.tracking import system_metrics_monitor as sysm  # MLflow's System metrics tab
            from mlflow_roofline.tracking.client import TrackingClient
            from mlflow_roofline.tracking.system_energy import system_energy  # the meter's, beside MLflow's
            from mlflow_roofline.train import run_logging as train_tracking

            params = {**config.to_params(), P_METER: meter}
            client = TrackingClient()  # the command's one client
            with (
                train_tracking.train_run(client, experiment, config.run_name, params, watchdog) as run_id,
                sysm.system_metrics(run_id, sysm.system_metrics_wanted(system_metrics)),
                system_energy(run_id, LiveFiles(job_dir), client),
            ):
                train_tracking.log_setup(client, run_id, config, meter, hardware_name(config.device))
                result = read_result(job.wait(), job_dir, config.num_devices)
                train_tracking.log_result(client, run_id, config, result, settings)
        finally:
            job.stop()
    return run_id, result


def read_result(launched: LaunchResult, job_dir: Path, nproc: int) -> JobResult:
    """What rank 0 reported for a job that ended as ``launched`` says.

    Raises:
        TrainingFailed: the job failed (naming the rank that failed first and how), or it
            succeeded without rank 0 writing its result.
    """
    if not launched.ok:
        raise job_error(job_dir, launched.returncode, launched.output_tail, nproc, launched.rank_codes)
    try:
        return JobResult.read(job_dir)
    except FileNotFoundError as exc:
        raise TrainingFailed("the job exited 0 but rank 0 wrote no result") from exc


def parse_config(options: Mapping[str, object]) -> TrainConfig:
    """The validated configuration of ``options``, with ``device`` resolved.

    Raises:
        ConfigError: naming the first param that breaks a rule, and the rule.
    """
    values = {k: v for k, v in options.items() if v is not None}
    device = resolve_device(str(values.get("device", "auto")))
    config = TrainConfig.from_mapping({**values, "device": device})
    config.validate()
    precision = precision_problem(config)
    if precision is not None:
        raise precision
    if DEVICE_KINDS[config.device].accelerator:
        visible = DEVICE_KINDS[config.device].count()
        if config.num_devices > visible:
            raise ConfigError(
                "num_devices",
                f"must be at most the {visible} visible {config.device} device(s), got {config.num_devices}",
            )
        from mlflow_roofline.train.workload import check_precision  # imports torch, heavy: only for a GPU config

        check_precision(config.precision, config.device)  # bf16 needs a GPU that has it
    return config


def _run_name(options: Mapping[str, object]) -> str | None:
    """The run name of ``options`` if its fields parse at all (even if they break a rule)."""
    try:
        values = {k: v for k, v in options.items() if v is not None}
        return TrainConfig.from_mapping({**values, "device": "cpu"}).run_name
    except ConfigError:
        return None


def check_meter(name: str, device: str) -> None:
    """Fail before training when the meter is unknown or unavailable here.

    Raises:
        MeterError: naming the choices.
    """
    from mlflow_roofline.energy import make_meter  # the meters import pynvml and psutil: only when checking one

    make_meter(name, device=device).close()
