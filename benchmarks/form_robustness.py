"""Every energy-law form scored on generators of different physics, and the worst of them per form.

Forms chosen on one generator are shaped to it (issue 35). This scores each form of the fit
(:func:`fit.forms.energy_laws.fit_energy_laws`, per GPU, no MLflow) on each generator of
:data:`GENERATORS`, none in the law's own form:

- ``weak_fleet``: :mod:`mlflow_roofline.testing.weak_fleet` (MFU rising hyperbolically with width
  and tokens, a power-mean of compute and memory, partial comm overlap, power linear in use);
- ``throttled_tiles``: :mod:`mlflow_roofline.testing.throttled_tiles` (tile and wave
  quantisation, serial kernels, no comm overlap, a power cap with clock throttling, Student-t noise);
- ``overlap_drift``: :mod:`mlflow_roofline.testing.overlap_drift` (saturating MFU knee, full
  overlap, power sub-linear in use, per-workload offsets and drifting energy);
- ``mixed_arch``: :mod:`mlflow_roofline.testing.mixed_arch` (encoders, decoders, LoRA, checkpointing);
- ``throttled_tiles+kinds`` and ``overlap_drift+kinds``: those two machines on mixed kinds.

Per generator and form: grouped-CV MAPE (%, folds by workload) and bigger-models MAPE (%, fitted
on the smaller 75 % of runs by L*d^2, predicting the rest: :mod:`fit.forms.extrapolation`), the
mean over GPUs and seeds; then per form the WORST over the generators where it is a candidate
(the complete-proxy forms only where runs mix kinds), with that count; and the form the fit's
rule registered, with its figures (``averaged``: the 1-SE pick averaged in logs with the one or two
forms whose mean scores best beside it, :mod:`fit.forms.averaging`). With two seeds or more, selection
rules of one form (:data:`RULES`) are replayed: each picks a form from one dataset's scores, and the pick is read on
the next seed's dataset (same GPU, other workloads), so a rule is not flattered by the errors it
chose on; the worst generator decides. Then, per generator, the bigger-models MAPE of the 1-SE
rule's one form beside that of the registered law (the pick's mean with its partners, where one scores
better), on the held-out runs they were chosen on and, with two seeds or more, read on the next seed's runs (the
same forms by name, averaged there). The leave-one-GPU-out MAPE of the pooled forms
is left to ``fleet_loho.py``.

``--coverage`` (only): on the mixed-kind generators, the bigger-models MAPE (%) and the share (%)
of held-out runs inside the 95 % prediction interval of ``roofline_complete`` and ``complete``; then
the same two figures of the law the fit's rule registers, on every generator (``--generators``).

    python benchmarks/form_robustness.py [--workloads 12] [--seeds 1] [--gpus "A100 SXM4 80GB" T4]
        [--generators weak_fleet throttled_tiles ...] [--coverage]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import time
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from mlflow_roofline.fit.forms.averaging import AVERAGED
from mlflow_roofline.fit.forms.energy_laws import EnergyFits
from mlflow_roofline.fit.forms.fitted_form import FittedForm
from mlflow_roofline.fit.forms.selection import choose_form, score

KIND_GPU = "A100 SXM4 80GB"
"""The GPU the mixed-kind generators run on (mixed_arch's)."""
DEFAULT_GPUS: tuple[str, ...] = ("A100 SXM4 80GB", "T4")

Generator = Callable[[int, int, Sequence[str]], pd.DataFrame]


def _weak_fleet(workloads: int, seed: int, gpus: Sequence[str]) -> pd.DataFrame:
    from mlflow_roofline.testing.weak_fleet import generate_weak_fleet_runs

    return generate_weak_fleet_runs(workloads, gpus=gpus, seed=seed)


def _throttled(kinds: bool) -> Generator:
    def generate(workloads: int, seed: int, gpus: Sequence[str]) -> pd.DataFrame:
        from mlflow_roofline.testing.throttled_tiles import generate_throttled_runs

        return generate_throttled_runs(workloads, gpus=(KIND_GPU,) if kinds else gpus, kinds=kinds, seed=seed)

    return generate


def _overlap(kinds: bool) -> Generator:
    def generate(workloads: int, seed: int, gpus: Sequence[str]) -> pd.DataFrame:
        from mlflow_roofline.testing.overlap_drift import generate_overlap_drift_runs

        return generate_overlap_drift_runs(workloads, gpus=(KIND_GPU,) if kinds else gpus, kinds=kinds, seed=seed)

    return generate


def _mixed_arch(workloads: int, seed: int, gpus: Sequence[str]) -> pd.DataFrame:
    from mlflow_roofline.testing.mixed_arch import generate_mixed_arch_runs

    return generate_mixed_arch_runs(workloads, seed=seed)


GENERATORS: dict[str, Generator] = {
    "weak_fleet": _weak_fleet,
    "throttled_tiles": _throttled(False),
    "overlap_drift": _overlap(False),
    "mixed_arch": _mixed_arch,
    "throttled_tiles+kinds": _throttled(True),
    "overlap_drift+kinds": _overlap(True),
}


@dataclasses.dataclass(kw_only=True, frozen=True)
class Scored(FittedForm):
    """A form's held-out errors (%) and its coefficient count, all a selection rule reads."""

    params: int

    @property
    def n_params(self) -> int:
        return self.params


@dataclasses.dataclass(frozen=True)
class GeneratorScores:
    """One generator's figures: per form the (cv, extrap) MAPE (%) of each GPU and seed, the rule's
    choices, and every fit's scored forms by (GPU, seed) for replaying other rules."""

    name: str
    per_form: dict[str, list[tuple[float, float]]]
    chosen: list[tuple[str, float, float]]
    runs: int
    seconds: float
    fits: dict[tuple[str, int], dict[str, Scored]]
    held_out: dict[tuple[str, int], HeldOut]


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """One fit's bigger-models check: the 1-SE rule's pick of one form (:func:`fit.forms.selection.choose_form`),
    the forms the registered law is made of (:attr:`fit.forms.energy_laws.EnergyFits.registered_forms`: the
    pick, or its mean with its partners), each form's predicted log E of the held-out runs and theirs."""

    pick: str
    registered: list[str]
    predicted: dict[str, np.ndarray]
    actual: np.ndarray

    def mape(self, forms: Sequence[str]) -> float:
        """Bigger-models MAPE (%) of the mean log prediction of ``forms`` (one form: its own)."""
        mean = np.mean([self.predicted[name] for name in forms], axis=0)
        return 100.0 * float(np.mean(np.abs(np.exp(mean - self.actual) - 1.0)))


def score_generator(name: str, workloads: int, seeds: int, gpus: Sequence[str]) -> GeneratorScores:
    """Fit every form on each GPU's runs of ``seeds`` datasets of generator ``name``."""
    from mlflow_roofline.fit.forms.energy_laws import fit_energy_laws
    from mlflow_roofline.fit.runs.feature_frame import feature_frame

    start = time.perf_counter()
    per_form: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    chosen: list[tuple[str, float, float]] = []
    scored: dict[tuple[str, int], dict[str, Scored]] = {}
    held_out: dict[tuple[str, int], HeldOut] = {}
    runs = 0
    for seed in range(seeds):
        frame = GENERATORS[name](workloads, seed, gpus)
        runs += len(frame)
        for hw, rows in frame.groupby("hardware", sort=False):
            data = feature_frame(rows.reset_index(drop=True))
            fits = fit_energy_laws(data, seed=seed)
            for form, fit in fits.forms.items():
                per_form[form].append((float(fit.cv_mape), float(fit.extrap_mape)))
            pick = fits.forms[fits.chosen]
            chosen.append((fits.chosen, float(pick.cv_mape), float(pick.extrap_mape)))
            scored[(str(hw), seed)] = {n: _scored(f) for n, f in fits.forms.items() if n != AVERAGED}
            if fits.extrapolation is not None:
                held_out[(str(hw), seed)] = _held_out(fits, data)
    return GeneratorScores(name, dict(per_form), chosen, runs, time.perf_counter() - start, scored, held_out)


def _held_out(fits: EnergyFits, data: pd.DataFrame) -> HeldOut:
    """The bigger-models check of ``fits`` as :class:`HeldOut` (its held-out runs' measured log E)."""
    assert fits.extrapolation is not None
    actual = data.loc[fits.extrapolation.held_out, "log_E"].to_numpy(dtype=float)
    single = {name: fit for name, fit in fits.forms.items() if name != AVERAGED}
    return HeldOut(choose_form(single), fits.registered_forms, dict(fits.extrapolation.predicted), actual)


def pick_against_registered(result: GeneratorScores) -> tuple[float, float, float, float]:
    """Bigger-models MAPE (%) of the 1-SE rule's one form and of the registered law (the pick, or its mean with its
    partners), on the held-out runs they were chosen on; then both (forms by name) read on the next seed's runs of
    the same GPU (NaN with one seed)."""
    same = [(h.mape([h.pick]), h.mape(h.registered)) for h in result.held_out.values()]
    seeds = sorted({seed for _, seed in result.held_out})
    replayed = []
    for (hw, seed), picked in result.held_out.items():
        other = result.held_out.get((hw, seeds[(seeds.index(seed) + 1) % len(seeds)]))
        names = [picked.pick, *picked.registered]
        if len(seeds) > 1 and other is not None and all(n in other.predicted for n in names):
            replayed.append((other.mape([picked.pick]), other.mape(picked.registered)))
    nan = (float("nan"), float("nan"))
    return (*(_mean(same) if same else nan), *(_mean(replayed) if replayed else nan))


def _scored(fit: FittedForm) -> Scored:
    return Scored(
        name=fit.name,
        formula="",
        law=fit.law,
        cv_mape=float(fit.cv_mape),
        cv_se=float(fit.cv_se),
        extrap_mape=float(fit.extrap_mape),
        extrap_se=float(fit.extrap_se),
        params=fit.n_params,
    )


def _mean(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    return float(np.nanmean([p[0] for p in pairs])), float(np.nanmean([p[1] for p in pairs]))


def _cell(pairs: Sequence[tuple[float, float]] | None) -> str:
    """``cv / extrap`` of one generator and form, ``-`` where the form was not a candidate."""
    if pairs is None:
        return "-"
    cv, extrap = _mean(pairs)
    return f"{cv:.1f} / {extrap:.1f}"


def worst_by_form(results: Sequence[GeneratorScores]) -> dict[str, tuple[float, float, str, int]]:
    """Per form: the worst cv and extrap MAPE (%) over the generators where it was scored, the
    generator of the worse score (max of the two), and on how many generators it was scored."""
    worst: dict[str, tuple[float, float, str, int]] = {}
    forms = dict.fromkeys(f for r in results for f in r.per_form)
    for form in forms:
        scored = [(r.name, *_mean(r.per_form[form])) for r in results if form in r.per_form]
        cv, extrap = max(s[1] for s in scored), max(s[2] for s in scored)
        where = max(scored, key=lambda s: max(s[1], s[2]))[0]
        worst[form] = (cv, extrap, where, len(scored))
    return worst


def print_tables(results: Sequence[GeneratorScores], workloads: int, seeds: int, gpus: Sequence[str]) -> None:
    """Per generator (cv / extrap MAPE, %), the worst per form, and the rule's registered forms."""
    names = [r.name for r in results]
    forms = list(dict.fromkeys(f for r in results for f in r.per_form))
    print(f"form robustness: {workloads} workloads, {seeds} seed(s), fleet GPUs {', '.join(gpus)} (kinds: {KIND_GPU})")
    print("cv / extrap MAPE (%), mean over GPUs and seeds; '-' not a candidate there")
    print(f"  {'form':26s} " + " ".join(f"{n[:21]:>21s}" for n in names) + f" {'WORST cv / extrap':>22s}  over")
    worst = worst_by_form(results)
    for form in forms:
        cells = [f"{_cell(r.per_form.get(form)):>21s}" for r in results]
        cv, extrap, where, count = worst[form]
        print(f"  {form:26s} " + " ".join(cells) + f" {cv:10.1f} / {extrap:9.1f}  {count} ({where})")
    print("registered by the fit's rule (count) and its cv / extrap MAPE (%):")
    for r in results:
        counts = collections.Counter(c[0] for c in r.chosen)
        cv, extrap = _mean([(c[1], c[2]) for c in r.chosen])
        picks = ", ".join(f"{k} {v}" for k, v in counts.most_common())
        print(f"  {r.name:26s} {cv:5.1f} / {extrap:5.1f}  [{picks}]  ({r.runs} runs, {r.seconds:.0f} s)")
    rule = [_mean([(c[1], c[2]) for c in r.chosen]) for r in results]
    print(f"  {'WORST':26s} {max(p[0] for p in rule):5.1f} / {max(p[1] for p in rule):5.1f}")
    print("bigger models (%): the 1-SE rule's one form -> the registered law (the pick alone, or its mean with the")
    print("  one or two forms that score best beside it), on the runs they were chosen on, and both read on the")
    print("  next seed's runs:")
    rows = {r.name: pick_against_registered(r) for r in results}
    for name, (one, registered, next_one, next_registered) in rows.items():
        same, other = f"{one:5.1f} -> {registered:5.1f}", f"{next_one:5.1f} -> {next_registered:5.1f}"
        print(f"  {name:26s} {same}    next seed {other}")
    worst = [max(v[i] for v in rows.values()) for i in range(4)]
    print(f"  {'WORST':26s} {worst[0]:5.1f} -> {worst[1]:5.1f}    next seed {worst[2]:5.1f} -> {worst[3]:5.1f}")


def _best_score(forms: Mapping[str, FittedForm]) -> str:
    """The form with the lowest score (no standard-error tolerance)."""
    scores = {n: score(f)[0] for n, f in forms.items() if np.isfinite(score(f)[0])}
    return min(scores, key=scores.__getitem__)


def _cv_only(forms: Mapping[str, FittedForm]) -> str:
    """Today's 1-SE rule on the grouped-CV error alone (the extrapolation check ignored)."""
    return choose_form({n: dataclasses.replace(f, extrap_mape=float("nan")) for n, f in forms.items()})


RULES: dict[str, Callable[[Mapping[str, FittedForm]], str]] = {
    "1-SE on max(cv, extrap) (today)": choose_form,
    "lowest max(cv, extrap)": _best_score,
    "1-SE on cv alone": _cv_only,
}
"""Selection rules replayed: each picks a form from one dataset's scores."""


def replay_rules(results: Sequence[GeneratorScores]) -> dict[str, dict[str, tuple[float, float]]]:
    """Per rule and generator: the mean (cv, extrap) MAPE (%) its pick reaches on ANOTHER dataset
    (same GPU, the next seed): the pick is read off independent runs, not the ones it was chosen on."""
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for rule, pick in RULES.items():
        table[rule] = {}
        for r in results:
            seeds = sorted({s for _, s in r.fits})
            pairs = []
            for (hw, seed), forms in r.fits.items():
                other = r.fits.get((hw, seeds[(seeds.index(seed) + 1) % len(seeds)]), {})
                chosen = pick(forms)
                if chosen in other and len(seeds) > 1:
                    pairs.append((other[chosen].cv_mape, other[chosen].extrap_mape))
            table[rule][r.name] = _mean(pairs) if pairs else (float("nan"), float("nan"))
    return table


def print_rules(results: Sequence[GeneratorScores]) -> None:
    """The replayed rules per generator and their worst (needs two seeds or more)."""
    table = replay_rules(results)
    print("selection rules, the pick's cv / extrap MAPE (%) read on the next seed's runs (same GPU):")
    print(f"  {'rule':34s} " + " ".join(f"{r.name[:21]:>21s}" for r in results) + f" {'WORST':>15s}")
    for rule, by_generator in table.items():
        cells = " ".join(f"{f'{cv:.1f} / {ex:.1f}':>21s}" for cv, ex in by_generator.values())
        worst_cv = max(p[0] for p in by_generator.values())
        worst_ex = max(p[1] for p in by_generator.values())
        print(f"  {rule:34s} {cells} {f'{worst_cv:.1f} / {worst_ex:.1f}':>15s}")


KIND_GENERATORS: tuple[str, ...] = ("mixed_arch", "throttled_tiles+kinds", "overlap_drift+kinds")


def _coverage_one(data: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """(bigger-models MAPE %, % inside the 95 % interval) of roofline_complete and complete on one dataset."""
    import statsmodels.formula.api as smf

    from mlflow_roofline.fit.forms.catalog import COMPLETE, formula_of
    from mlflow_roofline.fit.forms.extrapolation import held_out_mask
    from mlflow_roofline.fit.forms.roofline_complete import ROOFLINE_COMPLETE, fit_roofline_complete

    split = held_out_mask(data)
    assert split is not None, "too few workloads for the bigger-models split"
    train, test = data[~split[0]], data[split[0]]
    actual = test["log_E"].to_numpy()
    mean, lower, upper = fit_roofline_complete(train).law.predict({c: test[c].to_numpy() for c in test.columns})
    ols = smf.ols(formula_of(COMPLETE, train), train).fit().get_prediction(test).summary_frame(alpha=0.05)
    out = {}
    for name, (m, lo, hi) in {
        ROOFLINE_COMPLETE: (mean, lower, upper),
        COMPLETE: (ols["mean"].to_numpy(), ols["obs_ci_lower"].to_numpy(), ols["obs_ci_upper"].to_numpy()),
    }.items():
        inside = 100.0 * float(np.mean((lo <= actual) & (actual <= hi)))
        out[name] = (100.0 * float(np.mean(np.abs(np.exp(m - actual) - 1.0))), inside)
    return out


def _registered_coverage(data: pd.DataFrame, seed: int) -> tuple[float, float, str]:
    """(bigger-models MAPE %, % inside the 95 % interval, the form) of the law the fit's rule registers on the
    smaller 75 % of ``data`` by L*d^2, asked about the rest."""
    from mlflow_roofline.fit.forms.energy_laws import fit_energy_laws
    from mlflow_roofline.fit.forms.extrapolation import held_out_mask

    split = held_out_mask(data)
    assert split is not None, "too few workloads for the bigger-models split"
    train, test = data[~split[0]].reset_index(drop=True), data[split[0]]
    fits = fit_energy_laws(train, seed=seed)
    mean, lower, upper = fits.forms[fits.chosen].law.predict({c: test[c].to_numpy() for c in test.columns})
    actual = test["log_E"].to_numpy()
    inside = 100.0 * float(np.mean((lower <= actual) & (actual <= upper)))
    return 100.0 * float(np.mean(np.abs(np.exp(mean - actual) - 1.0))), inside, fits.chosen


def print_registered_coverage(workloads: int, seeds: int, gpus: Sequence[str], generators: Sequence[str]) -> None:
    """Bigger-models MAPE and 95 % interval coverage of the registered law, per generator (mean over GPUs, seeds)."""
    from mlflow_roofline.fit.runs.feature_frame import feature_frame

    print("the registered law on the bigger models: MAPE %, inside its 95 % interval %, forms registered")
    for name in generators:
        scores = []
        for seed in range(seeds):
            frame = GENERATORS[name](workloads, seed, gpus)
            for _, rows in frame.groupby("hardware", sort=False):
                scores.append(_registered_coverage(feature_frame(rows.reset_index(drop=True)), seed))
        mape, inside = (float(np.mean([s[i] for s in scores])) for i in (0, 1))
        forms = ", ".join(f"{k} {v}" for k, v in collections.Counter(s[2] for s in scores).most_common())
        print(f"  {name:23s} {mape:6.1f}  {inside:6.0f}  [{forms}]")


def print_coverage(workloads: int, seeds: int) -> None:
    """Bigger-models MAPE and 95 % interval coverage of the complete-proxy forms on the mixed-kind generators."""
    from mlflow_roofline.fit.runs.feature_frame import feature_frame

    print(f"bigger models (fitted on the smaller 75 % by L*d^2), {workloads} workloads, {seeds} seed(s):")
    print("  generator               form                MAPE %  inside 95 % interval, %")
    for name in KIND_GENERATORS:
        per_seed = [_coverage_one(feature_frame(GENERATORS[name](workloads, s, (KIND_GPU,)))) for s in range(seeds)]
        for form in per_seed[0]:
            mape, inside = (float(np.mean([p[form][i] for p in per_seed])) for i in (0, 1))
            print(f"  {name:23s} {form:19s} {mape:6.1f}  {inside:6.0f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=12, help="workloads per dataset (default 12)")
    parser.add_argument("--seeds", type=int, default=1, help="datasets per generator (default 1)")
    parser.add_argument("--gpus", nargs="+", default=list(DEFAULT_GPUS), help="hardware-table GPUs of the fleets")
    parser.add_argument("--generators", nargs="+", default=list(GENERATORS), choices=list(GENERATORS))
    parser.add_argument(
        "--coverage", action="store_true", help="only interval coverage: the complete forms', the registered law's"
    )
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.coverage:
        print_coverage(args.workloads, args.seeds)
        print_registered_coverage(args.workloads, args.seeds, args.gpus, args.generators)
        return 0
    results = [score_generator(name, args.workloads, args.seeds, args.gpus) for name in args.generators]
    print_tables(results, args.workloads, args.seeds, args.gpus)
    if args.seeds > 1:
        print_rules(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
