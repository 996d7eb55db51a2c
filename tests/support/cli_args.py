"""Command-line arguments the CLI tests share: the smallest BERT shape a train command accepts."""

from __future__ import annotations

import sys

TINY_SHAPE: list[str] = [
    "--num-layers",
    "1",
    "--hidden-size",
    "32",
    "--num-heads",
    "2",
    "--ffn-size",
    "64",
    "--seq-len",
    "8",
    "--batch-size",
    "4",
]
"""L=1, d=32, h=2, ff=64, S=8, B=4: a train run of a few milliseconds per step on the CPU."""


def mlflow_run_train(experiment: str, params: dict[str, object]) -> list[str]:
    """``mlflow run . -e train --env-manager local`` into ``experiment``, one ``-P key=value`` per param.

    Run it with the repository root as the working directory.
    """
    command = [sys.executable, "-m", "mlflow", "run", ".", "-e", "train", "--env-manager", "local"]
    command += ["--experiment-name", experiment]
    for key, value in params.items():
        command += ["-P", f"{key}={value}"]
    return command
