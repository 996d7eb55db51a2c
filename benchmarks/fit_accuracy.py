"""Held-out accuracy of every energy-law form: grouped-CV and size-extrapolation MAPE.

Draws runs from two generators, fits every form with the fit's own code (no MLflow)
and prints, per form, the mean over ``--seeds`` seeds of ``cv_mape`` (grouped CV by
workload) and ``extrap_mape`` (fitted on L*d^2 at or below the 75th percentile,
predicting the larger models), both in %, and how often each form was registered:

- ``roofline``: :mod:`mlflow_roofline.testing.roofline_generator` (a roofline machine:
  memory-bound small models, compute-bound large ones, a fixed per-step cost and a
  communication term per strategy);
- ``power-law``: :mod:`mlflow_roofline.testing.synthetic` (the paper's law, exactly).

    python benchmarks/fit_accuracy.py [--workloads 30] [--seeds 5]
"""

from __future__ import annotations

import argparse
import collections
import warnings

import numpy as np


def _fits(generator: str, workloads: int, seed: int):
    from mlflow_roofline.fit.hardware import fit_hardware
    from mlflow_roofline.testing.roofline_generator import generate_roofline_runs
    from mlflow_roofline.testing.synthetic import generate_synthetic_runs

    if generator == "roofline":
        return fit_hardware(generate_roofline_runs(workloads, seed=seed), "Roofline GPU")
    _, frame = generate_synthetic_runs(workloads, seed=seed)
    return fit_hardware(frame.drop(columns=["speedup", "eta"]), "Synthetic GPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=30, help="workloads per dataset (default 30)")
    parser.add_argument("--seeds", type=int, default=5, help="datasets per generator (default 5)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for generator in ("roofline", "power-law"):
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
            print(f"  {name:16s} {np.nanmean(errors):8.2f} {np.nanmean(extrap[name]):12.2f} "
                  f"{chosen[name]:>7d}/{args.seeds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
