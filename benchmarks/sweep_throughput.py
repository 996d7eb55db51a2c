"""Throughput of a sweep: wall time against the time spent inside measured windows.

Runs the shipped ``smoke`` spec (or ``--spec``) into a fresh SQLite store through the local
executor twice, side by side: ``--launch warm`` (the default: each job's ranks forked
from one server that imported torch for the whole sweep, each configuration logged from
the sweep's own process) and ``--launch fresh`` (an ``mlflow-roofline train`` process per
configuration, torchrun for two ranks); with ``--ray``, again through the Ray executor (a
local Ray instance, ``--workers-on-this-host``; its workers launch fresh). For each:

- the sweep's wall time, seconds;
- the sum over configurations of their windows: warm-up (``warmup_steps`` x the run's
  median step time, an estimate: the warm-up is not timed on its own) plus the measured
  window ``time_s``;
- the fixed cost per configuration, ``(wall - windows) / configs``, and the same per class
  from each run's start (the sweep creates it just before it measures it) to its end:
  single-process configurations and multi-process (``num_devices`` > 1) ones. For a
  remote executor, which claims runs up front, the start is its train process's
  (``roofline.pid_start``).

Then the ratio of the warm launch's fixed cost to the fresh one's.

Targets (issue 39, the warm launch): <= 0.3 s median fixed cost per single-process configuration,
<= 0.5 s per multi-process one (2026-11-30's figures); printed beside each median.

    python benchmarks/sweep_throughput.py [--spec smoke] [--ray] [--only warm]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = {"single-process": 0.3, "multi-process": 0.5}
"""Issue 39's targets: median fixed cost per run of each class, seconds, with the warm launch."""


def run_sweep(spec: str, store: Path, extra: list[str]) -> float:
    """Wall seconds of ``mlflow-roofline sweep SPEC`` into the SQLite store at ``store``."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}"}
    env.pop("MLFLOW_RUN_ID", None)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mlflow_roofline.cli", "sweep", spec, "--no-progress", *extra],
        env=env,
        cwd=store.parent,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"sweep failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall


def child_costs(store: Path, remote: bool) -> tuple[float, dict[str, list[float]]]:
    """Sum of the children's windows (seconds) and each child's fixed cost (run wall - windows) by class."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    runs = [
        r
        for e in client.search_experiments()
        for r in client.search_runs(
            [e.experiment_id], "tags.`roofline.run_type` = 'train' AND attributes.status = 'FINISHED'", max_results=5000
        )
    ]
    windows_total = 0.0
    fixed: dict[str, list[float]] = {"single-process": [], "multi-process": []}
    for run in runs:
        metrics, params = run.data.metrics, run.data.params
        windows = metrics["time_s"] + int(params["warmup_steps"]) * metrics["step_time_s"]
        windows_total += windows
        # A remote executor claims every run up front, so its start_time includes its time in
        # the queue: count from its train process's start there.
        started = run.info.start_time / 1000.0
        if remote:
            started = float(run.data.tags.get("roofline.pid_start") or 0.0) or started
        run_wall = run.info.end_time / 1000.0 - started
        kind = "multi-process" if int(params["num_devices"]) > 1 else "single-process"
        fixed[kind].append(run_wall - windows)
    return windows_total, fixed


def report(label: str, wall: float, windows: float, fixed: dict[str, list[float]]) -> float:
    """Print one executor's figures; its fixed cost per configuration, seconds."""
    configs = sum(len(v) for v in fixed.values())
    print(
        f"[{label}] {configs} configs: sweep wall {wall:.1f} s, windows {windows:.1f} s, "
        f"fixed cost per config {(wall - windows) / configs:.2f} s"
    )
    for kind, values in fixed.items():
        if values:
            print(
                f"[{label}]   {kind:<15} n={len(values):<3} "
                f"median fixed cost per run {statistics.median(values):.2f} s "
                f"(run wall minus its windows; target <= {TARGET_S[kind]:g} s)"
            )
    return (wall - windows) / configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="smoke")
    parser.add_argument("--ray", action="store_true", help="also through the Ray executor (a local Ray instance)")
    parser.add_argument("--only", choices=["warm", "fresh"], help="run the local executor with this launch only")
    args = parser.parse_args()
    executors = [
        (f"local {launch}", ["--launch", launch]) for launch in ("warm", "fresh") if args.only in (None, launch)
    ]
    if args.ray:
        executors.append(("ray", ["--executor", "ray", "--workers-on-this-host"]))
    costs: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="sweep-throughput-") as tmp:
        for label, extra in executors:
            store = Path(tmp) / label.replace(" ", "-") / "mlflow.db"
            store.parent.mkdir()
            wall = run_sweep(args.spec, store, extra)
            windows, fixed = child_costs(store, remote=label == "ray")
            costs[label] = report(label, wall, windows, fixed)
    if "local warm" in costs and "local fresh" in costs:
        ratio = costs["local warm"] / costs["local fresh"]
        print(f"fixed cost per config, warm / fresh: {ratio:.2f}")


if __name__ == "__main__":
    main()
