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

Never left RUNNING while training runs, whoever opened the run:

- the Trainer calls no callback when training raises: a run still open when the process
  exits is ended with the reason in ``roofline.error``: KILLED after a
  ``KeyboardInterrupt`` (Ctrl-C), FAILED after another exception, which it names. A run
  this job joined is ended so only when MLflow's own exit would have ended it (it is
  still MLflow's active run), which would have said FINISHED;
- SIGTERM ends the run KILLED, then the signal takes its course (the previous handler,
  or the default: the process ends);
- SIGKILL (the OOM killer) runs nothing in this process: the process's watchdog
  (:func:`mlflow_roofline.system.watchdog.process_watchdog`, one for all the jobs of a
  process) ends the run KILLED within seconds. The history points gathered since the
  last write (at most :data:`~mlflow_roofline.integrations.history_buffer.FLUSH_S` seconds
  of them) die with the process.

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
from mlflow_roofline.tracking.run_ownership import same_param
from mlflow_roofline.tracking.store_errors import quiet_store_logging, store_error_line
from mlflow_roofline.tracking.system_energy import EnergyReadings, SystemEnergy

logger = logging.getLogger(__name__)

SIGTERM_REASON = "the training process got SIGTERM"
UNFINISHED_REASON = "training stopped before its end (an exception?)"

_FINISHED: tuple[RunStatus, str | None] = ("FINISHED", None)

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
        active = run_id or self.client.active_run_id()
        self.own = active is None
        if active is not None:
            self.run_id = active
        else:
            self.run_id = self.client.open_run(experiment_id_for(self.client, experiment), run_name)
        self._ended = False
        self._broken = False
        self.history = HistoryBuffer(self.client, self.run_id, self._break)
        self.system_energy: SystemEnergy | None = None
        # The process may die before finish(): the watchdog, at exit, SIGTERM end the run then.
        self._watchdog: Watchdog | None = process_watchdog()
        self.watchdog_pid: int = self._watchdog.process.pid
        """The watchdog's process: a child of this one, which a meter of the job's processes leaves out."""
        self._orphan_hook = orphan_hook_kwargs(self.run_id, self.client.tracking_uri)
        self._watchdog.call(END_ORPHANED_RUN, **self._orphan_hook)
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

        ``failed``: the loop raised ``error`` (None: unknown); the run ends KILLED after a
        ``KeyboardInterrupt``, FAILED otherwise, with the reason in ``roofline.error``.
        """
        self._stop_watching()
        self.history.close()
        if self.own and not self._broken:
            status, reason = _outcome(error) if failed else _FINISHED
            try:
                self._end(status, reason)
            except Exception as exc:
                self._break(exc)
        self._let_go()

    def abandon(self, reason: str) -> None:
        """Measuring failed (our code, not the training): write what was gathered; end the job's own
        run FAILED with ``reason`` in ``roofline.error``; a run it joined, its owner's to end, gets
        ``reason`` in ``roofline.energy_error``."""
        self._stop_watching()
        self.history.close()
        if not self._broken:
            try:
                if self.own:
                    self._end("FAILED", reason)
                else:
                    self.client.set_tag(self.run_id, TAG_ENERGY_ERROR, reason[:MAX_TAG_CHARS])
            except Exception as exc:
                self._break(exc)
        self._let_go()

    def _stop_watching(self) -> None:
        """Stop the system energy metrics (their last reading logged)."""
        if self.system_energy is not None:
            self.system_energy.stop()

    def _end(self, status: RunStatus, reason: str | None) -> None:
        """End the run (once) with ``status``, ``reason`` in ``roofline.error``."""
        if self._ended:
            return
        self._ended = True
        if reason:
            self.client.set_tag(self.run_id, TAG_ERROR, reason[:MAX_TAG_CHARS])
        self.client.end_run_and_deactivate(self.run_id, status)

    def _let_go(self) -> None:
        """Training is over: the watchdog's hook taken back, no exit hook, the previous SIGTERM handler back."""
        atexit.unregister(self._left_open)
        if self._watchdog is not None:
            self._watchdog.cancel(END_ORPHANED_RUN, **self._orphan_hook)
            self._watchdog = None
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
            still_open = self.own or self.client.active_run_id() == self.run_id
            if still_open and not self._broken and self.client.get_run(self.run_id).info.status == "RUNNING":
                failure = getattr(sys, "last_value", None)  # set when an uncaught exception ends the interpreter
                status, reason = _outcome(failure)
                self._end(status, reason if failure is not None else UNFINISHED_REASON)
        except Exception:  # the interpreter is exiting; nothing more to do
            logger.exception("could not end run %s", self.run_id)
        finally:
            self._let_go()

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
        """End the run KILLED, then let SIGTERM do what it did before (by default: end the process)."""
        previous = self._previous_sigterm
        if self.system_energy is not None:  # no join here: the interrupted thread may hold the window's lock
            self.system_energy.cancel()
        try:
            self.history.close()  # what was measured before the signal
            if not self._broken:
                self._end("KILLED", SIGTERM_REASON)
        except Exception:
            logger.exception("could not end run %s", self.run_id)
        finally:
            self._let_go()
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGTERM)  # the default handler is back: the process ends


def _outcome(error: BaseException | None) -> tuple[RunStatus, str | None]:
    """The status and reason of a run whose training raised ``error`` (None: unknown)."""
    if isinstance(error, KeyboardInterrupt):
        return "KILLED", "interrupted: KeyboardInterrupt (Ctrl-C) before training ended"
    if error is None:
        return "FAILED", UNFINISHED_REASON
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    return "FAILED", f"training raised {type(error).__name__}" + (f": {first}" if first else "")


def store_failure(exc: BaseException, client: TrackingClient | None = None) -> str:
    """One line for a failing tracking store (names the store and the cause)."""
    uri = client.tracking_uri if client is not None else current_tracking_uri()
    line = store_error_line(exc, uri)
    if line is not None:
        return line
    text = str(exc).strip()
    return f"tracking store {uri} failed: {text.splitlines()[0] if text else type(exc).__name__}"
