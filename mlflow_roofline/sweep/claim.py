"""Claiming a configuration's repeat in the tracking store, so that sweeps sharing a store never run it twice.

Several sweeps may work on one store at once: two started together from one spec, on one
host or on several hosts behind one tracking server. Before a sweep runs a configuration
it claims it, and only the winner of the claim runs it. The unit claimed is one
(configuration, repeat): a spec with ``repeats: k`` measures each configuration ``k``
times, and each repeat index is claimed on its own, exactly as a configuration was; the
runs of one unit are those with its ``roofline.config_hash`` and its ``roofline.repeat``
(absent: 0), and below "the configuration" means that unit.

What the protocol relies on (and nothing more): creating a run is atomic, with its tags;
a run (and its tags) is visible to every search that starts after ``create_run``
returned. The SQL stores MLflow ships (SQLite, PostgreSQL, MySQL) and a tracking server in
front of one such database give both; nothing here needs a lock, a unique key, or
clocks that agree (the runs' ``start_time`` comes from each client's clock, and a run
created later may carry an earlier time, so no "earliest run wins" rule is safe).

The protocol, for one configuration (one ``roofline.config_hash`` and ``roofline.repeat``):

1. Look the configuration up (:func:`~mlflow_roofline.sweep.lookup.config_status`): done,
   failed, or a live run of another process (a RUNNING run whose recorded process lives,
   or that was recorded on another host) means there is nothing to claim now.
2. Create the child run. It is the claim ticket: it carries the config hash and, in the
   same atomic call, the host, pid and start time of the sweep that owns it, so every
   other sweep sees it as live from the moment it exists; its repeat index is among those tags.
3. Search the runs of the config hash and repeat again (:func:`check_claim`). The claim is won only
   if the ticket is the ONLY live run there, and no run this sweep did not see in step 1
   has finished or failed meanwhile.
4. The winner runs the configuration in its ticket. A loser withdraws its ticket
   (:func:`withdraw`: tagged ``roofline.claim`` with the rival's run id, ended KILLED and
   deleted, so the experiment shows no trace of it), never touches the rival's run, and
   looks again later.

Why two sweeps never both win: say A's ticket ``a`` and B's ticket ``b``. A's search
starts after ``a`` was created, B's after ``b``. If A won, its search did not see ``b``,
so ``b`` was created after A's search began, hence after ``a`` was created; then B's
search, which begins after ``b`` exists, sees ``a`` (live: A is waiting for it) and B
loses. Both may lose (each saw the other): both withdraw and retry after a random
pause, which breaks the tie with high probability. A ticket whose owner died is
``dead`` (:func:`~mlflow_roofline.system.liveness.liveness`) and blocks no one; a
ticket recorded on another host cannot be checked from here and always counts as live
(a host that died with a RUNNING run holds its configuration until someone ends that
run).
"""

from __future__ import annotations

import contextlib
import dataclasses

from mlflow_roofline.core.schema import TAG_CLAIM, TAG_ERROR
from mlflow_roofline.sweep.lookup import repeat_runs
from mlflow_roofline.sweep.status import RUN_STATES
from mlflow_roofline.system.liveness import liveness
from mlflow_roofline.tracking.client import TrackingClient


@dataclasses.dataclass(frozen=True)
class Claim:
    """The verdict on a claim ticket.

    Attributes:
        won: the ticket is the only live run of its configuration: run it.
        rival: the run that holds or settled the configuration instead (None if won).
        reason: why the claim was lost ("" if won).
    """

    won: bool
    rival: str | None = None
    reason: str = ""


def check_claim(
    client: TrackingClient,
    experiment_id: str,
    config_hash: str,
    ticket: str,
    seen: frozenset[str],
    repeat: int = 0,
) -> Claim:
    """Whether ``ticket`` (a RUNNING run just created) wins its configuration's repeat.

    Args:
        client: the tracking store.
        experiment_id: the experiment of the ticket.
        config_hash: the ticket's ``roofline.config_hash``.
        ticket: the run id of the ticket.
        seen: the runs of this hash and repeat the caller saw before creating the ticket; a
            FAILED run not among them failed meanwhile in another process.
        repeat: the ticket's ``roofline.repeat``; runs of other repeats never compete with it.
    """
    runs = repeat_runs(client, experiment_id, config_hash, repeat)
    if ticket not in {run.info.run_id for run in runs}:
        # The store does not show our own ticket yet: it breaks the protocol's premise, so never win.
        return Claim(False, None, "own claim not visible in the store yet")
    for run in runs:
        run_id, status = run.info.run_id, run.info.status
        if run_id == ticket:
            continue
        if status == "FINISHED":
            return Claim(False, run_id, f"finished meanwhile by run {run_id}")
        if status == "FAILED" and run_id not in seen:
            return Claim(False, run_id, f"failed meanwhile in run {run_id}")
        if status in RUN_STATES and liveness(run.data.tags, run_id) != "dead":
            return Claim(False, run_id, f"claimed by run {run_id}")
    return Claim(True)


def withdraw(client: TrackingClient, ticket: str, claim: Claim) -> None:
    """Take back a lost ticket: say why on it, end it KILLED and delete it (it never ran anything)."""
    why = f"lost the claim of its configuration ({claim.reason}); it never ran"
    with contextlib.suppress(Exception):
        client.set_tag(ticket, TAG_CLAIM, why)
        client.set_tag(ticket, TAG_ERROR, why)
    client.end_run(ticket, "KILLED")
    client.delete_run(ticket)
