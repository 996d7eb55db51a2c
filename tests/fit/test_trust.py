"""What a fit does not trust: superlinear speedups, disagreeing repeats, exponents of the wrong sign."""

from __future__ import annotations

import dataclasses

import pandas as pd

from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.fit.report.markdown import fit_markdown
from mlflow_roofline.fit.runs.noise import RepeatSpread
from mlflow_roofline.fit.runs.trust import (
    REPEAT_SPREAD_LIMIT_PCT,
    SUPERLINEAR_TOLERANCE,
    repeat_note,
    sign_notes,
    superlinear_note,
)
from mlflow_roofline.testing.synthetic import generate_synthetic_runs


def _runs(speedups: list[float], devices: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"speedup": speedups, "num_devices": devices, "eta_source": ["measured"] * len(devices)})


def test_a_speedup_above_the_device_count_is_named_with_the_worst() -> None:
    fine = _runs([1.8, 2.0 * (1 + SUPERLINEAR_TOLERANCE)], [2, 2])
    assert superlinear_note(fine) is None  # at the tolerance: not flagged
    note = superlinear_note(_runs([1.8, 7.4, 12.8, 3.9], [2, 2, 2, 4]))
    assert note is not None and note.startswith("2 of 4 parallel runs") and "12.8x on 2 devices" in note


def test_repeats_beyond_the_threshold_are_noise() -> None:
    assert repeat_note(RepeatSpread(0, float("nan"))) is None
    assert repeat_note(RepeatSpread(5, REPEAT_SPREAD_LIMIT_PCT)) is None
    note = repeat_note(RepeatSpread(5, 81.1))
    assert note is not None and "81.1%" in note and f"{REPEAT_SPREAD_LIMIT_PCT:g}%" in note


def test_negative_exponents_and_a_time_law_falling_with_size() -> None:
    assert sign_notes({"alpha_C": 0.9, "alpha_M": 0.1}, (0.5, 0.4)) == []
    notes = sign_notes({"alpha_C": 1.2, "alpha_M": -1.07}, (0.3, -0.5))
    assert len(notes) == 2 and notes[0].startswith("alpha_M = -1.07 < 0") and "time law falls with size" in notes[1]


def test_the_fit_report_and_description_say_it_and_the_fit_still_stands() -> None:
    _, frame = generate_synthetic_runs(10, seed=3)
    clean = fit_hardware(frame, "synthetic-gpu")
    assert clean.distrust == []
    assert "Not to be trusted" not in fit_markdown(clean, clean.metrics(), len(frame))
    parallel = clean.frame.index[clean.frame["strategy"] != "single"][0]
    noisy = dataclasses.replace(
        clean,
        frame=clean.frame.assign(
            speedup=clean.frame["speedup"].where(
                clean.frame.index != parallel, 10.0 * clean.frame.loc[parallel, "num_devices"]
            )
        ),
    )
    assert len(noisy.distrust) == 1 and "above their device count" in noisy.distrust[0]
    assert "not trusted: 1 of" in noisy.report()
    text = fit_markdown(noisy, noisy.metrics(), len(frame))
    assert "### Not to be trusted" in text and text.index("Not to be trusted") < text.index("= κ")


def test_device_count_axes_tick_whole_devices() -> None:
    from mlflow_roofline.fit.report import plots
    from mlflow_roofline.fit.speedup_fit import laws_of

    _, frame = generate_synthetic_runs(6, seed=2, device_counts=(2, 3))
    fit = fit_hardware(frame, "synthetic-gpu")
    for figure in (
        plots.speedup_vs_n(fit.frame, laws_of(fit.speedup)),
        plots.energy_vs_n(fit.frame, laws_of(fit.speedup), fit.metrics()["alpha_eta"], fit.psi),
    ):
        axis = figure.axes[0]
        lo, hi = axis.get_xlim()
        ticks = [t for t in axis.get_xticks() if lo <= t <= hi]
        assert ticks and all(float(t).is_integer() for t in ticks)
