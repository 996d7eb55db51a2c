"""The noise floor: the repeat-to-repeat spread of energy the fit reports."""

from __future__ import annotations

import math
import warnings

import pandas as pd

from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.fit.runs.noise import repeat_spread
from mlflow_roofline.testing.roofline_generator import RooflineHardware, generate_roofline_runs


def test_spread_follows_the_generators_repeat_noise_and_is_reported() -> None:
    warnings.simplefilter("ignore")
    noisy = RooflineHardware(time_noise_sd=0.0, energy_noise_sd=0.05)
    frame = generate_roofline_runs(16, hardware=[noisy], repeats=3, steps=(20,), seed=1)
    spread = repeat_spread(frame)
    assert spread.n_configs == 16  # every workload's single-device run repeats three times
    # sample std of 3 draws with sd 5%: its median is about 0.83 * 5% (chi distribution with 2 df)
    assert 2.5 < spread.median_rel_std_pct < 6.5
    fit = fit_hardware(frame, noisy.name)
    assert fit.noise == spread
    assert fit.metrics()["repeat_spread_pct"] == spread.median_rel_std_pct
    assert fit.metrics()["n_repeated_configs"] == 16
    assert "noise floor" in fit.report() and f"{spread.median_rel_std_pct:.3g}%" in fit.report()


def test_no_repeats_no_noise_floor_and_no_noise_no_spread() -> None:
    quiet = RooflineHardware(time_noise_sd=0.0, energy_noise_sd=0.0)
    twice = generate_roofline_runs(6, hardware=[quiet], repeats=2, steps=(20,), seed=2)
    assert repeat_spread(twice).median_rel_std_pct < 1e-9
    once = repeat_spread(generate_roofline_runs(6, hardware=[quiet], repeats=1, seed=2))
    assert once.n_configs == 0 and math.isnan(once.median_rel_std_pct)
    assert "noise floor unknown" in once.describe()


def test_a_decoder_is_no_repeat_of_the_encoder_of_the_same_sizes() -> None:
    quiet = RooflineHardware(time_noise_sd=0.0, energy_noise_sd=0.0)
    once = generate_roofline_runs(4, hardware=[quiet], repeats=1, steps=(20,), seed=3)
    decoders = once.assign(arch="decoder", energy_j=once["energy_j"] * 3.0)
    encoders = once.assign(arch="encoder")
    assert repeat_spread(pd.concat([encoders, decoders], ignore_index=True)).n_configs == 0
