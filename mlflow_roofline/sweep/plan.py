"""From a checked spec to an ordered list of configurations.

:func:`expand` is pure: the cartesian product of each grid, their union without
duplicates, ``single`` paired with one device and the other strategies with two or more,
every workload's ``single`` baseline added, impossible combinations set aside with the
reason :meth:`TrainConfig.validate` gives, baselines first. Where each configuration
stands in the store is :mod:`mlflow_roofline.sweep.lookup`'s business; what the sweep
does with it, :mod:`mlflow_roofline.sweep.reconcile`'s.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import cast

from mlflow_roofline.core.config import TrainConfig, node_problem
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.sweep.spec import GridValue, SweepSpec


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A grid point that cannot run, with the field at fault and the rule it breaks."""

    label: str
    values: tuple[tuple[str, object], ...]
    field: str
    reason: str

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (for the plan artifact)."""
        return {"config": self.label, "values": dict(self.values), "field": self.field, "reason": self.reason}


@dataclasses.dataclass(frozen=True)
class Plan:
    """The configurations of a sweep, baselines first, and the grid points skipped.

    Attributes:
        configs: runnable configurations, ``single`` baselines first, no duplicates.
        skipped: impossible grid points, each with its reason.
        hardware: the ``roofline.hardware`` value the hashes use, or None when the
            device is not available here (dry run of a GPU spec on a CPU machine).
        device: the resolved device (``cuda`` or ``cpu``).
        repeats: measured runs per configuration (each its own train run, ``roofline.repeat``
            0 .. repeats-1); the unit a sweep claims and resumes is one (configuration, repeat).
    """

    configs: tuple[TrainConfig, ...]
    skipped: tuple[Skipped, ...]
    hardware: str | None
    device: str
    repeats: int = 1

    @property
    def units(self) -> list[tuple[TrainConfig, int]]:
        """Every (configuration, repeat) to measure, configurations in plan order, repeats together."""
        return [(config, repeat) for config in self.configs for repeat in range(self.repeats)]

    def config_hash(self, config: TrainConfig) -> str | None:
        """The config's hash on this plan's hardware (None without hardware)."""
        return config.config_hash(self.hardware) if self.hardware is not None else None


MAX_GRID_POINTS = 100_000
"""Measured runs a spec may ask for by default: the sum over its grids of each product's size, times ``repeats``."""

PROGRESS_EVERY = 1000
"""Grid points between two progress reports while planning."""


def grid_points(spec: SweepSpec) -> int:
    """How many grid points ``spec``'s grids hold (before pairing, baselines and duplicates), computed, not expanded."""
    return sum(math.prod(len(values) for values in grid.values()) for grid in spec.grids)


def check_grid_size(spec: SweepSpec, max_points: int = MAX_GRID_POINTS) -> int:
    """The spec's grid size, checked with its repeats before anything is expanded.

    Returns:
        the number of grid points (what planning walks through).

    Raises:
        ConfigError: naming ``grid`` (or ``repeats`` when they make the difference) when grid
            points x repeats, the runs the sweep would measure, pass ``max_points``.
    """
    size = grid_points(spec)
    runs = size * spec.repeats
    if runs > max_points:
        if size > max_points:
            field, what = "grid", f"has {size:,} grid points"
        else:
            field, what = "repeats", f"{spec.repeats:,} x {size:,} grid points = {runs:,} runs"
        raise ConfigError(
            field,
            f"{what}, more than the limit of {max_points:,}; split the spec, or raise the limit (sweep --max-configs)",
        )
    return size


def expand(
    spec: SweepSpec,
    device: str,
    hardware: str | None,
    cuda_devices: int | None = None,
    cpu_cores: int | None = None,
    *,
    max_points: int = MAX_GRID_POINTS,
    progress: Callable[[int], None] | None = None,
) -> Plan:
    """Expand ``spec``'s grids into configurations for ``device`` (already resolved).

    Args:
        spec: a checked spec.
        device: ``cuda`` or ``cpu``.
        hardware: the hardware name the hashes use (None if unknown here).
        cuda_devices: GPUs visible on this machine when ``device`` is ``cuda``: configs
            needing more are skipped; None to skip no config for that reason.
        cpu_cores: cores of this machine when ``device`` is ``cpu``: configs needing more
            processes than the node hosts (:func:`~mlflow_roofline.core.config.node_problem`)
            are skipped; None to skip no config for that reason.
        max_points: the most grid points planned (:func:`check_grid_size`, checked first).
        progress: called with the number of grid points done since its last call, every
            :data:`PROGRESS_EVERY` points and at the end.

    Raises:
        ConfigError: the grid holds more than ``max_points`` points.
    """
    check_grid_size(spec, max_points)
    runnable: dict[TrainConfig, None] = {}
    baselines: dict[TrainConfig, None] = {}
    skipped: dict[Skipped, None] = {}
    done = 0
    for point in _points(spec):
        if point is not None:
            _place(point, device, cuda_devices, cpu_cores, (baselines, runnable, skipped))
        done += 1
        if progress is not None and done % PROGRESS_EVERY == 0:
            progress(PROGRESS_EVERY)
    if progress is not None and done % PROGRESS_EVERY:
        progress(done % PROGRESS_EVERY)
    return Plan(
        configs=tuple(baselines) + tuple(runnable),
        skipped=tuple(skipped),
        hardware=hardware,
        device=device,
        repeats=spec.repeats,
    )


def _place(
    point: dict[str, GridValue],
    device: str,
    cuda_devices: int | None,
    cpu_cores: int | None,
    into: tuple[dict[TrainConfig, None], dict[TrainConfig, None], dict[Skipped, None]],
) -> None:
    """Sort one grid point and its ``single`` baseline into ``into`` = (baselines, runnable, skipped)."""
    baselines, runnable, skipped = into
    try:
        config = _config(point, device)
    except ConfigError as exc:
        skipped[_skip(point, exc)] = None
        return
    baseline = dataclasses.replace(config, strategy="single", num_devices=1)
    for candidate in (baseline, config):
        problem = _problem(candidate, cuda_devices, cpu_cores)
        if problem is not None:
            if candidate is config or config.strategy == "single":
                # An added baseline that cannot run fails the same rule as its config.
                skipped[_skip(dataclasses.asdict(candidate), problem)] = None
        elif candidate.strategy == "single":
            baselines[candidate] = None
        else:
            runnable[candidate] = None


def _points(spec: SweepSpec) -> Iterator[dict[str, GridValue] | None]:
    """Every grid point of every grid, ``single`` on one device; None for another strategy on one device.

    A ``ddp``/``fsdp``/``tp`` point on one device is not a configuration of its own: it is
    the ``single`` baseline, which :func:`expand` adds for every workload.
    """
    for grid in spec.grids:
        keys = list(grid)
        for combo in itertools.product(*(grid[k] for k in keys)):
            point = dict(zip(keys, combo))
            if point["strategy"] == "single":
                point["num_devices"] = 1  # single always runs on one device
            elif cast(int, point["num_devices"]) < 2:
                yield None
                continue
            yield point


def _config(point: Mapping[str, GridValue], device: str) -> TrainConfig:
    """A TrainConfig from a grid point, turning head_size and ffn_ratio into counts."""
    values = {k: v for k, v in point.items() if k not in ("head_size", "ffn_ratio")}
    hidden = cast(int, point["hidden_size"])  # the spec checked every count
    if "head_size" in point:
        head_size = cast(int, point["head_size"])
        if hidden % head_size:
            raise ConfigError("hidden_size", f"must be divisible by head_size ({hidden} % {head_size} != 0)")
        values["num_heads"] = hidden // head_size
    if "ffn_ratio" in point:
        ffn = Fraction(str(point["ffn_ratio"])) * hidden
        if ffn.denominator != 1:
            raise ConfigError(
                "ffn_size", f"ffn_ratio {point['ffn_ratio']} x hidden_size {hidden} = {float(ffn)} is not an integer"
            )
        values["ffn_size"] = int(ffn)
    values["device"] = device
    return TrainConfig.from_mapping(values)


def _problem(config: TrainConfig, cuda_devices: int | None, cpu_cores: int | None) -> ConfigError | None:
    try:
        config.validate()
    except ConfigError as exc:
        return exc
    return node_problem(config, cuda_devices, cpu_cores)


def _skip(point: Mapping[str, object], error: ConfigError) -> Skipped:
    values = tuple(sorted((k, v) for k, v in point.items() if k != "device"))
    return Skipped(label=point_label(point), values=values, field=error.field, reason=str(error))


def point_label(point: Mapping[str, object]) -> str:
    """A run-name-like label of a grid point, even one that is not a valid config (the order of
    :attr:`~mlflow_roofline.core.config.TrainConfig.run_name`: placement first)."""
    heads = point.get("num_heads", f"{point.get('hidden_size')}/{point.get('head_size')}")
    ffn = point.get("ffn_size", f"{point.get('ffn_ratio')}d")
    return (
        f"{point.get('strategy')}-x{point.get('num_devices')}-L{point.get('num_layers')}-d{point.get('hidden_size')}"
        f"-h{heads}-ff{ffn}-S{point.get('seq_len')}-B{point.get('batch_size')}"
    )
