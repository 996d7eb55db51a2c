"""Power timelines: ``(unix time s, watts)`` points, thinned for logging and summed over processes."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

Point = tuple[float, float]


def downsample(points: Sequence[Sequence[float]], max_points: int) -> list[Point]:
    """At most ``max_points`` points: consecutive points averaged in equal-count buckets.

    Each bucket keeps its last time and the mean of its watts, so a timeline of equally
    spaced points keeps its energy (the integral of power over time). Fewer points than
    ``max_points`` are returned as they are.
    """
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points}")
    if len(points) <= max_points:
        return [(float(t), float(w)) for t, w in points]
    array = np.asarray(points, dtype=float)
    edges = np.linspace(0, len(array), max_points + 1).astype(int)
    return [(float(array[e - 1, 0]), float(array[s:e, 1].mean())) for s, e in itertools.pairwise(edges) if e > s]


def sum_aligned(reference: Sequence[Sequence[float]], others: Sequence[Sequence[Sequence[float]]]) -> list[Point]:
    """``reference`` with every timeline of ``others`` added, each interpolated at the reference's times.

    Times are Unix seconds, comparable across the processes of a node (and across nodes
    as far as their clocks agree). Outside another timeline's span its first or last
    watts are held.
    """
    if not reference:
        return []
    ref = np.asarray(reference, dtype=float)
    total = ref[:, 1].copy()
    for other in others:
        if len(other):
            arr = np.asarray(other, dtype=float)
            total += np.interp(ref[:, 0], arr[:, 0], arr[:, 1])
    return [(float(t), float(w)) for t, w in zip(ref[:, 0], total)]


def mean_power(readings: Sequence[tuple[float, float]], min_dt: float = 0.0) -> list[Point]:
    """``(unix time s, watts)``: the mean power between two cumulative ``(unix time s, joules)`` readings, at the later.

    Readings closer than ``min_dt`` seconds to the one kept before are merged (window-edge
    readings close to a periodic one would give a noisy power); the last reading is always
    kept, so the result spans all of them.
    """
    kept: list[tuple[float, float]] = []
    for point in readings:
        if not kept or point[0] - kept[-1][0] >= min_dt:
            kept.append(point)
    if len(readings) > 1 and kept[-1] is not readings[-1]:
        kept[-1] = readings[-1]
    return [(t1, (j1 - j0) / (t1 - t0)) for (t0, j0), (t1, j1) in itertools.pairwise(kept) if t1 > t0]
