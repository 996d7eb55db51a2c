"""Can a command be started, and if not, why, with the shell's exit code.

The shell's convention: 127 when the program (or the interpreter its ``#!`` line names)
is not found, 126 when it is found but cannot be run (not executable, a directory, an
interpreter that is not executable). Checked before anything is started, so that the
caller can refuse in one line.
"""

from __future__ import annotations

import errno
import os
import shutil

from mlflow_roofline.core.errors import RooflineError

EXIT_NOT_FOUND = 127
EXIT_CANNOT_RUN = 126
SHEBANG_READ_BYTES = 256


class NotRunnable(RooflineError):
    """The command cannot be started; :attr:`exit_code` is what a shell would exit with."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def check_runnable(program: str) -> str:
    """The path of the file that runs for ``program`` (a path, or a name looked up on ``PATH``).

    Raises:
        NotRunnable: not found (127), not executable or a directory (126), or its ``#!``
            interpreter missing (127) or not executable (126).
    """
    if "/" in program:
        if not os.path.lexists(program):
            raise NotRunnable(f"COMMAND: {program!r} is not found (no such file)", EXIT_NOT_FOUND)
        return _check_file(program, program)
    found = shutil.which(program)
    if found is not None:
        return _check_file(program, found)
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", program)
        if os.path.isfile(candidate):
            raise NotRunnable(
                f"COMMAND: {program!r} (at {candidate}) is not executable: permission denied",
                EXIT_CANNOT_RUN,
            )
    raise NotRunnable(f"COMMAND: {program!r} is not an executable on PATH", EXIT_NOT_FOUND)


def _check_file(program: str, path: str) -> str:
    if os.path.isdir(path):
        raise NotRunnable(f"COMMAND: {program!r} is a directory", EXIT_CANNOT_RUN)
    if not os.access(path, os.X_OK):
        raise NotRunnable(
            f"COMMAND: {program!r} is not executable: permission denied",
            EXIT_CANNOT_RUN,
        )
    interpreter = shebang_interpreter(path)
    if interpreter is not None:
        if not os.path.exists(interpreter):
            raise NotRunnable(
                f"COMMAND: {program!r}: the interpreter of its #! line, {interpreter!r}, is not found",
                EXIT_NOT_FOUND,
            )
        if os.path.isdir(interpreter) or not os.access(interpreter, os.X_OK):
            raise NotRunnable(
                f"COMMAND: {program!r}: the interpreter of its #! line, {interpreter!r}, is not executable",
                EXIT_CANNOT_RUN,
            )
    return path


def shebang_interpreter(path: str) -> str | None:
    """The interpreter a script's ``#!`` line names (its first word), or ``None`` (no such line)."""
    try:
        with open(path, "rb") as script:
            head = script.read(SHEBANG_READ_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].strip().split()
    return os.fsdecode(words[0]) if words else None


def start_failure(program: str, error: OSError) -> NotRunnable:
    """The error of a start that failed anyway (the file changed after the check)."""
    if error.errno == errno.ENOENT:
        interpreter = shebang_interpreter(program) if os.path.exists(program) else None
        what = f"the interpreter of its #! line, {interpreter!r}, is not found" if interpreter else "not found"
        return NotRunnable(f"COMMAND: cannot start {program!r}: {what}", EXIT_NOT_FOUND)
    return NotRunnable(f"COMMAND: cannot start {program!r}: {error.strerror or error}", EXIT_CANNOT_RUN)
