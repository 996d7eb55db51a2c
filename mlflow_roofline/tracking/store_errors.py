"""A tracking store that cannot be used, said in one line instead of a page of SQLAlchemy.

MLflow's database store turns a failing statement (a read-only SQLite file, a database
locked by another process past its timeout, a server that went away) into an
``MlflowException`` whose message is SQLAlchemy's whole text (statement, parameters,
links), and logs that text with its traceback first. :func:`store_error_line` finds the
database error behind any exception and says what it means; :func:`quiet_store_logging`
keeps MLflow from printing the page. :func:`patiently` retries a call while the store is
only locked: the bookkeeping of a stopping process (its runs ended KILLED) must outlast a
busy store, since nothing after it will write it.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

STORE_LOGGER = "mlflow.store.db.utils"
_DBAPI_LINE = re.compile(r"\((?:sqlite3|psycopg2?|pymysql|MySQLdb|pyodbc)[\w.]*\)\s*([^\n]+)")
_DB_ERROR_NAMES = ("OperationalError", "DatabaseError")
LOCK_PATIENCE_S = 60.0
"""How long :func:`patiently` keeps retrying a locked store, in seconds. Each try has MLflow's own wait
first: 20 s per statement on SQLite (MLflow 3.17 sets ``busy_timeout`` on every session; an SQLite URI's
``?timeout=SECONDS`` sets the wait only while MLflow opens the store), none where SQLite finds two
writers deadlocked."""

T = TypeVar("T")


def quiet_store_logging() -> None:
    """Drop MLflow's logged copy (with traceback) of a database error; the error is still raised."""
    logger = logging.getLogger(STORE_LOGGER)
    if not any(isinstance(f, _DropDatabaseErrorPage) for f in logger.filters):
        logger.addFilter(_DropDatabaseErrorPage())


class _DropDatabaseErrorPage(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SQLAlchemy database error")


def store_error_line(exc: BaseException, tracking_uri: str) -> str | None:
    """One line for an error of the tracking store behind ``exc``, or ``None`` if it is not one.

    The line names the store (without any password in its URI) and the cause: cannot be
    created (a file stands where its folder must be), cannot be written, locked by another
    process, or the database's own one-line message.
    """
    blocker = _blocking_file(exc, tracking_uri)
    if blocker is not None:
        return f"tracking store {redact(tracking_uri)} cannot be created: {blocker} is a file, not a folder"
    cause = _database_error(exc)
    if cause is None:
        return None
    reason = _reason(cause)
    store = f"tracking store {redact(tracking_uri)}"
    if _says_read_only(reason):
        return f"{store} cannot be written ({reason}): check the file's and its folder's permissions"
    if _says_locked(reason):
        return (
            f"{store} is locked by another process and stayed locked past the wait "
            f"({reason}); retry when it is free (an SQLite URI's ?timeout=SECONDS sets the wait for opening "
            "the store; MLflow waits 20 s for each statement after)"
        )
    return f"{store} failed: {reason}"


def store_locked(exc: BaseException) -> bool:
    """Whether ``exc`` is the store being locked (or busy) by another writer, and nothing worse."""
    cause = _database_error(exc)
    if cause is None:
        return False
    reason = _reason(cause)
    return _says_locked(reason) and not _says_read_only(reason)


def patiently(call: Callable[[], T], patience_s: float = LOCK_PATIENCE_S) -> T:
    """``call()``, again after a pause each time it fails on a locked store, for up to ``patience_s`` seconds.

    Any other error, and the lock still held after ``patience_s``, is raised as it came.
    """
    deadline = time.monotonic() + patience_s
    pause_s = 0.2
    while True:
        try:
            return call()
        except Exception as exc:
            if not store_locked(exc) or time.monotonic() + pause_s > deadline:
                raise
        time.sleep(pause_s)
        pause_s = min(2 * pause_s, 5.0)


def _reason(cause: BaseException) -> str:
    """The database's one-line message in ``cause`` (the DBAPI line of SQLAlchemy's text, else its first line)."""
    text = str(cause)
    match = _DBAPI_LINE.search(text)
    reason = match.group(1) if match else text.strip().splitlines()[0] if text.strip() else type(cause).__name__
    return reason.strip()


def _says_read_only(reason: str) -> bool:
    lowered = reason.lower()
    return "readonly" in lowered or "read-only" in lowered or "read only" in lowered


def _says_locked(reason: str) -> bool:
    lowered = reason.lower()
    return "locked" in lowered or "busy" in lowered


def _blocking_file(exc: BaseException, tracking_uri: str) -> Path | None:
    """The file standing where a folder of the SQLite store's path must be, when that is what ``exc`` met."""
    if not any(isinstance(e, (FileExistsError, NotADirectoryError)) for e in _chain(exc)):
        return None
    if not tracking_uri.startswith("sqlite:///"):
        return None
    database = Path(tracking_uri[len("sqlite:///") :].split("?", 1)[0])
    for folder in database.parents:
        if os.path.lexists(folder):
            return None if folder.is_dir() else folder
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, each once."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _database_error(exc: BaseException) -> BaseException | None:
    """The first database error (SQLAlchemy's or the driver's) in ``exc``'s chain."""
    for current in _chain(exc):
        if type(current).__name__ in _DB_ERROR_NAMES and type(current).__module__.split(".")[0] in (
            "sqlalchemy",
            "sqlite3",
            "psycopg2",
            "pymysql",
            "MySQLdb",
            "pyodbc",
        ):
            return current
        if type(current).__name__ == "MlflowException" and _DBAPI_LINE.search(str(current)):
            return current
    return None


def redact(uri: str) -> str:
    """``uri`` without the password of its user part (``postgresql://u:***@host/db``)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri
    if parts.password is None:
        return uri
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
