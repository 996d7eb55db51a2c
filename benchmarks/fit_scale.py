"""How much the whole fit adds to the unavoidable pull of the runs, at 10,000 runs.

Logs N synthetic train runs (mlflow_roofline.testing.synthetic, exact run schema, one
``MlflowClient.log_batch`` per run) into a fresh SQLite store, then times in one process:

  (a) a bare ``mlflow.search_runs`` of the experiment (every run, as pandas): the floor
      any fit pays to read the runs;
  (b) the whole fit: pull, speedup laws, every energy form with grouped CV, plots, the
      fit run with its artifacts, the pyfunc model, registration and alias.

and prints both and the ratio (b)/(a) (target: at most 1.5, goal 1.2), with the phases of (b):
pull, laws and cross-validation, and the logging split into the figures (drawn and logged,
in a thread beside the rest), the baseline tags of the train runs, the pyfunc models, and the
rest (params, metrics, files, table, description, registration). The logging's parts are timed by wrapping the functions
that do them (:data:`TIMED`). (a) and (b) alternate
``--repeat`` times and the minimum of each is compared (a shared machine only ever
slows a run down). ``--keep DIR`` keeps the store, and a later run on it reuses the runs.

    python benchmarks/fit_scale.py [--runs 10000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TIMED: dict[str, tuple[str, str]] = {
    "figures": ("mlflow_roofline.fit.report.run_page", "log_figures"),
    "pooled figure": ("mlflow_roofline.fit.fit_runs", "_log_pooled"),
    "baseline tags": ("mlflow_roofline.fit.fit_runs", "tag_baselines"),
    "models": ("mlflow_roofline.fit.fit_runs", "_log_model"),
}
"""The logging's parts: phase -> (module, function) whose wall seconds are summed per fit."""
BESIDE = ("figures",)
"""The parts that run in a thread beside the others (their seconds overlap the logging's)."""
RATIO_TARGET, RATIO_GOAL = 1.5, 1.2


def time_logging_parts() -> dict[str, float]:
    """Wrap each of :data:`TIMED` to add its wall seconds to the returned dict (reset it before each fit)."""
    import functools
    import importlib

    seconds: dict[str, float] = dict.fromkeys(TIMED, 0.0)
    for phase, (module_name, name) in TIMED.items():
        module = importlib.import_module(module_name)
        original = getattr(module, name)

        def timed(*args, _original=original, _phase=phase, **kwargs):
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                seconds[_phase] += time.perf_counter() - start

        setattr(module, name, functools.wraps(original)(timed))
    return seconds


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000, help="train runs to log (default 10000)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the store in this directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds of (a) then (b) (default 3)")
    return parser.parse_args()


def _store(keep: Path | None) -> Path:
    """The store's directory (tmpfs where there is one: logging 10,000 runs is three SQLite commits each, and
    the timed reads do not depend on where the file lies once it is in the page cache), the process in it."""
    scratch = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    workdir = Path(tempfile.mkdtemp(prefix="fit-scale-", dir=scratch)) if keep is None else keep
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{workdir / 'mlflow.db'}"
    return workdir


def _train_runs(client: Any, uri: str, runs: int, seed: int) -> tuple[str, int]:
    """The benchmark experiment's id and its train runs: a kept store's, else ``runs`` synthetic ones logged."""
    from mlflow_roofline.fit.runs.run_data import load_train_runs
    from mlflow_roofline.testing.synthetic import generate_synthetic_runs, log_runs
    from mlflow_roofline.tracking.client import TrackingClient

    experiment = client.get_experiment_by_name("roofline-bench")
    if experiment is not None:  # a kept store: reuse its runs
        n_runs = len(load_train_runs(TrackingClient(client.tracking_uri), [experiment.experiment_id]).frame)
        print(f"reusing {n_runs} train runs in {uri}", flush=True)
        return experiment.experiment_id, n_runs
    experiment_id = client.create_experiment("roofline-bench")
    # About 7.5 runs per workload (2 single, ddp/fsdp x {2, 4}, tp where h allows): draw
    # a few more workloads than needed and keep the first --runs rows.
    _, frame = generate_synthetic_runs(int(runs / 6.5) + 1, seed=seed)
    frame = frame.iloc[:runs].reset_index(drop=True)
    print(f"logging {len(frame)} synthetic train runs into {uri} ...", flush=True)
    start = time.perf_counter()
    for i in range(0, len(frame), 1000):
        log_runs(client, experiment_id, frame.iloc[i : i + 1000])
        print(f"  {min(i + 1000, len(frame))} runs, {time.perf_counter() - start:.0f} s", flush=True)
    return experiment_id, len(frame)


def _timed_rounds(experiment_id: str, n_runs: int, repeat: int) -> tuple[dict[str, list[float]], list, Any]:
    """(a) a bare ``search_runs`` and (b) the whole fit, alternated ``repeat`` times (the machine may be shared:
    the minimum of each, the least disturbed run, is compared, as timeit does); seconds, phases, last outcome."""
    import mlflow

    from mlflow_roofline.fit.pipeline import run_fit

    samples: dict[str, list[float]] = {"search": [], "pull": [], "fit": []}
    phases: list[dict[str, float]] = []
    parts = time_logging_parts()
    outcome = None
    for _ in range(repeat):
        parts.update(dict.fromkeys(parts, 0.0))
        start = time.perf_counter()
        pulled = mlflow.search_runs(experiment_ids=[experiment_id])
        samples["search"].append(time.perf_counter() - start)
        assert len(pulled) >= n_runs, (len(pulled), n_runs)
        start = time.perf_counter()
        outcome = run_fit([experiment_id], model_name="roofline-bench", alias="champion", echo=lambda _: None)
        samples["fit"].append(time.perf_counter() - start)
        phases.append({**outcome.timings_s, **parts})
        samples["pull"].append(outcome.timings_s["pull"])
    return samples, phases, outcome


def _report(n_runs: int, repeat: int, samples: dict[str, list[float]], phases: list, outcome: Any) -> None:
    fit = outcome.fits[0]
    best = {k: min(v) for k, v in samples.items()}
    fastest = phases[samples["fit"].index(best["fit"])]

    def show(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    metrics = fit.metrics()
    print()
    print(f"runs                                   {n_runs}   (min of {repeat} runs each; all samples in brackets)")
    print(f"(a) bare mlflow.search_runs            {best['search']:8.2f} s  [{show(samples['search'])}]")
    print(f"(b) whole fit incl. logging + registry {best['fit']:8.2f} s  [{show(samples['fit'])}]")
    rest = fastest["log"] - sum(fastest[p] for p in TIMED if p not in BESIDE)
    print(
        f"    fastest (b): pull {fastest['pull']:.2f} s, laws + CV {fastest['fit']:.2f} s, "
        f"logging + model + registry {fastest['log']:.2f} s"
    )
    shown = [f"{p} {fastest[p]:.2f} s" + (" (in a thread, beside the rest)" if p in BESIDE else "") for p in TIMED]
    print("      the logging: " + ", ".join(shown) + f", the rest {rest:.2f} s")
    ratio = best["fit"] / best["search"]
    verdict = "met" if ratio <= RATIO_TARGET else "MISSED"
    target = f"(target <= {RATIO_TARGET}: {verdict}; goal {RATIO_GOAL})"
    print(f"ratio (b)/(a)                          {ratio:8.2f}   {target}")
    print(
        f"fit: form {fit.energy.chosen}, alpha_c {metrics['alpha_c']:.3f}, alpha_m {metrics['alpha_m']:.3f}, "
        f"alpha_eta {metrics['alpha_eta']:.3f}, cv_mape {metrics['cv_mape']:.2f}%, model version {fit.model_version}"
    )


def main() -> int:
    args = _parse()
    workdir = _store(args.keep)
    uri = os.environ["MLFLOW_TRACKING_URI"]

    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(uri)
    experiment_id, n_runs = _train_runs(MlflowClient(), uri, args.runs, args.seed)
    samples, phases, outcome = _timed_rounds(experiment_id, n_runs, args.repeat)
    _report(n_runs, args.repeat, samples, phases, outcome)
    if args.keep is None:
        os.chdir(tempfile.gettempdir())
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
