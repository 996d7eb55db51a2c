"""``mlflow-roofline ARGS`` run in the test's own process, answered as a child process's would be.

A child process pays the Python, MLflow and click imports again (2-3 CPU-seconds each), and a
sweep's child its warm server's torch and transformers imports (7 more); a test that reads the
exit code, the output and the store of a command gets the same from
:func:`mlflow_roofline.cli.main` called here, and in-process sweeps fork their ranks from this
process's one warm server. What only a process can show (a signal, a kill, file modes dropped
before exec, two sweeps at once) stays a child process, and every command keeps at least one
test through the real console script or ``python -m mlflow_roofline.cli``.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import warnings
from collections.abc import Iterator

from click.testing import CliRunner

from mlflow_roofline.cli import main

FRESH_INTERPRETER_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, None),
    ("ignore", PendingDeprecationWarning, None),
    ("ignore", ImportWarning, None),
    ("ignore", ResourceWarning, None),
)
"""CPython's warning filters at start-up (``python -W`` and ``PYTHONWARNINGS`` unset), in the order they are checked."""


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``mlflow-roofline ARGS`` through :func:`main` with stdin empty and stdout/stderr captured apart.

    Returns what :func:`subprocess.run` with ``capture_output=True, text=True`` would: the exit
    status (``main`` returning is 0, ``SystemExit`` carries it) and the two streams as text.
    MLflow's log lines and progress bars write to ``sys.stderr`` when they are emitted, and
    warnings and other libraries' log records reach it as in a fresh interpreter
    (:func:`_as_in_a_fresh_interpreter`), so they land in ``stderr`` as they would from a child.
    """
    with CliRunner().isolation() as (out, err, _), _as_in_a_fresh_interpreter():
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


@contextlib.contextmanager
def _as_in_a_fresh_interpreter() -> Iterator[None]:
    """Warnings and root log records go to ``sys.stderr`` as in a new process, not to pytest's capture.

    pytest records warnings and holds the root logger's handlers for its report; a child
    process has neither: a warning prints once per place under CPython's start-up filters, and
    a WARNING or worse record of a logger no one configured is printed by logging's last-resort
    handler. Both write to the ``sys.stderr`` of the moment, the captured one here.
    """
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers, root.level = [], logging.WARNING
    try:
        with warnings.catch_warnings():  # also forgets which warnings this process has shown
            warnings.resetwarnings()
            for action, category, module in reversed(FRESH_INTERPRETER_FILTERS):
                warnings.filterwarnings(action, category=category, module=module or "")
            warnings.showwarning = _print_warning
            yield
    finally:
        root.handlers, root.level = handlers, level


def _print_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    """What the interpreter's own ``warnings.showwarning`` prints, to the ``sys.stderr`` of the moment."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
