"""The MLflow side of a job measured inside the user's loop (main process only).

It joins the run it is given (a Lightning ``MLFlowLogger``'s, in that logger's store), else
the active run when there is one (the run MLflow's own ``MLflowCallback``,
``mlflow.pytorch.autolog()`` or the user opened), else opens its own in ``experiment`` (else
``MLFLOW_EXPERIMENT_ID`` / ``_NAME``, else ``roofline-bert``, where ``fit`` looks by
default). History points are
gathered and written in one store batch every few seconds by a thread of the run's own
(:class:`~mlflow_roofline.integrations.history_buffer.HistoryBuffer`), so a logging step
neither waits for the store nor pays a store write; every way the run ends below writes
what was gathered before it ends the run. MLflow's asynchronous queue is not used: its
logging thread polls once a second, and ending a run waits for it (about 1 s per job).

A param the run already holds with another value (``MLflowCallback`` logs the Trainer's
``warmup_steps``, the learning-rate warm-up) is left as it is: MLflow cannot change a
logged param. The value measured here goes to the ``roofline.param_conflict`` tag.

Never left RUNNING while training runs, whoever opened the run, the user's ``with
mlflow.start_run()`` blocks around it included:

- training that raises ends the run with the reason in ``roofline.error``
  (:meth:`RunLog.finish` with ``failed``; under ``autolog`` as ``Trainer.train`` raises, else
  when the process exits): after a ``KeyboardInterrupt`` (Ctrl-C) the run and the user's runs
  around it end KILLED; after another exception, which it names, the job's own run ends
  FAILED, and a run it joined gets the reason and is ended FAILED by its owner (the ``with``
  block), else at exit. A run the user's block ended FAILED without a reason gets it at exit;
- SIGTERM ends the run KILLED, and, where SIGTERM ends the process (the default
  disposition before ours), every run of MLflow's active stack; then the signal takes its
  course (the previous handler, or the default: the process ends);
- SIGKILL (the OOM killer) runs nothing in this process: the process's watchdog
  (:func:`mlflow_roofline.system.watchdog.process_watchdog`, one for all the jobs of a
  process) ends the run and the runs around it KILLED within seconds. The history points
  gathered since the last write (at most :data:`~mlflow_roofline.integrations.history_buffer.FLUSH_S`
  seconds of them) die with the process;
- every ending goes through :mod:`~mlflow_roofline.tracking.run_ending`: a second and a third
  Ctrl-C while MLflow flushes and ends the run wait until it is ended; a run that still could
  not be ended keeps its watchdog hook armed, and the watchdog ends it once the process is gone.

A tracking store that fails (cannot be written, a path that cannot be created) never
stops training: one warning line, and the job goes on without logging. When measuring
fails under ``autolog`` (:mod:`~mlflow_roofline.integrations.safety`), :meth:`RunLog.abandon`
ends the job's own run FAILED with the reason.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from types import FrameType

from mlflow_roofline.core.schema import MAX_TAG_CHARS, TAG_ENERGY_ERROR, TAG_ERROR, TAG_PARAM_CONFLICT
from mlflow_roofline.integrations.history_buffer import HistoryBuffer
from mlflow_roofline.system.watchdog import Watchdog, process_watchdog
from mlflow_roofline.tracking.client import RunStatus, TrackingClient, current_tracking_uri
from mlflow_roofline.tracking.experiments import experiment_id_for
from mlflow_roofline.tracking.orphans import END_ORPHANED_RUN, orphan_hook_kwargs
from mlflow_roofline.tracking.run_ending import end_runs, failure_outcome, interrupted_reason, settle_after_failure
from mlflow_roofline.tracking.run_ownership import same_param
from mlflow_roofline.tracking.store_errors import quiet_store_logging, store_error_line
from mlflow_roofline.tracking.system_energy import EnergyReadings, SystemEnergy

logger = logging.getLogger(__name__)

SIGTERM_REASON = "the training process got SIGTERM"
UNFINISHED_REASON = "training stopped before its end (an exception?)"
INTERRUPTED_REASON = interrupted_reason("training")

SignalHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None
"""What ``signal.signal`` returns: a Python handler, ``SIG_DFL``/``SIG_IGN``, or None."""


class RunLog:
    """One MLflow run this job's measurements go to.

    Args:
        experiment, run_name: where and how to open a run of its own.
        run_id: a run to join (None: the active run, else one of its own).
        tracking_uri: the store of ``run_id`` (None: MLflow's current one).

    Raises:
        Exception: the store cannot open or join the run.
    """

    def __init__(
        self, experiment: str | None, run_name: str | None, run_id: str | None = None, tracking_uri: str | None = None
    ) -> None:
        quiet_store_logging()
        self.client = TrackingClient(tracking_uri)
        stack = [run_id] if run_id is not None else self.client.active_run_ids()
        self.own = not stack
        self.run_id = stack[-1] if stack else self.client.open_run(experiment_id_for(self.client, experiment), run_name)
        self.around: list[str] = stack[:-1]
        """The user's runs around the one joined (``with mlflow.start_run(): with ...(nested=True):``), outer first."""
        self._ended = False
        self._broken = False
        self._failure: BaseException | None = None  # what training raised, for the run's end at exit
        self.history = HistoryBuffer(self.client, self.run_id, self._break)
        self.system_energy: SystemEnergy | None = None
        # The process may die before finish(): the watchdog, at exit, SIGTERM end the run then.
        self._watchdog: Watchdog | None = process_watchdog()
        self.watchdog_pid: int = self._watchdog.process.pid
        """The watchdog's process: a child of this one, which a meter of the job's processes leaves out."""
        uri = self.client.tracking_uri
        self._hooks = {run_id: orphan_hook_kwargs(run_id, uri) for run_id in [*self.around, self.run_id]}
        for hook in self._hooks.values():  # armed until the runs are ended or handed back to their owner
            self._watchdog.arm(END_ORPHANED_RUN, **hook)
        atexit.register(self._left_open)
        self._previous_sigterm: SignalHandler = None
        self._sigterm_installed = False
        self._install_sigterm()

    def log(self, step: int, metrics: Mapping[str, float] | None = None, tags: Mapping[str, str] | None = None) -> None:
        """Gather metrics at ``step`` (timestamped now) and tags: written within seconds, or by :meth:`finish`."""
        if self._broken:
            return
        self.history.add(step, metrics, {k: str(v)[:MAX_TAG_CHARS] for k, v in (tags or {}).items()})

    def watch_energy(self, readings: EnergyReadings) -> None:
        """Log ``readings`` (the energy window's running total) as the run's ``system/..._energy_wh``
        from now until the run is finished or abandoned (:mod:`~mlflow_roofline.tracking.system_energy`)."""
        if self._broken or self.system_energy is not None:
            return
        self.system_energy = SystemEnergy(self.run_id, readings, self.client)
        self.system_energy.start()

    def log_params(self, params: Mapping[str, str]) -> None:
        """Log the params the run does not hold yet; tag those it holds with another value.

        The job's own run holds none but these: they go with the history's next write."""
        if self._broken:
            return
        if self.own:
            self.history.add(0, params=params)
            return
        try:
            existing = self.client.get_run(self.run_id).data.params
            new = {k: v for k, v in params.items() if k not in existing}
            conflicts = [
                f"{k}={v} (the run has {existing[k]})"
                for k, v in params.items()
                if k in existing and not same_param(k, existing[k], v)
            ]
            tags = {TAG_PARAM_CONFLICT: "; ".join(conflicts)[:MAX_TAG_CHARS]} if conflicts else {}
            if conflicts:
                kept = "; ".join(conflicts)
                logger.warning("roofline: params the run holds with other values keep the run's: %s", kept)
            self.client.log(self.run_id, params=new, tags=tags)
        except Exception as exc:
            self._break(exc)

    def log_text(self, text: str, path: str) -> None:
        """Store ``text`` as the artifact ``path``."""
        if self._broken:
            return
        try:
            self.client.log_text(self.run_id, text, path)
        except Exception as exc:
            self._break(exc)

    def finish(self, failed: bool = False, error: BaseException | None = None) -> None:
        """Write the gathered history; end the run when it is this job's own.

        ``failed``: the loop raised ``error`` (None: unknown): see :meth:`_after_failure`.
        """
        self._stop_watching()
        self.history.close()
        if failed:
            self._after_failure(error, at_exit=False)
            return
        unended = [self.run_id] if self.own and not self._ended else []
        self._let_go(self._end(unended, "FINISHED", None, redeliver=True))

    def abandon(self, reason: str) -> None:
        """Measuring failed (our code, not the training): write what was gathered; end the job's own
        run FAILED with ``reason`` in ``roofline.error``; a run it joined, its owner's to end, gets
        ``reason`` in ``roofline.energy_error``."""
        self._stop_watching()
        self.history.close()
        if self.own:
            self._let_go(self._end([self.run_id], "FAILED", reason))
            return
        if not self._broken:
            try:
                self.client.set_tag(self.run_id, TAG_ENERGY_ERROR, reason[:MAX_TAG_CHARS])
            except Exception as exc:
                self._break(exc)
        self._let_go()

    def _stop_watching(self) -> None:
        """Stop the system energy metrics (their last reading logged)."""
        if self.system_energy is not None:
            self.system_energy.stop()

    def _after_failure(self, error: BaseException | None, at_exit: bool) -> None:
        """Training raised ``error``: the run ends with the reason in ``roofline.error``.

        After an interrupt (Ctrl-C, :class:`~mlflow_roofline.core.errors.Interrupted`) the run
        and the user's runs around it end KILLED now. After another exception the job's own
        run ends FAILED now; a run it joined gets the reason now and is ended FAILED by its
        owner (the ``with`` block the exception leaves), else at the process's exit. A run
        whose owner ended it FAILED without a reason gets the reason at exit.
        """
        status, reason = failure_outcome(error, UNFINISHED_REASON)
        self._failure = error
        if status == "KILLED":
            targets = [*self.around, self.run_id]
        elif self.own or at_exit:
            targets = [self.run_id]
        else:
            self._tag_reason(reason)
            self._restore_sigterm()
            return  # _left_open stays registered, the run's hook armed: ended at exit if its owner does not
        self._let_go(self._settle(targets, status, reason))

    def _tag_reason(self, reason: str) -> None:
        if self._broken:
            return
        try:
            self.client.set_tag(self.run_id, TAG_ERROR, reason[:MAX_TAG_CHARS])
        except Exception as exc:
            self._break(exc)

    def _end(self, run_ids: list[str], status: RunStatus, reason: str | None, redeliver: bool = False) -> list[str]:
        """End ``run_ids`` (those still RUNNING are this job's to end); the ones left not ended."""
        if self._broken or not run_ids:
            return run_ids
        try:
            left = end_runs(self.client, run_ids, status, reason, redeliver=redeliver)
        except Exception as exc:
            self._break(exc)
            return run_ids
        self._ended = self._ended or self.run_id not in left
        return left

    def _settle(self, run_ids: list[str], status: RunStatus, reason: str) -> list[str]:
        """As :func:`~mlflow_roofline.tracking.run_ending.settle_after_failure`; the runs left not ended."""
        if self._broken:
            return run_ids
        try:
            return settle_after_failure(self.client, run_ids, status, reason)
        except Exception as exc:
            self._break(exc)
            return run_ids

    def _let_go(self, unended: list[str] | None = None) -> None:
        """Training is over: the watchdog's hooks taken back (but for the runs left ``unended``: armed until
        the process is gone), no exit hook, the previous SIGTERM handler back."""
        atexit.unregister(self._left_open)
        if self._watchdog is not None:
            for run_id, hook in self._hooks.items():
                if run_id not in (unended or ()):
                    self._watchdog.cancel(END_ORPHANED_RUN, **hook)
            self._watchdog = None
        self._restore_sigterm()

    def _restore_sigterm(self) -> None:
        if self._sigterm_installed and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._sigterm_installed = False

    def _break(self, exc: BaseException) -> None:
        """The store failed: say so once and log nothing more; training goes on."""
        if not self._broken:
            self._broken = True
            logger.warning("roofline: %s; training goes on, no longer logged", store_failure(exc, self.client))

    def _left_open(self) -> None:
        """At exit, a run training never ended: KILLED after Ctrl-C, else FAILED, with the reason."""
        try:
            self._stop_watching()
            self.history.close()  # what was measured before the loop raised
            failure = self._failure or getattr(sys, "last_value", None)  # set when an uncaught exception ends it
            if failure is not None:
                self._after_failure(failure, at_exit=True)
                return
            still_open = self.own or self.client.active_run_id() == self.run_id
            running = still_open and not self._broken and self.client.get_run(self.run_id).info.status == "RUNNING"
            self._let_go(self._end([self.run_id], "FAILED", UNFINISHED_REASON) if running else [])
        except Exception:  # the interpreter is exiting; nothing more to do
            logger.exception("could not end run %s", self.run_id)
            self._let_go([self.run_id])

    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # Python lets only the main thread set handlers; the watchdog still covers a kill
        previous = signal.getsignal(signal.SIGTERM)
        if previous == signal.SIG_IGN:
            return  # SIGTERM does not end this process: nothing to end
        self._previous_sigterm = signal.SIG_DFL if previous is None else previous  # None: set outside Python
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self._sigterm_installed = True

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """End the run KILLED, then let SIGTERM do what it did before (by default: end the process).

        Where SIGTERM ends the process (no handler of the user's before ours), every run of
        MLflow's active stack ends KILLED too: the user's ``with mlflow.start_run()`` blocks
        around the job would otherwise stay RUNNING."""
        previous = self._previous_sigterm
        if self.system_energy is not None:  # no join here: the interrupted thread may hold the window's lock
            self.system_energy.cancel()
        unended = [self.run_id]
        try:
            self.history.close()  # what was measured before the signal
            stack = self.client.active_run_ids() if previous == signal.SIG_DFL else []
            runs = [*stack, self.run_id] if self.own else stack or [self.run_id]
            unended = self._end(runs, "KILLED", SIGTERM_REASON)
        except Exception:
            logger.exception("could not end run %s", self.run_id)
        finally:
            self._let_go(unended)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGTERM)  # the default handler is back: the process ends


def store_failure(exc: BaseException, client: TrackingClient | None = None) -> str:
    """One line for a failing tracking store (names the store and the cause)."""
    uri = client.tracking_uri if client is not None else current_tracking_uri()
    line = store_error_line(exc, uri)
    if line is not None:
        return line
    text = str(exc).strip()
    return f"tracking store {uri} failed: {text.splitlines()[0] if text else type(exc).__name__}"
