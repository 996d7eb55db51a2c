"""The ``fit`` job: pull train runs, fit every law per hardware, log a fit run, register the model.

Steps (one pass per ``roofline.hardware``):

1. :func:`run_data.load_train_runs` pulls the FINISHED train runs (dropped runs are
   counted with their reasons);
2. ``estimate`` energy is never mixed with measured energy unless ``allow_estimate``:
   where both exist the estimated runs are dropped, where only estimates exist the
   fit stops and says to pass ``--allow-estimate``;
3. measured speedup and efficiency (:mod:`efficiency`), speedup laws per strategy
   (:mod:`speedup_fit`); runs without a single-device baseline get eta from their
   strategy's law (``missing_baseline="law"``, counted as ``n_eta_from_law``) or are
   dropped (``missing_baseline="drop"``);
4. the energy forms, the additive roofline and the time law (:mod:`scaling`);
5. a fit run (``roofline.run_type=fit``) with metrics, summaries, the coefficient
   table, the law as JSON and the plots; the chosen form is logged as the pyfunc
   model, registered under ``model_name``, aliased and tagged with the fit run and
   its ``cv_mape``.

Metrics of a fit run (the paper's form unless named otherwise): ``n_runs``; ``adj_r2``
and ``adj_r2_baseline``; ``rmse_log`` and ``rmse_log_baseline`` (in-sample, natural-log
units); ``rmse_reduction`` (% by which the paper's rmse_log is below the baseline's);
``alpha_c``, ``alpha_m``, ``alpha_eta``, ``log_kappa`` (log J) and ``psi_<strategy>``;
``cv_mape`` (% , the registered form's) and ``cv_mape_<form>``, ``cv_mape_se_<form>``,
``adj_r2_<form>``, ``rmse_log_<form>`` for every form; ``eps_comp_j_per_flop``,
``eps_mem_j_per_element``, ``e0_j``, ``roofline_mape`` (additive decomposition);
``time_log_tau``, ``time_beta_c``, ``time_beta_m``, ``time_adj_r2``, ``time_cv_mape``;
``speedup_<strategy>_<param>``, ``_rmse``, ``_n_points``; run counts ``n_runs_found``,
``n_runs_dropped_pull``, ``n_runs_dropped``, ``n_eta_measured``, ``n_eta_from_law``,
``n_workloads``. The chosen form is the param ``form`` and the tag ``roofline.form``.

With several hardware, each gets a nested fit run under one parent (which also logs the
pooled comparison of common against hardware-specific slopes); the hardware with the
most runs gets ``alias`` and every hardware gets ``alias-<hardware>``.
Inside ``mlflow run`` (``MLFLOW_RUN_ID`` set) the project's run is the fit run (or the parent).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow import MlflowClient

from mlflow_roofline.fit import forms as scaling
from mlflow_roofline.fit.measured_speedup import ETA_LAW, ETA_MEASURED, fill_from_laws, measure_speedup
from mlflow_roofline.core.errors import ConfigError, RooflineError
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.fit.run_data import RunData, load_train_runs
from mlflow_roofline.core.schema import (
    MISSING_BASELINE_CHOICES,
    TAG_CV_MAPE,
    TAG_ENERGY_SOURCE,
    TAG_FIT_RUN_ID,
    TAG_FORM,
    TAG_HARDWARE,
    TAG_RUN_TYPE,
    present_strategies,
)
from mlflow_roofline.fit.speedup_fit import SpeedupFit, fit_speedup_laws, laws_of

ESTIMATE = "estimate"


@dataclasses.dataclass
class HardwareFit:
    """Everything fitted for one hardware.

    Attributes:
        hardware: the ``roofline.hardware`` value.
        energy_source: the energy sources of the runs used, ``+``-joined.
        frame: the runs used, with speedup, eta and eta_source.
        data: their law features (:func:`scaling.feature_frame`).
        speedup: fitted speedup law per strategy.
        energy: the energy forms, roofline decomposition and time law.
        law: the registered law (the chosen form).
        dropped: reason -> runs dropped for this hardware after the pull.
        run_id: the fit run.
        model_version: the registered version (None without registration).
        aliases: aliases set on that version.
    """

    hardware: str
    energy_source: str
    frame: pd.DataFrame
    data: pd.DataFrame
    speedup: dict[str, SpeedupFit]
    energy: scaling.EnergyFits
    law: FittedLaw
    dropped: dict[str, int]
    run_id: str = ""
    model_version: str | None = None
    aliases: list[str] = dataclasses.field(default_factory=list)

    @property
    def psi(self) -> dict[str, float]:
        """Log strategy factors of the paper's law, by strategy (the reference level is 0)."""
        law = self.energy.forms[scaling.PAPER].law
        prefix = "strategy[T."
        return {t[len(prefix):-1]: law.coefficient(t) for t in law.terms if t.startswith(prefix)}

    def metrics(self) -> dict[str, float]:
        """The fit run's metrics (DESIGN.md names first)."""
        paper = self.energy.forms[scaling.PAPER]
        base = self.energy.forms[scaling.BASELINE]
        chosen = self.energy.forms[self.energy.chosen]
        out: dict[str, float] = {
            "n_runs": float(len(self.frame)),
            "adj_r2": paper.adj_r2,
            "adj_r2_baseline": base.adj_r2,
            "rmse_log": paper.rmse_log,
            "rmse_log_baseline": base.rmse_log,
            "rmse_reduction": 100.0 * (1.0 - paper.rmse_log / base.rmse_log) if base.rmse_log > 0 else float("nan"),
            "alpha_c": paper.law.coefficient("log_C"),
            "alpha_m": paper.law.coefficient("log_M"),
            "alpha_eta": paper.law.coefficient("log_eta") if "log_eta" in paper.law.terms else float("nan"),
            "log_kappa": paper.law.coefficient("Intercept"),
            "cv_mape": chosen.cv_mape,
            "n_runs_dropped": float(sum(self.dropped.values())),  # after the pull, for this hardware
            "n_eta_from_law": float((self.frame["eta_source"] == ETA_LAW).sum()),
            "n_eta_measured": float((self.frame["eta_source"] == ETA_MEASURED).sum()),
            "n_workloads": float(self.frame["workload_hash"].nunique()),
            "corr_log_c_log_m": scaling.collinearity(self.data),
            "eps_comp_j_per_flop": self.energy.roofline.eps_comp,
            "eps_mem_j_per_element": self.energy.roofline.eps_mem,
            "e0_j": self.energy.roofline.e0,
            "roofline_mape": self.energy.roofline.mape,
            "time_beta_c": self.energy.time.law.coefficient("log_C"),
            "time_beta_m": self.energy.time.law.coefficient("log_M"),
            "time_log_tau": self.energy.time.law.coefficient("Intercept"),
            "time_adj_r2": self.energy.time.adj_r2,
            "time_per_work": float(self.energy.time.name == "time_per_work"),
            "time_cv_mape": self.energy.time.cv_mape,
        }
        out.update({f"psi_{strategy}": value for strategy, value in self.psi.items()})
        for name, fit in self.energy.forms.items():
            out[f"cv_mape_{name}"] = fit.cv_mape
            out[f"cv_mape_se_{name}"] = fit.cv_se
            out[f"adj_r2_{name}"] = fit.adj_r2
            out[f"rmse_log_{name}"] = fit.rmse_log
        for strategy, fit in self.speedup.items():
            for key, value in fit.law.params.items():
                out[f"speedup_{strategy}_{key}"] = value
            if strategy != "single":
                out[f"speedup_{strategy}_rmse"] = fit.law.rmse
                out[f"speedup_{strategy}_n_points"] = float(fit.law.n_points)
        return out

    def report(self) -> str:
        """Human-readable summary of this hardware's fit."""
        m = self.metrics()
        lines = [
            f"hardware: {self.hardware} (energy: {self.energy_source}), {len(self.frame)} runs, "
            f"{int(m['n_workloads'])} workloads, {int(m['n_eta_from_law'])} with eta from the speedup law",
        ]
        if self.dropped:
            lines.append("dropped: " + ", ".join(f"{n} {r}" for r, n in self.dropped.items()))
        lines.append("speedup laws:")
        lines += [f"  {fit.describe()}" for s, fit in self.speedup.items() if s != "single"]
        lines.append("energy laws (grouped CV by workload):")
        for name, fit in self.energy.forms.items():
            mark = "  <- registered" if name == self.energy.chosen else ""
            lines.append(
                f"  {name:16s} adj_R2 {fit.adj_r2:.4f}  rmse_log {fit.rmse_log:.4f}  "
                f"cv_mape {fit.cv_mape:.3g}% (se {fit.cv_se:.2g}){mark}"
            )
        change = "below" if m["rmse_reduction"] >= 0 else "above"
        lines.append(
            f"paper's law: alpha_c {m['alpha_c']:.3f}, alpha_m {m['alpha_m']:.3f}, alpha_eta {m['alpha_eta']:.3f}, "
            f"log_kappa {m['log_kappa']:.3f}; log rmse {abs(m['rmse_reduction']):.1f}% {change} the baseline's"
        )
        r = self.energy.roofline
        lines.append(
            f"additive roofline ({r.scope} runs): {r.eps_comp:.3e} J/FLOP, {r.eps_mem:.3e} J/element, "
            f"{r.e0:.3g} J fixed; mape {r.mape:.1f}%"
        )
        lines.append(
            f"time law: log_t1 = {m['time_log_tau']:.3f} + {m['time_beta_c']:.3f} log_C + {m['time_beta_m']:.3f} log_M "
            f"(cv_mape {m['time_cv_mape']:.3g}%)"
        )
        lines += [f"note: {n}" for n in self.energy.notes]
        return "\n".join(lines)


@dataclasses.dataclass
class FitOutcome:
    """The result of :func:`run_fit`: the pull and one fit per hardware."""

    run_data: RunData
    fits: list[HardwareFit]
    parent_run_id: str | None = None
    hardware_comparison: dict[str, float] = dataclasses.field(default_factory=dict)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)
    """Hardware that could not be fitted (only when there are several), with the reason."""
    timings_s: dict[str, float] = dataclasses.field(default_factory=dict)
    """Wall seconds of each phase: ``pull``, ``fit`` (all laws and CV), ``log`` (run, artifacts, model, registry)."""


def select_energy_sources(frame: pd.DataFrame, hardware: str, allow_estimate: bool) -> tuple[pd.DataFrame, dict[str, int]]:
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
    return frame[~is_estimate], {"with estimated energy (not mixed with measured; --allow-estimate mixes them)": int(is_estimate.sum())}


def fit_hardware(
    frame: pd.DataFrame, hardware: str, *, allow_estimate: bool = False, missing_baseline: str = "law", seed: int = 0
) -> HardwareFit:
    """Every fit of one hardware's runs (no MLflow logging)."""
    if missing_baseline not in MISSING_BASELINE_CHOICES:
        raise ConfigError("missing_baseline", f"must be one of {', '.join(MISSING_BASELINE_CHOICES)}, got {missing_baseline!r}")
    frame, dropped = select_energy_sources(frame, hardware, allow_estimate)
    measured = measure_speedup(frame)
    speedup = fit_speedup_laws(measured)
    if "single" not in speedup:
        raise RooflineError(
            f"runs: no single-device run (strategy single) on {hardware!r}: speedup, efficiency and the "
            "time law need them as baselines; add strategy single to the sweep"
        )
    # Runs without a single-device baseline: eta from the speedup laws, or (no laws) dropped.
    used, n_no_base = fill_from_laws(measured, {} if missing_baseline == "drop" else laws_of(speedup))
    if n_no_base:
        dropped["without a single-device baseline" + (" or a speedup law" if missing_baseline == "law" else "")] = n_no_base
    data = scaling.feature_frame(used)
    energy = scaling.fit_energy_laws(data, seed=seed)
    sources = "+".join(sorted(used["energy_source"].unique()))
    law = FittedLaw(
        hardware=hardware,
        energy_source=sources,
        form=energy.chosen,
        energy_law=energy.forms[energy.chosen].law,
        time_law=energy.time.law,
        speedup_laws=laws_of(speedup),
        ranges=scaling.law_ranges(used, data),
        n_runs=len(used),
        cv_mape=energy.forms[energy.chosen].cv_mape,
    )
    return HardwareFit(hardware, sources, used, data, speedup, energy, law, dropped)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "hardware"


def _write_artifacts(fit: HardwareFit, directory: Path, run_data: RunData) -> None:
    """Summaries, coefficient table, law JSON, speedup laws, report and plots into ``directory``."""
    (directory / "summaries").mkdir()
    for name, text in scaling.summaries({**fit.energy.forms, "time": fit.energy.time}).items():
        (directory / "summaries" / f"{name}.txt").write_text(f"formula: {({**fit.energy.forms, 'time': fit.energy.time})[name].formula}\n\n{text}\n")
    table = pd.concat(
        [f.coefficient_table() for f in [*fit.energy.forms.values(), fit.energy.time]], ignore_index=True
    )
    table.to_csv(directory / "coefficients.csv", index=False)
    roofline = dataclasses.asdict(fit.energy.roofline)
    (directory / "additive_roofline.json").write_text(json.dumps(roofline, indent=2))
    (directory / "speedup_laws.json").write_text(
        json.dumps({s: {**f.law.to_dict(), "fixed": f.fixed} for s, f in fit.speedup.items()}, indent=2)
    )
    (directory / "fitted_law.json").write_text(fit.law.to_json())
    (directory / "fit_report.txt").write_text(run_data.summary() + "\n" + fit.report() + "\n")
    (directory / "dropped_runs.json").write_text(
        json.dumps({"pull": run_data.dropped, "hardware": fit.dropped, "n_found": run_data.n_found}, indent=2)
    )


def _log_fit_run(
    fit: HardwareFit,
    run_data: RunData,
    params: dict[str, str],
    model_name: str,
    aliases: Sequence[str],
    register: bool,
) -> None:
    """Log metrics, params, tags, artifacts and the model into the active run; register it."""
    from mlflow_roofline.serve.pyfunc_model import log_law_model

    run = mlflow.active_run()
    assert run is not None
    fit.run_id = run.info.run_id
    mlflow.set_tags(
        {
            TAG_RUN_TYPE: "fit",
            TAG_HARDWARE: fit.hardware,
            TAG_ENERGY_SOURCE: fit.energy_source,
            TAG_FORM: fit.energy.chosen,
        }
    )
    mlflow.log_params({**params, "hardware": fit.hardware, "form": fit.energy.chosen,
                       "formula": fit.energy.forms[fit.energy.chosen].formula})
    mlflow.log_metrics(
        {**{k: float(v) for k, v in fit.metrics().items()},
         "n_runs_found": float(run_data.n_found), "n_runs_dropped_pull": float(sum(run_data.dropped.values()))}
    )
    with tempfile.TemporaryDirectory() as tmp:
        _write_artifacts(fit, Path(tmp), run_data)
        mlflow.log_artifacts(tmp)
    from mlflow_roofline.fit.run_page import log_run_page  # plots, table and the Markdown description

    log_run_page(fit, run_data.n_found)
    info = log_law_model(fit.law, name="model")
    if not register:
        return
    client = MlflowClient()
    version = mlflow.register_model(
        info.model_uri,
        model_name,
        tags={
            TAG_FIT_RUN_ID: fit.run_id,
            TAG_CV_MAPE: f"{fit.law.cv_mape:.4g}",
            TAG_HARDWARE: fit.hardware,
            TAG_ENERGY_SOURCE: fit.energy_source,
            TAG_FORM: fit.energy.chosen,
        },
    )
    fit.model_version = str(version.version)
    client.update_model_version(
        model_name,
        version.version,
        description=(
            f"Energy law '{fit.energy.chosen}' for {fit.hardware} ({fit.energy_source} energy), "
            f"{fit.law.n_runs} runs, grouped-CV MAPE {fit.law.cv_mape:.2f}%. Fit run {fit.run_id}."
        ),
    )
    for alias in aliases:
        client.set_registered_model_alias(model_name, alias, version.version)
    fit.aliases = list(aliases)


def run_fit(
    experiments: Sequence[str],
    *,
    model_name: str,
    alias: str,
    allow_estimate: bool = False,
    hardware: str | None = None,
    missing_baseline: str = "law",
    register: bool = True,
    seed: int = 0,
    echo: Callable[[str], Any] = print,
) -> FitOutcome:
    """Run the whole fit job (see the module docstring); returns what was fitted and logged.

    Raises:
        RooflineError: with one line saying what is wrong and what to do.
    """
    if not experiments:
        raise ConfigError("experiment", "at least one experiment name is needed")
    if register and not model_name:
        raise ConfigError("model_name", "must not be empty")
    if register and not alias:
        raise ConfigError("alias", "must not be empty")
    client = MlflowClient()
    outcome_skipped: dict[str, str] = {}
    clock = time.perf_counter()
    run_data = load_train_runs(client, experiments, hardware)
    timings = {"pull": time.perf_counter() - clock}
    clock = time.perf_counter()
    echo(run_data.summary())
    if run_data.frame.empty:
        raise RooflineError(f"runs: no usable train runs: {run_data.summary()}; fix or rerun those runs")
    fits: list[HardwareFit] = []
    groups = list(run_data.frame.groupby("hardware", sort=True))
    for hw, rows in groups:
        try:
            fits.append(
                fit_hardware(rows.copy(), str(hw), allow_estimate=allow_estimate, missing_baseline=missing_baseline, seed=seed)
            )
        except RooflineError as exc:
            if len(groups) == 1:
                raise
            outcome_skipped[str(hw)] = str(exc)
            echo(f"hardware {hw!r} skipped: {exc}")
    if not fits:
        raise RooflineError(
            "runs: no hardware could be fitted: " + "; ".join(f"{hw}: {why}" for hw, why in outcome_skipped.items())
        )
    fits.sort(key=lambda f: -len(f.frame))
    timings["fit"] = time.perf_counter() - clock
    clock = time.perf_counter()
    params = {
        "experiments": ",".join(experiments),
        "allow_estimate": str(bool(allow_estimate)).lower(),
        "missing_baseline": missing_baseline,
        "model_name": model_name if register else "",
        "alias": alias if register else "",
        "cv_folds": str(scaling.CV_FOLDS),
        "seed": str(seed),
    }
    experiment_id = run_data.experiment_ids[0]  # the fit run goes to the first experiment
    env_run = os.environ.get("MLFLOW_RUN_ID")
    outcome = FitOutcome(run_data=run_data, fits=fits, timings_s=timings, skipped=outcome_skipped)
    start = dict(run_id=env_run) if env_run else dict(experiment_id=experiment_id, run_name="fit")
    if len(groups) == 1:
        with mlflow.start_run(**start):
            _log_fit_run(fits[0], run_data, params, model_name, [alias], register)
    else:
        pooled = pd.concat([f.data for f in fits], ignore_index=True)
        pooled["strategy"] = pd.Categorical(pooled["strategy"].astype(str), categories=present_strategies(pooled["strategy"]))
        outcome.hardware_comparison = scaling.compare_hardware_slopes(pooled, seed=seed) if len(fits) > 1 else {}
        with mlflow.start_run(**start) as parent:
            outcome.parent_run_id = parent.info.run_id
            mlflow.set_tags({TAG_RUN_TYPE: "fit", TAG_HARDWARE: ",".join(f.hardware for f in fits)})
            mlflow.log_params(params)
            if outcome.skipped:
                mlflow.log_dict(outcome.skipped, "skipped_hardware.json")
            mlflow.log_metrics(
                {"n_runs": float(sum(len(f.frame) for f in fits)), "n_hardware": float(len(fits)),
                 "n_hardware_skipped": float(len(outcome.skipped)),
                 **{f"cv_mape_pooled_{k}": v for k, v in outcome.hardware_comparison.items()}}
            )
            for i, fit in enumerate(fits):
                aliases = [f"{alias}-{_slug(fit.hardware)}"] + ([alias] if i == 0 else [])
                with mlflow.start_run(experiment_id=parent.info.experiment_id, run_name=f"fit-{_slug(fit.hardware)}", nested=True):
                    _log_fit_run(fit, run_data, params, model_name, aliases, register)
    timings["log"] = time.perf_counter() - clock
    for fit in fits:
        echo(fit.report())
        where = f"registered {model_name} version {fit.model_version} as @{', @'.join(fit.aliases)}" if fit.model_version else "not registered"
        echo(f"fit run {fit.run_id}: {where}")
    if outcome.hardware_comparison:
        echo("pooled over hardware, grouped-CV MAPE: " + ", ".join(f"{k} {v:.2f}%" for k, v in outcome.hardware_comparison.items()))
    return outcome
