"""The power timeline of a train run as a PNG: watts against seconds, the measured window shaded.

Matplotlib's object API on the Agg backend (no pyplot state), so it draws in any process.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def power_figure(
    timeline: Sequence[Sequence[float]],
    window_start: float | None,
    window_end: float | None,
    title: str = "",
) -> Figure:
    """Power (watts) against time (seconds from the first point), the train window shaded.

    Args:
        timeline: ``(unix time s, watts)`` points in time order.
        window_start, window_end: the measured window, Unix seconds (None: not shaded).
        title: the figure's title (the source of the readings).
    """
    t0 = timeline[0][0]
    seconds = [t - t0 for t, _ in timeline]
    watts = [w for _, w in timeline]
    figure = Figure(figsize=(8, 3.5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.plot(
        seconds,
        watts,
        drawstyle="steps-pre",
        color="tab:blue",
        linewidth=1.2,
        label="power",
    )
    if window_start is not None and window_end is not None:
        axes.axvspan(
            window_start - t0,
            window_end - t0,
            color="tab:orange",
            alpha=0.2,
            label="measured window",
        )
    axes.set_xlabel("time since the job's first reading (s)")
    axes.set_ylabel("power (W)")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    if title:
        axes.set_title(title)
    figure.tight_layout()
    return figure


def save_power_plot(
    path: Path,
    timeline: Sequence[Sequence[float]],
    window_start: float | None,
    window_end: float | None,
    title: str = "",
) -> Path:
    """Write :func:`power_figure` to ``path`` as a PNG; return ``path``."""
    power_figure(timeline, window_start, window_end, title).savefig(path, format="png")
    return path
