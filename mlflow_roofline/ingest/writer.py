"""Log checked records as FINISHED train runs, skipping rows already imported.

Each run carries the same params, proxies and tags as a run this project measured
(``roofline.run_type=train``, hardware, config and workload hashes), plus
``roofline.source=import:<format>``, the row's content hash, the file name and the row's
place in it. The hashes already present in the experiment are read once, with one paged
search, before anything is logged.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Iterable
from typing import Any

from mlflow.entities import Metric, Param, RunTag

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
from mlflow_roofline.ingest.records import Record, RowError
from mlflow_roofline.tracking.runs import iter_runs


@dataclasses.dataclass
class ImportCounts:
    """What one import did, each row by its place in the file.

    Attributes:
        imported: rows logged as new runs (or that would be, in a dry run).
        already_present: rows whose hash a run of the experiment already carries.
        refused: rows that failed their check, with the field and rule.
    """

    imported: list[str] = dataclasses.field(default_factory=list)
    already_present: list[str] = dataclasses.field(default_factory=list)
    refused: list[RowError] = dataclasses.field(default_factory=list)

    def summary(self, dry_run: bool = False) -> str:
        """One line: imported, skipped as already present, refused by field."""
        by_field = collections.Counter(e.field for e in self.refused)
        detail = ", ".join(f"{n} on {field}" for field, n in by_field.most_common())
        verb = "would import" if dry_run else "imported"
        text = f"{verb} {len(self.imported)}, skipped {len(self.already_present)} already present, "
        return text + f"refused {len(self.refused)}" + (f" ({detail})" if detail else "")


def imported_hashes(client: Any, experiment_id: str, fmt: str) -> set[str]:
    """Row hashes of the runs this format already imported into the experiment."""
    source = f"{SOURCE_IMPORT_PREFIX}{fmt}"
    flt = f"tags.`{TAG_SOURCE}` = '{source}'"
    return {
        r.data.tags[TAG_IMPORT_ROW_HASH]
        for r in iter_runs(client, [experiment_id], flt)
        if TAG_IMPORT_ROW_HASH in r.data.tags
    }


def log_records(client: Any, experiment_id: str, records: Iterable[Record], fmt: str, file_name: str) -> ImportCounts:
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


def _log_one(client: Any, experiment_id: str, record: Record, fmt: str, file_name: str, row_hash: str) -> None:
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
    now = int(time.time() * 1000)
    run = client.create_run(experiment_id, run_name=config.run_name, tags={"mlflow.runName": config.run_name})
    client.log_batch(
        run.info.run_id,
        params=[Param(k, v) for k, v in config.to_params().items()],
        metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
        tags=[RunTag(k, v) for k, v in tags.items()],
    )
    client.set_terminated(run.info.run_id, "FINISHED")
