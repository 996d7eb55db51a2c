"""What MLflow's system-metrics sampling costs a train run's energy window.

Paired and interleaved in one session: each pair runs the same configuration through
``mlflow-roofline train`` once with system metrics (the default) and once with
``--no-system-metrics``, in alternating order (so drift in machine load hits both
arms alike), against one SQLite store. Per pair it takes the ratio on/off of the run's
measured window ``time_s`` and of its ``energy_j``; it prints the geometric mean ratio
with a 95 % t interval over the pairs (on log ratios), and how many system-metric
samples the runs logged. A ratio whose interval holds 1.0 is no measurable overhead.

    python benchmarks/system_metrics_overhead.py [--pairs 8] [--num-steps 150]
        [--strategy single] [--num-devices 1] [--device cpu] [--meter auto] [--interval-s 2]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SHAPE = {"num_layers": 2, "hidden_size": 64, "num_heads": 2, "ffn_size": 256, "seq_len": 32, "batch_size": 8}


def one_run(args: argparse.Namespace, env: dict[str, str], on: bool) -> tuple[float, float | None, str, int]:
    """``time_s`` (s), ``energy_j`` (J or None), the energy source and the system-metric samples of one run."""
    from mlflow.tracking import MlflowClient

    command = [
        sys.executable,
        "-m",
        "mlflow_roofline.cli",
        "train",
        "--experiment",
        "sysm-overhead",
        "--strategy",
        args.strategy,
        "--num-devices",
        str(args.num_devices),
        "--device",
        args.device,
        "--num-steps",
        str(args.num_steps),
        "--warmup-steps",
        "3",
        "--meter",
        args.meter,
        "--system-metrics" if on else "--no-system-metrics",
    ]
    for key, value in SHAPE.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = MlflowClient()
    experiment_id = client.get_experiment_by_name("sysm-overhead").experiment_id
    [run] = client.search_runs([experiment_id], order_by=["attributes.start_time DESC"], max_results=1)
    samples = len(client.get_metric_history(run.info.run_id, "system/cpu_utilization_percentage"))
    source = run.data.tags.get("roofline.energy_source", "none")
    return run.data.metrics["time_s"], run.data.metrics.get("energy_j"), source, samples


def ratio_ci(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of ``ratios`` and its 95 % t interval (computed on their logs)."""
    from scipy import stats

    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), float("nan"), float("nan")
    half = float(stats.t.ppf(0.975, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=150)
    parser.add_argument("--strategy", default="single")
    parser.add_argument("--num-devices", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--meter", default="auto")
    parser.add_argument(
        "--interval-s",
        type=float,
        default=None,
        help="sampling interval (MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL); default: the train run's",
    )
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="sysm-overhead-"))
    os.chdir(workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_TRACKING_URI"] = os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{workdir / 'mlflow.db'}"
    env.setdefault("OMP_NUM_THREADS", "1")
    if args.interval_s is not None:
        env["MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL"] = str(args.interval_s)
    from mlflow.tracking import MlflowClient

    MlflowClient().create_experiment("sysm-overhead")  # the store exists, as in a sweep
    one_run(args, env, True)  # warm the page cache and the store; not counted

    time_ratios, energy_ratios, samples, sources = [], [], [], set()
    for pair in range(args.pairs):
        results = {}
        for on in (True, False) if pair % 2 == 0 else (False, True):
            results[on] = one_run(args, env, on)
        (t_on, e_on, s_on, n_on), (t_off, e_off, s_off, _) = results[True], results[False]
        time_ratios.append(t_on / t_off)
        if e_on and e_off:
            energy_ratios.append(e_on / e_off)
        samples.append(n_on)
        sources |= {s_on, s_off}
        print(
            f"pair {pair + 1}: time_s on {t_on:.3f} off {t_off:.3f}; energy_j on {e_on} off {e_off}; {n_on} samples",
            flush=True,
        )

    print(
        f"configuration: {SHAPE} steps={args.num_steps} {args.strategy} x{args.num_devices} on {args.device}, "
        f"energy {'/'.join(sorted(sources))}, cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f}, "
        f"sampling interval {args.interval_s or 'default'} s, median {statistics.median(samples)} samples per run"
    )
    g, lo, hi = ratio_ci(time_ratios)
    print(f"time_s   with / without system metrics: {g:.4f}  (95% CI {lo:.4f} .. {hi:.4f}, {len(time_ratios)} pairs)")
    if energy_ratios:
        g, lo, hi = ratio_ci(energy_ratios)
        print(
            f"energy_j with / without system metrics: {g:.4f}  (95% CI {lo:.4f} .. {hi:.4f}, "
            f"{len(energy_ratios)} pairs)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
