"""The power plot: one canvas per process, each plot drawn as a fresh figure would draw it."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from matplotlib.image import imread

from mlflow_roofline.train.power_plot import PowerCanvas, save_power_plot

BUSY = [(1000.0 + 0.5 * i, 180.0 + 60.0 * np.sin(i / 4)) for i in range(80)]
"""A long job near 200 W, its window from 1005 s to 1030 s."""
IDLE = [(50.0 + 2.0 * i, 3.0 + (i % 2)) for i in range(6)]
"""A short job near 4 W whose window was not recorded."""


def _pixels(png: bytes) -> np.ndarray:
    return imread(io.BytesIO(png), format="png")


def _fresh(timeline: list[tuple[float, float]], start: float | None, end: float | None, title: str) -> bytes:
    out = io.BytesIO()
    PowerCanvas().draw(timeline, start, end, title).savefig(out, format="png")
    return out.getvalue()


def test_a_plot_after_another_is_drawn_as_on_a_fresh_canvas(tmp_path: Path) -> None:
    first = save_power_plot(tmp_path / "busy.png", BUSY, 1005.0, 1030.0, title="power (nvml)")
    second = save_power_plot(tmp_path / "idle.png", IDLE, None, None, title="power (estimate)")
    again = save_power_plot(tmp_path / "busy-again.png", BUSY, 1005.0, 1030.0, title="power (nvml)")

    assert first.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_array_equal(_pixels(second.read_bytes()), _pixels(_fresh(IDLE, None, None, "power (estimate)")))
    np.testing.assert_array_equal(_pixels(again.read_bytes()), _pixels(first.read_bytes()))
    assert not np.array_equal(_pixels(first.read_bytes()), _pixels(second.read_bytes()))


def test_limits_hold_every_reading_and_the_window_and_the_legend_names_what_is_drawn() -> None:
    canvas = PowerCanvas()
    canvas.draw(BUSY, 995.0, 1045.0, title="power (nvml)")
    x_lo, x_hi = canvas.axes.get_xlim()
    assert x_lo < -5.0 and x_hi > 45.0  # the window reaches past the readings on both sides
    y_lo, y_hi = canvas.axes.get_ylim()
    assert y_lo == 0.0 and y_hi >= max(w for _, w in BUSY)
    assert [t.get_text() for t in canvas.axes.get_legend().get_texts()] == ["power", "measured window"]

    canvas.draw(IDLE, None, None)
    assert canvas.axes.get_ylim() == (0.0, 4.0 * 1.05)
    assert not canvas.span.get_visible()
    assert [t.get_text() for t in canvas.axes.get_legend().get_texts()] == ["power"]
    assert canvas.title.get_text() == ""
