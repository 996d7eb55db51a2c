"""Import a file: read its rows, check them, log the valid ones as FINISHED train runs,
skipping rows already imported (:func:`import_file`, what ``mlflow-roofline import`` runs).

Each run carries the same params, proxies and tags as a run this project measured
(``roofline.run_type=train``, hardware, config and workload hashes), plus
``roofline.source=import:<format>``, the row's content hash, the file name and the row's
place in it. The experiment's import runs are read once, with one paged search, before
anything is logged: a row with a FINISHED run is present. Every other row is claimed
before it is logged (:mod:`ingest.row_claim`), so that an import run twice at once, or run
again after one was killed, stores each row exactly once. SIGTERM or SIGINT stops the
import between two attempts at a row (:class:`~mlflow_roofline.core.errors.Interrupted`):
the row in flight ends FINISHED (or its lost claim withdrawn) first, since cutting a
store call in two can leave the store's connection unusable and the run RUNNING; a
second signal does not wait, and ends the run in flight KILLED.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Iterable
from pathlib import Path

from mlflow_roofline.core.errors import Interrupted
from mlflow_roofline.core.proxies import proxy_metrics
from mlflow_roofline.core.schema import (
    M_AVG_POWER_W,
    M_ENERGY_J,
    M_SAMPLES_PER_S,
    M_TIME_S,
    SOURCE_IMPORT_PREFIX,
    TAG_CONFIG_HASH,
    TAG_DEVICE,
    TAG_ENERGY_SOURCE,
    TAG_HARDWARE,
    TAG_IMPORT_FILE,
    TAG_IMPORT_ROW,
    TAG_IMPORT_ROW_HASH,
    TAG_RUN_TYPE,
    TAG_SOURCE,
    TAG_WORKLOAD_HASH,
)
from mlflow_roofline.ingest import row_claim
from mlflow_roofline.ingest.mapping import load_mapping
from mlflow_roofline.ingest.records import Record, RowError, check_columns, check_row
from mlflow_roofline.ingest.sources import read_table
from mlflow_roofline.system.signals import holding_stop_signals, raising_on_signals
from mlflow_roofline.tracking.client import Run, TrackingClient
from mlflow_roofline.tracking.experiments import get_or_create_experiment

STORED = "stored"
PRESENT = "present"
HOLD_WAIT_S = 60.0
"""Seconds an import waits for a row that another import's RUNNING run holds, before it
reports the row held and goes on (a live importer stores a row in well under a second;
a run recorded on another host cannot be checked from here and may never end)."""


@dataclasses.dataclass
class ImportCounts:
    """What one import did, each row by its place in the file.

    Attributes:
        imported: rows logged as new runs (or that would be, in a dry run).
        already_present: rows whose hash a run of the experiment already carries.
        refused: rows that failed their check, with the field and rule.
        held: rows another import still held after :data:`HOLD_WAIT_S` seconds, with the
            run that holds each (RUNNING, its importer alive or on another host): not stored
            by this import.
        ignored_columns: the file's columns the schema does not know, ignored (sorted).
    """

    imported: list[str] = dataclasses.field(default_factory=list)
    already_present: list[str] = dataclasses.field(default_factory=list)
    refused: list[RowError] = dataclasses.field(default_factory=list)
    held: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    ignored_columns: list[str] = dataclasses.field(default_factory=list)

    def warning(self) -> str | None:
        """One line naming the ignored unknown columns, or None when there are none."""
        if not self.ignored_columns:
            return None
        return f"warning: ignored unknown columns {', '.join(self.ignored_columns)} (--strict refuses them)"

    def summary(self, dry_run: bool = False) -> str:
        """One line: imported, skipped as already present, refused by field."""
        by_field = collections.Counter(e.field for e in self.refused)
        detail = ", ".join(f"{n} on {field}" for field, n in by_field.most_common())
        verb = "would import" if dry_run else "imported"
        text = f"{verb} {len(self.imported)}, skipped {len(self.already_present)} already present, "
        text += f"refused {len(self.refused)}" + (f" ({detail})" if detail else "")
        return text + (f", left {len(self.held)} held by another import" if self.held else "")

    def held_lines(self) -> list[str]:
        """One line per held row: where, the run holding it, and what to do."""
        return [
            f"held {where}: run {run_id} of another import holds this row (RUNNING); "
            "run the import again once that run has ended"
            for where, run_id in self.held
        ]


def import_file(
    file: Path, experiment: str, fmt: str, mapping: Path | None = None, dry_run: bool = False, strict: bool = False
) -> ImportCounts:
    """Import the rows of ``file`` (``fmt``: ``table`` or ``codecarbon``) into ``experiment``.

    The file's fields are checked once (:func:`ingest.records.check_columns`): unknown
    columns are ignored and listed in the counts (refused under ``strict``). Every row is
    checked; the valid ones not yet imported become FINISHED train runs (none in a dry
    run); the refused ones are in the counts with their field and rule.

    Raises:
        Interrupted: SIGTERM or SIGINT while rows were logged: the rows before it are
            stored (a second signal ends the row in flight KILLED), a rerun stores the rest.
        ConfigError: the file or the mapping cannot be used: a required field missing from
            the whole file, unknown columns under ``strict``, an unreadable file or mapping.
    """
    table = read_table(file, fmt, load_mapping(mapping))
    ignored = check_columns(table.offered, file.name, strict)
    checked = [check_row(row) for row in table.rows]
    records = [r for r in checked if isinstance(r, Record)]
    if dry_run:
        counts = ImportCounts(imported=[r.where for r in records])
    else:
        client = TrackingClient()
        with raising_on_signals(Interrupted):
            counts = log_records(client, get_or_create_experiment(client, experiment), records, fmt, file.name)
    counts.refused = [r for r in checked if isinstance(r, RowError)]
    counts.ignored_columns = ignored
    return counts


def import_runs(client: TrackingClient, experiment_id: str, fmt: str) -> dict[str, list[Run]]:
    """The runs this format imported into the experiment, by row hash (one paged search)."""
    by_hash: dict[str, list[Run]] = {}
    for run in client.iter_runs([experiment_id], row_claim.source_filter(fmt)):
        row_hash = run.data.tags.get(TAG_IMPORT_ROW_HASH)
        if row_hash is not None:
            by_hash.setdefault(row_hash, []).append(run)
    return by_hash


def log_records(
    client: TrackingClient, experiment_id: str, records: Iterable[Record], fmt: str, file_name: str
) -> ImportCounts:
    """Log every record not yet stored in the experiment as one FINISHED train run, each claimed first."""
    counts = ImportCounts()
    known = import_runs(client, experiment_id, fmt)
    done: set[str] = set()
    for record in records:
        row_hash = record.row_hash(fmt)
        first_look = row_claim.row_state(known.get(row_hash, []))
        if row_hash in done or first_look.present:
            counts.already_present.append(record.where)
            continue
        outcome = _claim_and_log(client, experiment_id, record, fmt, file_name, row_hash, first_look)
        if outcome == STORED:
            counts.imported.append(record.where)
            done.add(row_hash)
        elif outcome == PRESENT:
            counts.already_present.append(record.where)
            done.add(row_hash)
        else:
            counts.held.append((record.where, outcome))
    return counts


def _claim_and_log(
    client: TrackingClient,
    experiment_id: str,
    record: Record,
    fmt: str,
    file_name: str,
    row_hash: str,
    state: row_claim.RowState,
) -> str:
    """Claim the row and log it (:data:`STORED`), find it stored by another import meanwhile
    (:data:`PRESENT`), or the id of the run that still holds it after :data:`HOLD_WAIT_S`."""
    deadline = time.monotonic() + HOLD_WAIT_S
    while True:
        if state.present:
            return PRESENT
        if state.holder is not None and time.monotonic() > deadline:
            return state.holder
        if state.holder is None:
            with holding_stop_signals():  # a stop comes between attempts, never inside a store call
                for orphan in state.orphans:
                    row_claim.end_orphan(client, orphan)
                if _try_row(client, experiment_id, record, fmt, _tags(record, fmt, file_name, row_hash)):
                    return STORED
        row_claim.pause()
        state = row_claim.row_state(row_claim.row_runs(client, experiment_id, fmt, row_hash))


def _try_row(client: TrackingClient, experiment_id: str, record: Record, fmt: str, tags: dict[str, str]) -> bool:
    """One claim of the row: its ticket logged and FINISHED (True), or withdrawn (False).

    The caller holds stop signals back over it; an error, or a second signal that would
    not wait, ends the ticket KILLED (:func:`row_claim.end_interrupted`) unless it is
    FINISHED already.
    """
    ticket: str | None = None
    finished = False
    try:
        ticket = row_claim.open_ticket(client, experiment_id, record.config.run_name, tags)
        rows = row_claim.row_runs(client, experiment_id, fmt, tags[TAG_IMPORT_ROW_HASH])
        lost = row_claim.check_ticket(rows, ticket)
        if lost is not None:
            row_claim.withdraw(client, ticket, lost)
            return False
        client.log(ticket, params=record.config.to_params(), metrics=_metrics(record))
        client.end_run(ticket, "FINISHED")
        finished = True
        return True
    except BaseException as exc:
        if ticket is not None and not finished:
            row_claim.end_interrupted(client, ticket, exc)
        raise


def _tags(record: Record, fmt: str, file_name: str, row_hash: str) -> dict[str, str]:
    config = record.config
    return {
        TAG_RUN_TYPE: "train",
        TAG_SOURCE: f"{SOURCE_IMPORT_PREFIX}{fmt}",
        TAG_HARDWARE: record.hardware,
        TAG_ENERGY_SOURCE: record.energy_source,
        TAG_CONFIG_HASH: config.config_hash(record.hardware),
        TAG_WORKLOAD_HASH: config.workload_hash(record.hardware),
        TAG_DEVICE: config.device,
        TAG_IMPORT_ROW_HASH: row_hash,
        TAG_IMPORT_FILE: file_name,
        TAG_IMPORT_ROW: record.where,
    }


def _metrics(record: Record) -> dict[str, float]:
    """The run's metrics: the proxies, the measured energies and time, average power and throughput."""
    config = record.config
    energy_j, time_s = record.metrics[M_ENERGY_J], record.metrics[M_TIME_S]
    return {
        **proxy_metrics(config),
        **record.metrics,
        M_AVG_POWER_W: energy_j / time_s,
        M_SAMPLES_PER_S: config.batch_size * config.num_steps / time_s,
    }
