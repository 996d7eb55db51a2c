"""Pull the finished train runs of experiments into one tidy pandas frame.

The fit reads runs only through :func:`load_train_runs`: one paged
``MlflowClient.search_runs`` whose filter (``roofline.run_type = 'train'`` and status
FINISHED, optionally one hardware) runs inside the tracking store, pages of up to
:data:`PAGE_SIZE` runs, and a frame built straight from the run entities (no pandas
round trip through every metric and tag of ``mlflow.search_runs``).

A run logged before the params beyond the paper's existed (``arch``, ``vocab_size``,
``peft``, ``lora_rank``, ``grad_checkpointing``) is read with their defaults: an encoder with
V = 30,522, every weight trained, no checkpointing; the law's features derive the head and
optimizer proxies from them (:mod:`law.log_features`), so every run gets them.

Runs that cannot enter a fit are dropped here with a reason each
(``RunData.dropped``): a missing or non-integer param, a kind param that breaks its rules, a missing ``time_s``, an
``energy_j`` that was not logged (the meter failed; its ``roofline.energy_error`` tag
says why), or a ``time_s`` or ``energy_j`` that is no measurement: infinity as the store
keeps it, NaN, not positive, or outside the physical bounds of :mod:`fit.runs.validity`.
Every run found is either in the frame or counted under exactly one reason.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from typing import Any

import pandas as pd

from mlflow_roofline.core import job_table
from mlflow_roofline.core.config import INT_FIELDS, TrainConfig
from mlflow_roofline.core.errors import ConfigError, RooflineError
from mlflow_roofline.core.measured import measured_problem
from mlflow_roofline.core.rules import KIND_RULES, first_broken
from mlflow_roofline.core.schema import (
    KIND_PARAM_NAMES,
    M_ENERGY_J,
    M_TIME_S,
    PARAM_NAMES,
    TAG_BASELINE,
    TAG_DEVICE,
    TAG_ENERGY_ERROR,
    TAG_ENERGY_SOURCE,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
    TAG_WORKLOAD_HASH,
)
from mlflow_roofline.fit.runs.validity import energy_problem, time_problem
from mlflow_roofline.tracking.client import PAGE_SIZE, Run, TrackingClient, TrackingError

BASELINE_TAG_COLUMN = "baseline_tag"
"""The frame's column of each run's ``roofline.baseline`` tag as pulled ("" where it has none): a refit
tags only the runs whose baseline changed (:func:`fit.fit_runs.tag_baselines`)."""

FRAME_COLUMNS: tuple[str, ...] = (
    "run_id",
    "run_name",
    "experiment_id",
    "hardware",
    "energy_source",
    "workload_hash",
    *PARAM_NAMES,
    *KIND_PARAM_NAMES,
    M_ENERGY_J,
    M_TIME_S,
    BASELINE_TAG_COLUMN,
)


_Row = dict[str, Any]
"""One run's row of the frame being built (params, tags and metrics of mixed types)."""


@dataclasses.dataclass(frozen=True)
class RunData:
    """Train runs ready for a fit, and what was left out.

    Attributes:
        frame: one row per usable run, columns :data:`FRAME_COLUMNS` (integer params as
            int, the kind params with their defaults where a run has none (``vocab_size``,
            ``lora_rank`` int, ``grad_checkpointing`` bool), ``energy_j`` in joules, ``time_s`` in seconds).
        n_found: FINISHED train runs the search returned.
        dropped: reason -> number of runs dropped for it.
        experiment_ids: the experiments searched (empty when built from given runs).
        beyond_launcher: param -> number of usable runs that break one of this project's
            launcher rules on it (tp with heads not divisible by N, ...): measured
            elsewhere, valid for the law, kept and counted.
    """

    frame: pd.DataFrame
    n_found: int
    dropped: dict[str, int]
    experiment_ids: list[str] = dataclasses.field(default_factory=list)
    beyond_launcher: dict[str, int] = dataclasses.field(default_factory=dict)

    def dropped_summary(self) -> str:
        """``dropped 3: 2 without tag roofline.hardware, 1 ...``: the runs left out, by reason, most first."""
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.dropped.items(), key=lambda kv: -kv[1]))
        return f"dropped {sum(self.dropped.values())}: {reasons}"

    def summary(self) -> str:
        """One line: runs found, used and dropped with reasons."""
        text = f"{self.n_found} finished train runs found, {len(self.frame)} usable"
        if self.dropped:
            text += f"; {self.dropped_summary()}"
        if self.beyond_launcher:
            kept = ", ".join(f"{n} on {param}" for param, n in sorted(self.beyond_launcher.items()))
            text += f"; kept {sum(self.beyond_launcher.values())} that this launcher could not start ({kept})"
        return text


def resolve_experiment_ids(client: TrackingClient, experiments: Sequence[str]) -> list[str]:
    """Experiment ids of ``experiments`` (names, or ids when no name matches).

    Raises:
        RooflineError: an experiment that exists neither as a name nor as an id, or one
            that was deleted (its runs are in the trash: the message says so).
    """
    ids: list[str] = []
    for name in experiments:
        experiment = client.experiment_by_name(name)
        if experiment is None and name.isdigit():
            try:
                experiment = client.experiment(name)
            except TrackingError:  # an unknown id
                experiment = None
        if experiment is None:
            raise RooflineError(
                f"experiment: no experiment named {name!r}; run a sweep into it first or pass --experiment NAME"
            )
        if experiment.lifecycle_stage != "active":
            raise RooflineError(
                f"experiment: {name!r} is deleted (id {experiment.experiment_id}); restore it "
                f"(mlflow experiments restore --experiment-id {experiment.experiment_id}) or fit another"
            )
        ids.append(experiment.experiment_id)
    return ids


def train_filter(hardware: str | None = None) -> str:
    """The search filter of usable train runs (optionally on one hardware).

    A hardware name holding both quote characters cannot be written in MLflow's filter
    syntax; it is filtered after the pull instead (:func:`search_train_runs`).
    """
    text = f"tags.`{TAG_RUN_TYPE}` = 'train' AND attributes.status = 'FINISHED'"
    if hardware is not None and not ("'" in hardware and '"' in hardware):
        quote = '"' if "'" in hardware else "'"
        text += f" AND tags.`{TAG_HARDWARE}` = {quote}{hardware}{quote}"
    return text


def search_train_runs(client: TrackingClient, experiment_ids: Sequence[str], hardware: str | None = None) -> list[Run]:
    """Every FINISHED train run of the experiments, paged through the store (:data:`PAGE_SIZE` runs a page)."""
    runs = list(client.iter_runs(experiment_ids, train_filter(hardware), page_size=PAGE_SIZE))
    if hardware is not None:
        runs = [r for r in runs if r.data.tags.get(TAG_HARDWARE) == hardware]
    return runs


def runs_to_frame(runs: Sequence[Run], energy_metric: str = M_ENERGY_J) -> RunData:
    """Turn run entities into a :class:`RunData`, dropping what a fit cannot use.

    The frame's ``energy_j`` column holds the metric ``energy_metric`` (``energy_node_j``: fit the node).
    """
    rows: list[_Row] = []
    dropped: collections.Counter[str] = collections.Counter()
    beyond: collections.Counter[str] = collections.Counter()
    for run in runs:
        params = run.data.params
        metrics = run.data.metrics
        tags = run.data.tags
        row: _Row = {
            "run_id": run.info.run_id,
            "run_name": run.info.run_name or "",
            "experiment_id": run.info.experiment_id,
            "hardware": tags.get(TAG_HARDWARE),
            "energy_source": tags.get(TAG_ENERGY_SOURCE),
            "workload_hash": tags.get(TAG_WORKLOAD_HASH),
            BASELINE_TAG_COLUMN: tags.get(TAG_BASELINE, ""),
        }
        reason = _missing_tag_reason(row)
        if reason is None:
            reason = _read_params(params, row, tags.get(TAG_DEVICE))
        if reason is None:
            reason = _read_metrics(metrics, tags, row, energy_metric)
        if reason is not None:
            dropped[reason] += 1
            continue
        launcher_problem = _launcher_rule_broken(row, tags.get(TAG_DEVICE))
        if launcher_problem:
            beyond[launcher_problem] += 1
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
    for name in job_table.names(type="int"):
        frame[name] = frame[name].astype("int64")
    for name in job_table.names(type="bool"):
        frame[name] = frame[name].astype(bool)
    for name in (M_ENERGY_J, M_TIME_S):
        frame[name] = frame[name].astype(float)
    return RunData(frame=frame, n_found=len(runs), dropped=dict(dropped), beyond_launcher=dict(beyond))


def _launcher_rule_broken(row: _Row, device: str | None) -> str | None:
    """The param of the first launcher rule a usable run breaks, or None."""
    values = {**{n: row[n] for n in (*PARAM_NAMES, *KIND_PARAM_NAMES)}, "device": device or row["device"]}
    try:
        TrainConfig.from_mapping(values).validate()
    except ConfigError as exc:
        return exc.field
    return None


def _missing_tag_reason(row: _Row) -> str | None:
    for key, tag in (
        ("hardware", TAG_HARDWARE),
        ("energy_source", TAG_ENERGY_SOURCE),
        ("workload_hash", TAG_WORKLOAD_HASH),
    ):
        if not row[key]:
            return f"without tag {tag}"
    return None


def _read_params(params: dict[str, str], row: _Row, device: str | None) -> str | None:
    """Read the train params into ``row``; the reason to drop the run if they are unusable.

    ``device`` is the run's resolved device (tag ``roofline.device``): under
    ``mlflow run -P device=auto`` the param itself says ``auto``.
    """
    for name in PARAM_NAMES:
        raw = params.get(name)
        if raw is None:
            return f"without param {name}"
        if name in INT_FIELDS:
            try:
                number = float(raw)
            except ValueError:
                return f"with non-integer param {name}"
            if not number.is_integer():
                return f"with invalid param {name}"
            row[name] = int(number)
        else:
            row[name] = raw
    # What the law needs (positive sizes, a known strategy, single on one device), not this
    # project's launcher rules: a TP run with uneven heads measured elsewhere is a valid point.
    problem = measured_problem({n: row[n] for n in PARAM_NAMES if n != "device"})
    if problem is not None and problem[0] in PARAM_NAMES:
        return f"with invalid param {problem[0]}"
    return _read_kind_params(params, row)


def _read_kind_params(params: dict[str, str], row: _Row) -> str | None:
    """Read the params beyond the paper's into ``row`` (their defaults where absent); the reason to drop, or None.

    A run must satisfy their rules (a known arch and peft, a rank under LoRA and none
    without it...) whoever measured it: the law's features are computed from them.
    """
    given = {name: params[name] for name in KIND_PARAM_NAMES if name in params}
    try:
        config = TrainConfig.from_mapping({**{n: row[n] for n in PARAM_NAMES}, **given})
    except ConfigError as exc:
        return f"with invalid param {exc.field}"
    values = {name: getattr(config, name) for name in KIND_PARAM_NAMES}
    broken = first_broken({**values, "hidden_size": config.hidden_size}, KIND_RULES)
    if broken is not None:
        return f"with invalid param {broken.field}"
    row.update(values)
    return None


def _read_metrics(
    metrics: dict[str, float], tags: dict[str, str], row: _Row, energy_metric: str = M_ENERGY_J
) -> str | None:
    """Read ``time_s`` and the energy metric into ``row`` (after the params); the reason to drop the run, or None.

    ``energy_metric`` is read as the row's ``energy_j`` (``energy_node_j``: fit the whole node).
    """
    time_s = metrics.get(M_TIME_S)
    if time_s is None:
        return f"without metric {M_TIME_S}"
    problem = time_problem(time_s)
    if problem is not None:
        return problem
    energy = metrics.get(energy_metric)
    if energy is None:
        return f"without metric {energy_metric}" + (" (meter failed)" if TAG_ENERGY_ERROR in tags else "")
    problem = energy_problem(energy, time_s, int(row["num_devices"]))
    if problem is not None:
        return problem
    row[M_TIME_S] = float(time_s)
    row[M_ENERGY_J] = float(energy)
    return None


def load_train_runs(
    client: TrackingClient, experiments: Sequence[str], hardware: str | None = None, energy_metric: str = M_ENERGY_J
) -> RunData:
    """Pull the FINISHED train runs of ``experiments`` (names or ids) into a :class:`RunData`.

    ``energy_metric`` is the metric read as the runs' ``energy_j`` (``energy_node_j``: fit the node).

    Raises:
        RooflineError: an unknown experiment, or no finished train run at all.
    """
    experiment_ids = resolve_experiment_ids(client, experiments)
    runs = search_train_runs(client, experiment_ids, hardware)
    if not runs:
        where = f" on hardware {hardware!r}" if hardware else ""
        raise RooflineError(
            f"runs: no FINISHED train runs (tag {TAG_RUN_TYPE}=train) in experiment(s) "
            f"{', '.join(experiments)}{where}; run `mlflow-roofline sweep` first"
        )
    return dataclasses.replace(runs_to_frame(runs, energy_metric), experiment_ids=experiment_ids)
