"""Diagnostic plots of a fit, as matplotlib figures (Agg, no global pyplot state).

The fit logs each with ``mlflow.log_figure`` under ``plots/`` (:mod:`mlflow_roofline.fit.report.run_page`):

- ``measured_vs_predicted.png``: measured energy against the baseline law's and the
  efficiency-aware law's predictions (log-log, the diagonal is a perfect fit);
- ``residuals.png``: log residuals against fitted log energy, per law;
- ``speedup_vs_n.png``: measured speedup against N per strategy, the fitted speedup
  law and ideal scaling S = N;
- ``energy_vs_n.png``: energy per sample relative to the same workload on one device,
  against N per strategy, with what the efficiency-aware law implies;
- ``extrapolation.png``: measured energy of the larger models held out by the
  size-extrapolation check against what the paper's, the roofline and the registered
  form predicted from the smaller ones (:func:`measured_vs_predicted` on those runs).
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter, MaxNLocator, NullLocator

from mlflow_roofline.core.schema import M_ENERGY_J, present_strategies
from mlflow_roofline.law.speedup import SpeedupLaw

COLORS: dict[str, str] = {"single": "#444444", "ddp": "#1f77b4", "fsdp": "#2ca02c", "tp": "#d62728"}
DPI = 110
MINOR_TICK_DECADES = 2.0
"""A log axis spanning more decades than this gets no minor ticks (two labelled decades or more are
on it; below, the minor ticks are kept, and labelled where the span is under one decade). Eight a
decade are a grey band on a wide axis, and matplotlib builds each tick as artists of its own: on a
five-decade log-log panel they were 60 % of the figure's drawing time."""


def _device_ticks() -> MaxNLocator:
    """Ticks of a device-count axis: whole devices only (no 1.5 GPUs)."""
    return MaxNLocator(integer=True)


def _layout(fig: Figure, panels: int = 1) -> None:
    """Fixed margins: tight_layout measures every tick label and costs more than the plot."""
    fig.subplots_adjust(left=0.12 if panels == 1 else 0.06, right=0.98, bottom=0.12, top=0.91, wspace=0.25)


def _log_minor_ticks(axis: Axis, lo: float, hi: float) -> None:
    """Drop the minor ticks of the log ``axis`` from ``lo`` to ``hi`` when it spans over :data:`MINOR_TICK_DECADES`."""
    if np.log10(hi / lo) > MINOR_TICK_DECADES:
        axis.set_minor_locator(NullLocator())


def _strategies(data: pd.DataFrame) -> list[str]:
    return present_strategies(data["strategy"])


def measured_vs_predicted(data: pd.DataFrame, fitted: Mapping[str, np.ndarray]) -> Figure:
    """Measured vs predicted energy (joules), one panel per law in ``fitted`` (name -> fitted log_E)."""
    fig = Figure(figsize=(5.0 * len(fitted), 4.6))
    measured = np.exp(data["log_E"].to_numpy())
    lo, hi = measured.min() / 1.5, measured.max() * 1.5
    for i, (name, log_pred) in enumerate(fitted.items(), start=1):
        ax = fig.add_subplot(1, len(fitted), i)
        for strategy in _strategies(data):
            mask = (data["strategy"].astype(str) == strategy).to_numpy()
            ax.plot(
                np.exp(log_pred[mask]), measured[mask], ".", ms=4, alpha=0.6, color=COLORS[strategy], label=strategy
            )
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
        ax.set(
            xscale="log",
            yscale="log",
            xlim=(lo, hi),
            ylim=(lo, hi),
            xlabel="predicted energy (J)",
            ylabel="measured energy (J)",
            title=name,
        )
        for axis in (ax.xaxis, ax.yaxis):
            _log_minor_ticks(axis, lo, hi)
        ax.legend(fontsize=8)
    _layout(fig, len(fitted))
    fig.set_dpi(DPI)
    return fig


def residuals(data: pd.DataFrame, fitted: Mapping[str, np.ndarray]) -> Figure:
    """Log residuals (measured - predicted log_E) against fitted log_E, one panel per law."""
    fig = Figure(figsize=(5.0 * len(fitted), 4.0))
    actual = data["log_E"].to_numpy()
    for i, (name, log_pred) in enumerate(fitted.items(), start=1):
        ax = fig.add_subplot(1, len(fitted), i)
        resid = actual - log_pred
        for strategy in _strategies(data):
            mask = (data["strategy"].astype(str) == strategy).to_numpy()
            ax.plot(log_pred[mask], resid[mask], ".", ms=4, alpha=0.6, color=COLORS[strategy], label=strategy)
        ax.axhline(0.0, color="black", lw=0.8)
        rmse = float(np.sqrt(np.mean(resid**2)))
        ax.set(xlabel="fitted log energy (log J)", ylabel="residual (log J)", title=f"{name}: rmse {rmse:.3f}")
        ax.legend(fontsize=8)
    _layout(fig, len(fitted))
    fig.set_dpi(DPI)
    return fig


def speedup_vs_n(frame: pd.DataFrame, laws: Mapping[str, SpeedupLaw]) -> Figure:
    """Measured speedup vs device count per strategy, with the fitted laws and S = N."""
    fig = Figure(figsize=(6.0, 4.6))
    ax = fig.add_subplot(1, 1, 1)
    measured = frame[frame["eta_source"] == "measured"]
    n_max = max(int(frame["num_devices"].max()), 2)
    grid = np.linspace(1.0, n_max, 100)
    ax.plot(grid, grid, color="black", lw=0.8, ls=":", label="ideal S = N")
    rng = np.random.default_rng(0)
    for strategy in _strategies(frame):
        if strategy == "single":
            continue
        rows = measured[measured["strategy"] == strategy]
        jitter = rng.uniform(-0.08, 0.08, size=len(rows))
        ax.plot(rows["num_devices"] + jitter, rows["speedup"], ".", ms=4, alpha=0.5, color=COLORS[strategy])
        if strategy in laws:
            law = laws[strategy]
            params = ", ".join(f"{k}={v:.3g}" for k, v in law.params.items())
            ax.plot(grid, law(grid), color=COLORS[strategy], lw=1.6, label=f"{strategy}: {law.form}({params})")
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set(xlabel="devices N", ylabel="speedup S = t1 / tN (per sample)", title="speedup vs N")
    ax.xaxis.set_major_locator(_device_ticks())
    ax.legend(fontsize=7)
    _layout(fig)
    fig.set_dpi(DPI)
    return fig


def energy_vs_n(
    frame: pd.DataFrame, laws: Mapping[str, SpeedupLaw], alpha_eta: float, psi: Mapping[str, float]
) -> Figure:
    """Energy per sample relative to the workload's single run, vs N per strategy.

    Lines: what the efficiency-aware law implies for a fixed job,
    eta(N)^alpha_eta * exp(psi[strategy]) with eta from the fitted speedup law.
    """
    fig = Figure(figsize=(6.0, 4.6))
    ax = fig.add_subplot(1, 1, 1)
    per_sample = frame[M_ENERGY_J] / (frame["batch_size"] * frame["num_steps"])
    singles = frame["strategy"] == "single"
    base = per_sample[singles].groupby(frame.loc[singles, "workload_hash"]).median()
    ratio = per_sample / frame["workload_hash"].map(base)
    n_max = max(int(frame["num_devices"].max()), 2)
    grid = np.linspace(1.0, n_max, 100)
    rng = np.random.default_rng(1)
    for strategy in _strategies(frame):
        if strategy == "single":
            continue
        mask = (frame["strategy"] == strategy) & ratio.notna()
        jitter = rng.uniform(-0.08, 0.08, size=int(mask.sum()))
        ax.plot(frame.loc[mask, "num_devices"] + jitter, ratio[mask], ".", ms=4, alpha=0.5, color=COLORS[strategy])
        if strategy in laws and np.isfinite(alpha_eta):
            eta = laws[strategy](grid) / grid
            implied = eta**alpha_eta * np.exp(psi.get(strategy, 0.0))
            ax.plot(grid, implied, color=COLORS[strategy], lw=1.6, label=f"{strategy}: law")
    ax.axhline(1.0, color="black", lw=0.8, label="same energy as one device")
    ax.set(yscale="log", xlabel="devices N", ylabel="energy per sample / single-device", title="energy vs N")
    ax.xaxis.set_major_locator(_device_ticks())
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.legend(fontsize=7)
    _layout(fig)
    fig.set_dpi(DPI)
    return fig
