"""Run a sweep: one parent MLflow run, each configuration a nested train run in its own process.

:func:`run_configuration` is the unit a cluster dispatcher could take over: it creates
the child run (:func:`create_child_run`: name, tags, params, ``mlflow.parentRunId``), starts ``mlflow-roofline
train`` in a new process group with ``MLFLOW_RUN_ID`` set to that run, waits, and makes
sure the run ends: train ends it FINISHED or FAILED itself; if the process died without
doing so (SIGKILL, OOM killer, timeout), the run is marked FAILED here with the exit
code or signal and the last lines of its output in ``roofline.error``.

:func:`run_sweep` plans, reconciles the plan with the store (resume), and runs what is
left, baselines first, with a progress bar. It never holds results only in memory:
every finished configuration is a FINISHED run the moment its process ends, so a sweep
killed at any moment loses none. SIGINT/SIGTERM stop the in-flight train process, mark
its run and the parent KILLED, and exit 128 + signal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.errors import RooflineError
from mlflow_roofline.system.signals import raising_on_signals
from mlflow_roofline.core.schema import (
    MAX_TAG_CHARS,
    TAG_ERROR,
    TAG_HARDWARE,
    TAG_PARENT_RUN_ID,
    TAG_RUN_TYPE,
)
from mlflow_roofline.system.liveness import group_alive, liveness, process_tags
from mlflow_roofline.sweep.plan import STALE, Entry, Plan, Status, plan_counts, plan_table, reconcile, store_statuses
from mlflow_roofline.sweep.spec import SweepSpec

TAG_SWEEP_RUN_ID = "roofline.sweep_run_id"
TAG_SPEC = "roofline.spec"
TAG_SPEC_HASH = "roofline.spec_hash"
TAG_LAUNCHER_RUN_ID = "roofline.launcher_run_id"

ERROR_TAIL_LINES = 20
"""Lines of a dead train process's output kept in ``roofline.error``."""

KILL_GRACE_S = 15.0
"""Seconds a train process gets to end its run after SIGTERM before SIGKILL."""

POLL_S = 0.5


class SweepInterrupted(RooflineError):
    """SIGINT or SIGTERM arrived; the sweep stops after marking its runs KILLED."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one configuration's run ended.

    Attributes:
        run_id: the child run.
        status: its final MLflow status (FINISHED, FAILED or KILLED).
        reason: why it did not finish ("" when it did).
        wall_s: seconds from process start to exit.
        returncode: the train process's exit status (negative: killed by that signal).
        summary: the reason in one line.
    """

    run_id: str
    status: str
    reason: str
    wall_s: float
    returncode: int | None
    summary: str = ""


def train_command(config: TrainConfig, meter: str = "auto") -> list[str]:
    """The train CLI invocation measuring ``config`` (one process; it launches its own ranks)."""
    options = [arg for name, value in config.to_params().items() for arg in (f"--{name.replace('_', '-')}", value)]
    return [sys.executable, "-m", "mlflow_roofline.cli", "train", *options, "--meter", meter]


def create_child_run(
    config: TrainConfig, experiment_id: str, parent_run_id: str | None, *, hardware: str, client: Any = None
) -> str:
    """Create the RUNNING train run of ``config`` nested under ``parent_run_id``; its id.

    Named and tagged as train names and tags it (``roofline.run_type=train``, the hashes,
    the hardware), with every param logged, so the run is self-describing even if its
    process never starts. Whatever executes the configuration then logs into this run
    (``MLFLOW_RUN_ID`` for ``mlflow-roofline train``, ``mlflow run -e train --run-id``).
    """
    from mlflow.entities import Param
    from mlflow.tracking import MlflowClient

    from mlflow_roofline.train.tracked_run import train_tags

    client = client or MlflowClient()
    tags = train_tags(config, hardware)
    if parent_run_id:
        tags[TAG_PARENT_RUN_ID] = parent_run_id
        tags[TAG_SWEEP_RUN_ID] = parent_run_id
    run_id = client.create_run(experiment_id, run_name=config.run_name, tags=tags).info.run_id
    try:
        client.log_batch(run_id, params=[Param(k, v) for k, v in config.to_params().items()])
    except BaseException:
        with contextlib.suppress(Exception):
            client.set_terminated(run_id, "FAILED")
        raise
    return run_id


def run_configuration(
    config: TrainConfig,
    experiment_id: str,
    parent_run_id: str | None,
    *,
    hardware: str,
    meter: str = "auto",
    timeout_s: float | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    client: Any = None,
) -> Outcome:
    """Measure one configuration as a child run of ``parent_run_id``, in its own process.

    Args:
        config: a validated configuration (its ``device`` already resolved).
        experiment_id: where the run goes.
        parent_run_id: the sweep run it nests under (None: a top-level run).
        hardware: the ``roofline.hardware`` value its hashes use.
        meter: energy meter the train process asks for.
        timeout_s: wall-clock limit in seconds; past it the process group is killed and
            the run is FAILED.
        log_dir: where the process's output is kept (a temp dir, removed afterwards, if
            None); it is logged as the run's artifact ``sweep/<run id>.log`` on failure.
        client: an ``MlflowClient`` (a new one if None).

    Returns:
        the run's final status. Raises :class:`SweepInterrupted` (after marking the run
        KILLED) if SIGINT/SIGTERM arrives while it runs.
    """
    from mlflow.entities import RunTag
    from mlflow.tracking import MlflowClient

    client = client or MlflowClient()
    run_id = create_child_run(config, experiment_id, parent_run_id, hardware=hardware, client=client)
    proc: subprocess.Popen[bytes] | None = None
    started = time.monotonic()
    own_dir = None if log_dir is not None else tempfile.mkdtemp(prefix="roofline-sweep-")
    log_path = Path(own_dir if own_dir is not None else log_dir) / f"{run_id}.log"
    try:
        env = {
            **os.environ,
            "MLFLOW_RUN_ID": run_id,
            "MLFLOW_EXPERIMENT_ID": experiment_id,
            "MLFLOW_TRACKING_URI": _tracking_uri(),
        }
        env.pop("MLFLOW_EXPERIMENT_NAME", None)
        with open(log_path, "wb") as log:
            # A session of its own: a Ctrl-C at the terminal reaches the sweep, which then
            # stops this process group itself, in order, and marks the run.
            proc = subprocess.Popen(
                train_command(config, meter),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        client.log_batch(run_id, tags=[RunTag(k, v) for k, v in process_tags(proc.pid).items()])
        timed_out = _wait(proc, timeout_s)
        wall_s = time.monotonic() - started
        status = client.get_run(run_id).info.status
        if status == "FINISHED":  # even if it finished just as the timeout struck
            return Outcome(run_id, "FINISHED", "", wall_s, proc.returncode)
        reason = _reason(proc.returncode, timed_out, timeout_s, log_path)
        summary = reason.splitlines()[0]
        if status in ("RUNNING", "SCHEDULED") or timed_out:
            # The process ended (or was ended) without ending its run: say why here.
            client.set_tag(run_id, TAG_ERROR, _head_and_tail(reason, summary))
            client.set_terminated(run_id, "FAILED")
            status = "FAILED"
        else:
            # train ended the run itself; its error's last line says what happened
            reason = client.get_run(run_id).data.tags.get(TAG_ERROR) or reason
            lines = [line.strip() for line in reason.splitlines() if line.strip()]
            summary = lines[-1] if lines else status
        _log_output(client, run_id, log_path)
        return Outcome(run_id, status, reason, wall_s, proc.returncode, summary)
    except BaseException as exc:
        _ignore_signals()
        if proc is not None and proc.poll() is None:
            _stop_group(proc)
        with contextlib.suppress(Exception):
            if client.get_run(run_id).info.status != "FINISHED":
                why = str(exc) if isinstance(exc, SweepInterrupted) else f"sweep stopped ({type(exc).__name__})"
                client.set_tag(run_id, TAG_ERROR, f"{why}; the train process was stopped")
                client.set_terminated(run_id, "KILLED")
        raise
    finally:
        if own_dir is not None and (proc is None or proc.poll() is not None):
            shutil.rmtree(own_dir, ignore_errors=True)


def _tracking_uri() -> str:
    import mlflow

    return mlflow.get_tracking_uri()


def _wait(proc: subprocess.Popen[bytes], timeout_s: float | None) -> bool:
    """Wait for ``proc``; on timeout stop its whole group. Returns whether it timed out."""
    try:
        proc.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        _stop_group(proc)
        return True


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, give it KILL_GRACE_S to end its run, then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + KILL_GRACE_S
    while group_alive(proc.pid, 0.0) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()



def _head_and_tail(reason: str, summary: str) -> str:
    """``reason`` within MAX_TAG_CHARS: its first line and as much of its end as fits."""
    if len(reason) <= MAX_TAG_CHARS:
        return reason
    return f"{summary}\n...\n{reason[-(MAX_TAG_CHARS - len(summary) - 5):]}"


def _reason(returncode: int | None, timed_out: bool, timeout_s: float | None, log_path: Path) -> str:
    if timed_out:
        head = f"train process timed out after {timeout_s:g} s and was killed"
    elif returncode is not None and returncode < 0:
        head = f"train process killed by {signal.Signals(-returncode).name} without ending its run"
    else:
        head = f"train process exited with code {returncode} without ending its run"
    tail = _tail(log_path, ERROR_TAIL_LINES)
    return f"{head}\n{tail}" if tail else head


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _log_output(client: Any, run_id: str, log_path: Path) -> None:
    with contextlib.suppress(Exception):
        client.log_artifact(run_id, str(log_path), artifact_path="sweep")


def _ignore_signals() -> None:
    """During cleanup a second Ctrl-C must not cut the bookkeeping short."""
    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)




# --------------------------------------------------------------------------- the sweep


@dataclasses.dataclass
class SweepResult:
    """What a sweep did: its parent run, the entries with outcomes, the exit status."""

    parent_run_id: str
    entries: list[Entry]
    failed: list[Entry]
    exit_code: int


def run_sweep(
    spec: SweepSpec,
    plan: Plan,
    experiment_id: str,
    *,
    retry_failed: bool = False,
    client: Any = None,
    echo: Callable[[str], None] = print,
    progress: bool = True,
) -> SweepResult:
    """Run every configuration of ``plan`` not yet done in ``experiment_id``.

    The parent is the run in ``MLFLOW_RUN_ID`` (``mlflow run . -e sweep``) when it belongs
    to ``experiment_id``; otherwise the sweep opens its own parent there and links the two
    (tags ``roofline.sweep_run_id`` / ``roofline.launcher_run_id``). The exit code is 0,
    1 if a configuration failed in this sweep, 128 + signal when interrupted.
    """
    from mlflow.tracking import MlflowClient

    client = client or MlflowClient()
    parent_id = _open_parent(client, spec, experiment_id, plan, echo)
    with raising_on_signals(SweepInterrupted):
        try:
            _mark_stale_sweeps(client, experiment_id, parent_id)
            statuses = store_statuses(client, plan, experiment_id)
            entries = reconcile(plan, statuses, retry_failed)
            _log_plan(client, parent_id, spec, plan, entries)
            failed = _run_entries(client, spec, plan, experiment_id, parent_id, entries, echo, progress)
            client.log_dict(parent_id, {"entries": [e.to_dict(plan.hardware) for e in entries]}, "results.json")
            if failed:
                client.set_tag(parent_id, TAG_ERROR, f"{len(failed)} configuration(s) failed")
            client.set_terminated(parent_id, "FAILED" if failed else "FINISHED")
        except SweepInterrupted as exc:
            _ignore_signals()
            client.set_tag(parent_id, TAG_ERROR, str(exc))
            client.set_terminated(parent_id, "KILLED")
            echo(f"Sweep {exc}: in-flight run and sweep run {parent_id} marked KILLED.")
            return SweepResult(parent_id, [], [], 128 + exc.signum)
        except BaseException as exc:
            _ignore_signals()
            with contextlib.suppress(Exception):
                client.set_tag(parent_id, TAG_ERROR, f"{type(exc).__name__}: {exc}"[:MAX_TAG_CHARS])
                client.set_terminated(parent_id, "FAILED")
            raise
    return SweepResult(parent_id, entries, failed, 1 if failed else 0)


def _open_parent(client: Any, spec: SweepSpec, experiment_id: str, plan: Plan, echo: Callable[[str], None]) -> str:
    from mlflow.entities import RunTag

    tags = {
        TAG_RUN_TYPE: "sweep",
        TAG_SPEC: spec.source,
        TAG_SPEC_HASH: spec.spec_hash,
        TAG_HARDWARE: plan.hardware or "",
        **process_tags(os.getpid()),
    }
    launcher = os.environ.get("MLFLOW_RUN_ID")
    if launcher:
        run = client.get_run(launcher)
        if run.info.experiment_id == experiment_id:
            client.log_batch(launcher, tags=[RunTag(k, v) for k, v in tags.items()])
            return launcher
    parent = client.create_run(experiment_id, run_name=f"sweep-{spec.name}", tags=tags)
    parent_id = parent.info.run_id
    if launcher:
        # `mlflow run` put its run in another experiment: nest the train runs where the spec
        # says (the fit reads them there) and link the two runs both ways.
        client.set_tag(launcher, TAG_SWEEP_RUN_ID, parent_id)
        client.set_tag(parent_id, TAG_LAUNCHER_RUN_ID, launcher)
        name = client.get_experiment(experiment_id).name  # the spec's, or --experiment's
        echo(
            f"Note: the project run {launcher} is not in experiment {name!r}; "
            f"the sweep's runs go to {name!r} under sweep run {parent_id}."
        )
    return parent_id


def _mark_stale_sweeps(client: Any, experiment_id: str, parent_id: str) -> None:
    """End RUNNING sweep runs whose process is gone here (a killed earlier sweep) as KILLED."""
    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.`{TAG_RUN_TYPE}` = 'sweep' and attributes.status = 'RUNNING'"
    )
    for run in runs:
        if run.info.run_id != parent_id and liveness(run.data.tags, run.info.run_id) == "dead":
            client.set_tag(run.info.run_id, TAG_ERROR, f"its process is gone; marked KILLED by sweep run {parent_id}")
            client.set_terminated(run.info.run_id, "KILLED")


def _log_plan(client: Any, parent_id: str, spec: SweepSpec, plan: Plan, entries: list[Entry]) -> None:
    grids = [{k: list(v) for k, v in g.items()} for g in spec.grids]
    client.log_text(parent_id, spec.text or json.dumps({"grid": grids}, indent=1), "spec.yaml")
    client.log_text(parent_id, plan_table(entries, plan) + "\n", "plan.txt")
    client.log_dict(parent_id, {"entries": [e.to_dict(plan.hardware) for e in entries]}, "plan.json")
    client.log_dict(parent_id, {"skipped": [s.to_dict() for s in plan.skipped]}, "skipped.json")


def _run_entries(
    client: Any,
    spec: SweepSpec,
    plan: Plan,
    experiment_id: str,
    parent_id: str,
    entries: list[Entry],
    echo: Callable[[str], None],
    progress: bool,
) -> list[Entry]:
    from tqdm import tqdm

    counts = plan_counts(entries, plan)
    tally = {"finished": 0, "failed": 0}
    pending = [e for e in entries if e.action in ("run", "wait")]
    step = 0

    def log_counts() -> None:
        metrics = {
            "configs_planned": counts["configs"],
            "configs_skipped_invalid": counts["skipped_invalid"],
            "configs_already_done": counts["already_done"],
            "configs_failed_earlier": counts["failed_earlier"],
            "configs_finished": tally["finished"],
            "configs_failed": tally["failed"],
            "configs_remaining": len(pending) - tally["finished"] - tally["failed"],
        }
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        client.log_batch(parent_id, metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()])
        from mlflow_roofline.sweep.description import update_description  # the run's Markdown description

        update_description(client, parent_id, spec, plan, entries)

    log_counts()
    failed: list[Entry] = []
    bar = tqdm(total=len(pending), unit="config", disable=not progress, dynamic_ncols=True, file=sys.stderr)
    write = bar.write if progress else echo

    def postfix() -> None:
        bar.set_postfix(
            done=tally["finished"],
            failed=tally["failed"],
            skipped=counts["already_done"] + counts["failed_earlier"] + counts["skipped_invalid"],
            refresh=True,
        )

    postfix()
    log_dir = tempfile.mkdtemp(prefix="roofline-sweep-")
    try:
        for entry in pending:
            bar.set_description(entry.config.run_name)
            if entry.action == "wait":
                finished = _wait_for_live(client, entry, write)
                if finished is not None:
                    entry.outcome = finished
                    tally["finished"] += 1
                    step += 1
                    bar.update(1)
                    postfix()
                    log_counts()
                    continue
            _kill_stale(client, entry.status, parent_id)
            outcome = run_configuration(
                entry.config,
                experiment_id,
                parent_id,
                hardware=plan.hardware or "",
                meter=spec.meter,
                timeout_s=spec.timeout_s,
                log_dir=log_dir,
                client=client,
            )
            entry.outcome = outcome
            if outcome.status == "FINISHED":
                tally["finished"] += 1
            else:
                tally["failed"] += 1
                failed.append(entry)
                write(f"FAILED {entry.config.run_name} (run {outcome.run_id}): {outcome.summary}")
            step += 1
            bar.update(1)
            postfix()
            log_counts()
    finally:
        bar.close()
        shutil.rmtree(log_dir, ignore_errors=True)  # failed runs hold their output as an artifact
    return failed


def _kill_stale(client: Any, status: Status, parent_id: str) -> None:
    """Mark the RUNNING leftovers of a configuration KILLED before it runs again."""
    stale = status.stale_run_ids or ((status.run_id,) if status.state == STALE and status.run_id else ())
    for run_id in stale:
        client.set_tag(run_id, TAG_ERROR, f"its process is gone; marked KILLED by sweep run {parent_id}")
        client.set_terminated(run_id, "KILLED")


def _wait_for_live(client: Any, entry: Entry, write: Callable[[str], None]) -> Outcome | None:
    """Wait for a run another (killed) sweep left running here; its outcome if it FINISHED."""
    run_id = entry.status.run_id or ""
    write(f"waiting for {entry.config.run_name}: run {run_id} is still running here")
    started = time.monotonic()
    while True:
        run = client.get_run(run_id)
        if run.info.status not in ("RUNNING", "SCHEDULED") or liveness(run.data.tags, run_id) != "alive":
            break
        time.sleep(POLL_S)
    run = client.get_run(run_id)
    if run.info.status == "FINISHED":
        return Outcome(run_id, "FINISHED", "", time.monotonic() - started, None)
    if run.info.status in ("RUNNING", "SCHEDULED"):
        entry.status = dataclasses.replace(entry.status, state=STALE)
    return None
