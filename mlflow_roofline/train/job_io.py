"""What the launching process and a training job exchange, as files in the job's directory.

The launcher writes ``job.json`` (:class:`JobSpec`); rank 0 writes ``result.json``
(:class:`JobResult`); a failing rank writes ``error-rank<i>.txt`` (its traceback). Plain
data, no torch: the launching process reads these without importing the workload.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.train.job_energy import JobExtras, RankWindows

SPEC_FILE = "job.json"
RESULT_FILE = "result.json"
ERROR_FILE = "error-rank{rank}.txt"


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """What to run: the train params (resolved device), the meter to read, the seed, every how many
    seconds the ranks publish the train window's running energy (None: never; see ``train.live_energy``),
    and the FLOPs of one step when the launcher has them already (a sweep that counted the same workload
    for an earlier configuration: strategy and device count do not change them; None: rank 0 counts them).
    """

    params: dict[str, str]
    meter: str = "auto"
    seed: int = 0  # workload.DEFAULT_SEED
    live_interval_s: float | None = None
    flops_per_step: int | None = None

    @property
    def config(self) -> TrainConfig:
        return TrainConfig.from_mapping(self.params)

    def write(self, job_dir: Path) -> None:
        (job_dir / SPEC_FILE).write_text(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def read(cls, job_dir: Path) -> JobSpec:
        return cls(**json.loads((job_dir / SPEC_FILE).read_text()))


@dataclasses.dataclass
class RankEnergy:
    """One rank's energy window: joules (``None`` if not read or failed) and seconds."""

    rank: int
    read: bool
    energy_j: float | None
    time_s: float
    error: str | None = None
    warning: str | None = None
    windows: RankWindows | None = None  # warm-up, companions and timeline (ranks that read a meter)


@dataclasses.dataclass
class JobResult:
    """What rank 0 reports for the whole job (totals over the window and all ranks).

    Attributes:
        flops_per_step: counted FLOPs of one step of the global batch (FLOPs).
        losses: global-batch mean loss of each measured step.
        time_s: wall time of the measured window, the longest over ranks (seconds).
        step_times_s: rank 0's time of each measured step (seconds).
        energy_j: joules of every device of the job, ``None`` if any reading failed.
        energy_source: the meter that measured (``nvml``, ``rapl``, ``estimate`` ...).
        energy_scope: what one reading covers (``device``, ``node``, ``process``).
        energy_error: why ``energy_j`` is ``None``.
        energy_warning: caveats on the readings.
        ranks: each rank's own window.
        extras: warm-up energy, node energy, the meter cross-check and the power timeline.
    """

    flops_per_step: int
    losses: list[float]
    time_s: float
    step_times_s: list[float]
    energy_j: float | None
    energy_source: str
    energy_scope: str
    energy_error: str | None
    energy_warning: str | None
    ranks: list[RankEnergy]
    extras: JobExtras = dataclasses.field(default_factory=JobExtras)

    @property
    def step_time_s(self) -> float:
        """Median step time (seconds)."""
        return statistics.median(self.step_times_s)

    def write(self, job_dir: Path) -> None:
        (job_dir / RESULT_FILE).write_text(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def read(cls, job_dir: Path) -> JobResult:
        raw = json.loads((job_dir / RESULT_FILE).read_text())
        raw["ranks"] = [RankEnergy(**r) for r in raw["ranks"]]  # written without their windows (in extras)
        raw["extras"] = JobExtras(**raw.get("extras", {}))
        return cls(**raw)
