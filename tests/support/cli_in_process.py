"""``mlflow-roofline ARGS`` run in the test's own process, answered as a child process's would be.

A child process pays the Python, MLflow and click imports again (2-3 CPU-seconds each); a test
that only reads the exit code and the output of a command that refuses its input or plans a
dry run gets the same from :func:`mlflow_roofline.cli.main` called here. Every command keeps at
least one test through the real console script or ``python -m mlflow_roofline.cli``.
"""

from __future__ import annotations

import subprocess

from click.testing import CliRunner

from mlflow_roofline.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``mlflow-roofline ARGS`` through :func:`main` with stdin empty and stdout/stderr captured apart.

    Returns what :func:`subprocess.run` with ``capture_output=True, text=True`` would: the exit
    status (``main`` returning is 0, ``SystemExit`` carries it) and the two streams as text.
    MLflow's log lines and progress bars write to ``sys.stderr`` when they are emitted, so they
    land in ``stderr`` as they would from a child.
    """
    with CliRunner().isolation() as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int | None):  # as the interpreter does with sys.exit("message")
                err.write(f"{exc.code}\n".encode())
    return subprocess.CompletedProcess(
        ["mlflow-roofline", *args], code, out.getvalue().decode(), err.getvalue().decode()
    )
