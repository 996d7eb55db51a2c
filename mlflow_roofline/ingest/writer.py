"""Import a file: read its rows, check them, log the valid ones as FINISHED train runs,
skipping rows already imported (:func:`import_file`, what ``mlflow-roofline import`` runs).

Each run carries the same params, proxies and tags as a run this project measured
(``roofline.run_type=train``, hardware, config and workload hashes), plus
``roofline.source=import:<format>``, the row's content hash, the file name and the row's
place in it. The hashes already present in the experiment are read once, with one paged
search, before anything is logged.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable
from pathlib import Path

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
from mlflow_roofline.ingest.mapping import load_mapping
from mlflow_roofline.ingest.records import Record, RowError, check_columns, check_row
from mlflow_roofline.ingest.sources import read_table
from mlflow_roofline.tracking.client import TrackingClient
from mlflow_roofline.tracking.experiments import get_or_create_experiment


@dataclasses.dataclass
class ImportCounts:
    """What one import did, each row by its place in the file.

    Attributes:
        imported: rows logged as new runs (or that would be, in a dry run).
        already_present: rows whose hash a run of the experiment already carries.
        refused: rows that failed their check, with the field and rule.
        ignored_columns: the file's columns the schema does not know, ignored (sorted).
    """

    imported: list[str] = dataclasses.field(default_factory=list)
    already_present: list[str] = dataclasses.field(default_factory=list)
    refused: list[RowError] = dataclasses.field(default_factory=list)
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
        return text + f"refused {len(self.refused)}" + (f" ({detail})" if detail else "")


def import_file(
    file: Path, experiment: str, fmt: str, mapping: Path | None = None, dry_run: bool = False, strict: bool = False
) -> ImportCounts:
    """Import the rows of ``file`` (``fmt``: ``table`` or ``codecarbon``) into ``experiment``.

    The file's fields are checked once (:func:`ingest.records.check_columns`): unknown
    columns are ignored and listed in the counts (refused under ``strict``). Every row is
    checked; the valid ones not yet imported become FINISHED train runs (none in a dry
    run); the refused ones are in the counts with their field and rule.

    Raises:
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
        counts = log_records(client, get_or_create_experiment(client, experiment), records, fmt, file.name)
    counts.refused = [r for r in checked if isinstance(r, RowError)]
    counts.ignored_columns = ignored
    return counts


def imported_hashes(client: TrackingClient, experiment_id: str, fmt: str) -> set[str]:
    """Row hashes of the runs this format already imported into the experiment."""
    source = f"{SOURCE_IMPORT_PREFIX}{fmt}"
    flt = f"tags.`{TAG_SOURCE}` = '{source}'"
    return {
        r.data.tags[TAG_IMPORT_ROW_HASH]
        for r in client.iter_runs([experiment_id], flt)
        if TAG_IMPORT_ROW_HASH in r.data.tags
    }


def log_records(
    client: TrackingClient, experiment_id: str, records: Iterable[Record], fmt: str, file_name: str
) -> ImportCounts:
    """Log every record whose hash is not yet in the experiment as one FINISHED train run."""
    counts = ImportCounts()
    seen = imported_hashes(client, experiment_id, fmt)
    for record in records:
        row_hash = record.row_hash(fmt)
        if row_hash in seen:
            counts.already_present.append(record.where)
            continue
        _log_one(client, experiment_id, record, fmt, file_name, row_hash)
        seen.add(row_hash)
        counts.imported.append(record.where)
    return counts


def _log_one(
    client: TrackingClient, experiment_id: str, record: Record, fmt: str, file_name: str, row_hash: str
) -> None:
    config = record.config
    tags = {
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
    energy_j, time_s = record.metrics[M_ENERGY_J], record.metrics[M_TIME_S]
    metrics = {
        **proxy_metrics(config),
        **record.metrics,
        M_AVG_POWER_W: energy_j / time_s,
        M_SAMPLES_PER_S: config.batch_size * config.num_steps / time_s,
    }
    run_id = client.open_run(experiment_id, config.run_name)
    client.log(run_id, params=config.to_params(), metrics=metrics, tags=tags)
    client.end_run(run_id, "FINISHED")
