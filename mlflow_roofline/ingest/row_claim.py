"""Claiming a row before it is logged, so that each row of a file is stored exactly once.

Several imports of one file may run at once (two shells, a script started twice), and an
import may die half-way (SIGKILL, a lost node). A row is claimed the way a sweep claims
a configuration (:mod:`mlflow_roofline.sweep.claim` explains why the protocol is
sound; only the key differs: the row's content hash, ``roofline.import_row_hash``,
instead of the config hash and repeat):

1. Look the row up (:func:`row_state`): a FINISHED run of its hash means it is
   **present** (nothing else does: a run counts only once complete); a RUNNING run whose
   importer lives (:func:`~mlflow_roofline.system.liveness.liveness`: the process
   recorded on it, on this host; a run recorded on another host always counts as live)
   means another import is storing it now: wait and look again. RUNNING runs whose
   importer is gone are **orphans**: they are ended KILLED, saying so, and the row is
   claimed anew.
2. Create the run that will hold the row. It is the claim ticket: it carries the row
   hash and, in the same atomic call, the host, pid and start time of this importer.
3. Look again (:func:`check_ticket`): the claim is won only if the ticket is visible and
   is the only live run of the hash, and no run of the hash has finished meanwhile.
4. The winner logs the row into its ticket and ends it FINISHED. A loser withdraws its
   ticket (ended KILLED and deleted, like a sweep's), pauses a random moment and starts
   over at 1.

The importer holds SIGTERM and SIGINT back over steps 1's orphan ending to 4
(:func:`~mlflow_roofline.system.signals.holding_stop_signals`) and stops between
attempts; an error, or a second signal, while a ticket is open ends that ticket KILLED
with the reason in ``roofline.error`` (:func:`end_interrupted`). Nothing is left
RUNNING by an import that could still act.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import time
from collections.abc import Iterable, Mapping

from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.core.schema import (
    MAX_TAG_CHARS,
    SOURCE_IMPORT_PREFIX,
    TAG_CLAIM,
    TAG_ERROR,
    TAG_IMPORT_ROW_HASH,
    TAG_SOURCE,
)
from mlflow_roofline.system.liveness import liveness, process_tags
from mlflow_roofline.system.signals import ignore_stop_signals
from mlflow_roofline.tracking.client import Run, TrackingClient

LIVE_STATES: frozenset[str] = frozenset({"RUNNING", "SCHEDULED"})
RETRY_PAUSE_S: tuple[float, float] = (0.05, 0.5)
"""Bounds of the random pause, in seconds, before a row held or lost is looked up again."""


@dataclasses.dataclass(frozen=True)
class RowState:
    """Where one row hash stands in the store.

    Attributes:
        present: the run that holds it FINISHED (None: not stored yet).
        holder: a RUNNING run of a live importer storing it now (None: none).
        orphans: RUNNING runs of importers that are gone.
        seen: every run of the hash looked at.
    """

    present: str | None = None
    holder: str | None = None
    orphans: tuple[str, ...] = ()
    seen: frozenset[str] = frozenset()


def source_filter(fmt: str) -> str:
    """The search filter of the runs this format imported."""
    return f"tags.`{TAG_SOURCE}` = '{SOURCE_IMPORT_PREFIX}{fmt}'"


def row_runs(client: TrackingClient, experiment_id: str, fmt: str, row_hash: str) -> list[Run]:
    """Every active run of the experiment that this format imported with ``row_hash``."""
    query = f"{source_filter(fmt)} and tags.`{TAG_IMPORT_ROW_HASH}` = '{row_hash}'"
    return list(client.iter_runs([experiment_id], query))


def row_state(runs: Iterable[Run]) -> RowState:
    """The state of one row from the runs of its hash (see the module docstring, step 1)."""
    runs = list(runs)
    orphans = []
    holder = None
    for run in runs:
        if run.info.status == "FINISHED":
            return RowState(present=run.info.run_id, seen=frozenset(r.info.run_id for r in runs))
        if run.info.status in LIVE_STATES:
            if liveness(run.data.tags, run.info.run_id) == "dead":
                orphans.append(run.info.run_id)
            else:
                holder = run.info.run_id
    return RowState(None, holder, tuple(orphans), frozenset(r.info.run_id for r in runs))


def check_ticket(runs: Iterable[Run], ticket: str) -> str | None:
    """Why ``ticket`` lost its row (step 3), or None when it won."""
    runs = list(runs)
    if ticket not in {run.info.run_id for run in runs}:
        return "own claim not visible in the store yet"
    for run in runs:
        if run.info.run_id == ticket:
            continue
        if run.info.status == "FINISHED":
            return f"stored meanwhile by run {run.info.run_id}"
        if run.info.status in LIVE_STATES and liveness(run.data.tags, run.info.run_id) != "dead":
            return f"claimed by run {run.info.run_id}"
    return None


def end_orphan(client: TrackingClient, run_id: str) -> None:
    """End a RUNNING run whose importer is gone: KILLED, saying why (its row is claimed anew)."""
    why = f"its importer ended before the row was stored; reclaimed by the import of pid {os.getpid()}"
    client.set_tag(run_id, TAG_ERROR, why)
    client.end_run(run_id, "KILLED")


def open_ticket(client: TrackingClient, experiment_id: str, run_name: str, tags: Mapping[str, str]) -> str:
    """Create the RUNNING run that claims a row: ``tags`` (with the row hash) and this importer's process."""
    return client.open_run(experiment_id, run_name, tags={**tags, **process_tags(os.getpid())})


def withdraw(client: TrackingClient, ticket: str, why: str) -> None:
    """Take back a lost ticket: say why, end it KILLED and delete it (it never held the row)."""
    reason = f"lost the claim of its row ({why}); it stored nothing"
    client.log(ticket, tags={TAG_CLAIM: reason, TAG_ERROR: reason})
    client.end_run(ticket, "KILLED")
    client.delete_run(ticket)


def end_interrupted(client: TrackingClient, ticket: str, exc: BaseException) -> None:
    """End the ticket in flight KILLED with the reason (a signal, or the error that stopped the import).

    Stop signals are ignored from here on when a signal stopped the import: the process
    is ending, and a second SIGTERM must not cut this short and leave the run RUNNING.
    A store that fails here is not reported (the error that stopped the import is); a
    later import finds the run RUNNING with its importer gone, and reclaims it.
    """
    if isinstance(exc, (Interrupted, KeyboardInterrupt)):
        ignore_stop_signals()
    reason = exc.reason if isinstance(exc, Interrupted) else f"import stopped: {type(exc).__name__}: {exc}"
    with contextlib.suppress(Exception):  # the store may be what failed: the original error is raised all the same
        client.set_tag(ticket, TAG_ERROR, reason[:MAX_TAG_CHARS])
        client.end_run(ticket, "KILLED")


def pause() -> None:
    """A random pause before looking a row up again (breaks ties between rival imports)."""
    time.sleep(random.uniform(*RETRY_PAUSE_S))
