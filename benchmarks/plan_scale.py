"""How long planning takes as a grid grows, and how fast a grid past the limit is refused.

Times, in one process, :func:`mlflow_roofline.sweep.plan.expand` on single-strategy grids
of 1,000, 10,000 and 100,000 points (the default limit), and the refusal of a grid of
10^12 points, which must come from its computed size, never from expanding it. Prints
seconds per run and microseconds per grid point side by side (minimum of ``--repeat``
rounds: a shared machine only ever slows a run down).

    python benchmarks/plan_scale.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.sweep.plan import MAX_GRID_POINTS, expand, grid_points
from mlflow_roofline.sweep.spec import SweepSpec, parse_spec


def grid_spec(layers: int, widths: int, seq_lens: int) -> SweepSpec:
    """A single-strategy grid of ``layers * widths * seq_lens`` points, every one runnable."""
    return parse_spec(
        {
            "device": "cpu",
            "num_heads": 2,
            "ffn_ratio": 2,
            "batch_size": 4,
            "grid": {
                "num_layers": list(range(1, layers + 1)),
                "hidden_size": list(range(2, 2 * widths + 2, 2)),
                "seq_len": list(range(1, seq_lens + 1)),
            },
        }
    )


def best_of(repeat: int, work: object) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def refuse(spec: SweepSpec) -> None:
    try:
        expand(spec, "cpu", None)
    except ConfigError:
        return
    raise AssertionError("a grid past the limit was planned")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'grid points':>18}  {'seconds':>9}  {'us/point':>9}")
    for layers, widths, seq_lens in ((10, 10, 10), (10, 100, 10), (100, 100, 10)):
        spec = grid_spec(layers, widths, seq_lens)
        size = grid_points(spec)
        assert size <= MAX_GRID_POINTS
        seconds = best_of(args.repeat, lambda spec=spec: expand(spec, "cpu", "hw"))
        print(f"{size:>18,}  {seconds:>9.3f}  {seconds / size * 1e6:>9.1f}")
    huge = grid_spec(10_000, 10_000, 10_000)
    seconds = best_of(args.repeat, lambda: refuse(huge))
    print(f"{grid_points(huge):>18,}  {seconds:>9.6f}  refused (limit {MAX_GRID_POINTS:,}), nothing expanded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
