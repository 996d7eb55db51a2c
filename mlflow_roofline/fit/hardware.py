"""Everything fitted for one hardware's runs, without MLflow: speedup, efficiency, energy laws.

Steps: ``estimate`` energy is never mixed with measured energy unless
``allow_estimate`` (where both exist the estimated runs are dropped, where only
estimates exist the fit stops and says to pass ``--allow-estimate``); measured speedup
and efficiency (:mod:`fit.measured_speedup`) and speedup laws per strategy
(:mod:`fit.speedup_fit`); runs without a single-device baseline get eta from their
strategy's law (``missing_baseline="law"``, counted as ``n_eta_from_law``) or are
dropped (``missing_baseline="drop"``); then the energy forms, the additive roofline and
the time law (:mod:`fit.energy_laws`).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from mlflow_roofline.core.errors import ConfigError, RooflineError
from mlflow_roofline.core.schema import MISSING_BASELINE_CHOICES, TAG_ENERGY_SOURCE
from mlflow_roofline.fit.diagnostics import law_ranges
from mlflow_roofline.fit.energy_laws import EnergyFits, fit_energy_laws
from mlflow_roofline.fit.features import feature_frame
from mlflow_roofline.fit.forms import PAPER
from mlflow_roofline.fit.measured_speedup import fill_from_laws, measure_speedup
from mlflow_roofline.fit.noise import RepeatSpread, repeat_spread
from mlflow_roofline.fit.speedup_fit import SpeedupFit, fit_speedup_laws, laws_of
from mlflow_roofline.law.fitted import FittedLaw

ESTIMATE = "estimate"


@dataclasses.dataclass
class HardwareFit:
    """Everything fitted for one hardware.

    Attributes:
        hardware: the ``roofline.hardware`` value.
        energy_source: the energy sources of the runs used, ``+``-joined.
        frame: the runs used, with speedup, eta and eta_source.
        data: their law features (:func:`fit.features.feature_frame`).
        speedup: fitted speedup law per strategy.
        energy: the energy forms, roofline decomposition and time law.
        law: the registered law (the chosen form).
        dropped: reason -> runs dropped for this hardware after the pull.
        run_id: the fit run.
        model_version: the registered version (None without registration).
        aliases: aliases set on that version.
        noise: the repeat-to-repeat spread of energy (:mod:`fit.noise`), the noise floor.
    """

    hardware: str
    energy_source: str
    frame: pd.DataFrame
    data: pd.DataFrame
    speedup: dict[str, SpeedupFit]
    energy: EnergyFits
    law: FittedLaw
    dropped: dict[str, int]
    run_id: str = ""
    model_version: str | None = None
    aliases: list[str] = dataclasses.field(default_factory=list)
    noise: RepeatSpread = dataclasses.field(default_factory=lambda: RepeatSpread(0, float("nan")))

    @property
    def psi(self) -> dict[str, float]:
        """Log strategy factors of the paper's law, by strategy (the reference level is 0)."""
        law = self.energy.forms[PAPER].law
        prefix = "strategy[T."
        return {t[len(prefix) : -1]: law.coefficient(t) for t in law.terms if t.startswith(prefix)}

    def metrics(self) -> dict[str, float]:
        """The fit run's metrics (:func:`fit.metrics.fit_metrics`)."""
        from mlflow_roofline.fit.metrics import fit_metrics

        return fit_metrics(self)

    def report(self) -> str:
        """Human-readable summary of this hardware's fit (:func:`fit.report.hardware_report`)."""
        from mlflow_roofline.fit.report import hardware_report

        return hardware_report(self)


def select_energy_sources(
    frame: pd.DataFrame, hardware: str, allow_estimate: bool
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Keep measured energy only, unless ``allow_estimate``; see the module docstring.

    Raises:
        RooflineError: every run of ``hardware`` is an estimate and ``allow_estimate`` is off.
    """
    is_estimate = frame["energy_source"] == ESTIMATE
    if allow_estimate or not is_estimate.any():
        return frame, {}
    if is_estimate.all():
        raise RooflineError(
            f"allow_estimate: all {len(frame)} runs on {hardware!r} carry estimated energy "
            f"({TAG_ENERGY_SOURCE}=estimate, not measured); pass --allow-estimate true to fit on them"
        )
    return frame[~is_estimate], {
        "with estimated energy (not mixed with measured; --allow-estimate mixes them)": int(is_estimate.sum())
    }


def _speedup_and_eta(
    frame: pd.DataFrame, hardware: str, missing_baseline: str, dropped: dict[str, int]
) -> tuple[pd.DataFrame, dict[str, SpeedupFit]]:
    """Measured speedup, the speedup laws, and eta for every kept run (see the module docstring)."""
    measured = measure_speedup(frame)
    speedup = fit_speedup_laws(measured)
    if "single" not in speedup:
        raise RooflineError(
            f"runs: no single-device run (strategy single) on {hardware!r}: speedup, efficiency and the "
            "time law need them as baselines; add strategy single to the sweep"
        )
    used, n_no_base = fill_from_laws(measured, {} if missing_baseline == "drop" else laws_of(speedup))
    if n_no_base:
        dropped["without a single-device baseline" + (" or a speedup law" if missing_baseline == "law" else "")] = (
            n_no_base
        )
    return used, speedup


def fit_hardware(
    frame: pd.DataFrame, hardware: str, *, allow_estimate: bool = False, missing_baseline: str = "law", seed: int = 0
) -> HardwareFit:
    """Every fit of one hardware's runs (no MLflow logging)."""
    if missing_baseline not in MISSING_BASELINE_CHOICES:
        raise ConfigError(
            "missing_baseline", f"must be one of {', '.join(MISSING_BASELINE_CHOICES)}, got {missing_baseline!r}"
        )
    frame, dropped = select_energy_sources(frame, hardware, allow_estimate)
    used, speedup = _speedup_and_eta(frame, hardware, missing_baseline, dropped)
    data = feature_frame(used)
    ranges = law_ranges(used, data)
    energy = fit_energy_laws(data, seed=seed, speedup_laws=laws_of(speedup), ranges=ranges)
    sources = "+".join(sorted(used["energy_source"].unique()))
    law = FittedLaw(
        hardware=hardware,
        energy_source=sources,
        form=energy.chosen,
        energy_law=energy.forms[energy.chosen].law,
        time_law=energy.time.law,
        speedup_laws=laws_of(speedup),
        ranges=ranges,
        n_runs=len(used),
        cv_mape=energy.forms[energy.chosen].cv_mape,
    )
    return HardwareFit(hardware, sources, used, data, speedup, energy, law, dropped, noise=repeat_spread(used))
