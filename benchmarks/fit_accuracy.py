"""Held-out accuracy of every energy-law form: grouped-CV and size-extrapolation MAPE.

Draws runs from two generators, fits every form with the fit's own code (no MLflow)
and prints, per form, the mean over ``--seeds`` seeds of ``cv_mape`` (grouped CV by
workload) and ``extrap_mape`` (fitted on L*d^2 at or below the 75th percentile,
predicting the larger models), both in %, and how often each form was registered:

- ``roofline``: :mod:`mlflow_roofline.testing.roofline_generator` (a roofline machine:
  memory-bound small models, compute-bound large ones, a fixed per-step cost and a
  communication term per strategy);
- ``roofline-time``: the same machine model on its time-bound GPU (nearly flat power, so
  energy follows the step time's max(compute, memory): the smooth roofline's shape);
- ``power-law``: :mod:`mlflow_roofline.testing.synthetic` (the paper's law, exactly).

Then the pooled forms over the three simulated GPUs of
:mod:`mlflow_roofline.testing.hardware_fleet` (roofline generator, their rows in a
temporary hardware table): grouped-CV and size-extrapolation MAPE of every pooled form,
how often it failed a sanity check, the leave-one-hardware-out MAPE (``loho_mape``: each
GPU predicted by the law fitted on the two others, from its table row alone) of the
covariate forms, and how often each won.

    python benchmarks/fit_accuracy.py [--workloads 30] [--seeds 5] [--pooled-only]
"""

from __future__ import annotations

import argparse
import collections
import warnings

import numpy as np


def _fits(generator: str, workloads: int, seed: int):
    from mlflow_roofline.fit.hardware_fit import fit_hardware
    from mlflow_roofline.testing.roofline_generator import TIME_BOUND_GPU, generate_roofline_runs
    from mlflow_roofline.testing.synthetic import generate_synthetic_runs

    if generator == "roofline":
        return fit_hardware(generate_roofline_runs(workloads, seed=seed), "Roofline GPU")
    if generator == "roofline-time":
        return fit_hardware(generate_roofline_runs(workloads, hardware=(TIME_BOUND_GPU,), seed=seed), "Time-bound GPU")
    _, frame = generate_synthetic_runs(workloads, seed=seed)
    return fit_hardware(frame.drop(columns=["speedup", "eta"]), "Synthetic GPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=30, help="workloads per dataset (default 30)")
    parser.add_argument("--seeds", type=int, default=5, help="datasets per generator (default 5)")
    parser.add_argument("--pooled-only", action="store_true", help="only the pooled forms over the fleet")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for generator in () if args.pooled_only else ("roofline", "roofline-time", "power-law"):
        cv: dict[str, list[float]] = collections.defaultdict(list)
        extrap: dict[str, list[float]] = collections.defaultdict(list)
        chosen: collections.Counter[str] = collections.Counter()
        for seed in range(args.seeds):
            fit = _fits(generator, args.workloads, seed)
            chosen[fit.energy.chosen] += 1
            for name, form in fit.energy.forms.items():
                cv[name].append(form.cv_mape)
                extrap[name].append(form.extrap_mape)
        print(f"{generator} generator, {args.workloads} workloads, {args.seeds} seeds (mean over seeds, %):")
        print(f"  {'form':16s} {'cv_mape':>8s} {'extrap_mape':>12s} {'registered':>11s}")
        for name, errors in cv.items():
            print(
                f"  {name:16s} {np.nanmean(errors):8.2f} {np.nanmean(extrap[name]):12.2f} "
                f"{chosen[name]:>7d}/{args.seeds}"
            )
    _pooled(args.workloads, args.seeds)
    return 0


def _pooled(workloads: int, seeds: int) -> None:
    """Print the pooled forms' CV, extrapolation and leave-one-hardware-out errors on the simulated fleet."""
    import tempfile
    from pathlib import Path

    from mlflow_roofline.core.gpu_datasheets import load_hardware_table
    from mlflow_roofline.fit.hardware_fit import fit_hardware
    from mlflow_roofline.fit.pooled import fit_pooled
    from mlflow_roofline.testing.hardware_fleet import FLEET, write_fleet_table
    from mlflow_roofline.testing.roofline_generator import generate_roofline_runs

    with tempfile.TemporaryDirectory() as tmp:
        table = load_hardware_table(write_fleet_table(Path(tmp) / "fleet.csv"), env={})
    cv: dict[str, list[float]] = collections.defaultdict(list)
    extrap: dict[str, list[float]] = collections.defaultdict(list)
    loho: dict[str, list[float]] = collections.defaultdict(list)
    chosen: collections.Counter[str] = collections.Counter()
    insane: collections.Counter[str] = collections.Counter()
    for seed in range(seeds):
        frame = generate_roofline_runs(workloads, hardware=FLEET, seed=seed)
        fits = sorted(
            (fit_hardware(rows.copy(), str(hw)) for hw, rows in frame.groupby("hardware")), key=lambda f: -len(f.frame)
        )
        pooled = fit_pooled(fits, table, seed)
        chosen[pooled.chosen] += 1
        insane.update(pooled.insane)
        for name, form in pooled.forms.items():
            cv[name].append(form.cv_mape)
            extrap[name].append(form.extrap_mape)
            loho[name].append(pooled.loho.get(name, (np.nan, np.nan))[0])
    print(f"pooled over {len(FLEET)} simulated GPUs, {workloads} workloads each, {seeds} seeds (mean over seeds, %):")
    print(f"  {'form':20s} {'cv_mape':>8s} {'extrap_mape':>12s} {'loho_mape':>10s} {'insane':>7s} {'chosen':>7s}")
    for name, errors in cv.items():
        held = f"{np.nanmean(loho[name]):10.2f}" if np.isfinite(loho[name]).any() else f"{'-':>10s}"
        print(
            f"  {name:20s} {np.nanmean(errors):8.2f} {np.nanmean(extrap[name]):12.2f} {held} "
            f"{insane[name]:>3d}/{seeds} {chosen[name]:>3d}/{seeds}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
