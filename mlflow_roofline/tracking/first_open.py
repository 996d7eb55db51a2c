"""Opening a database store that may not exist yet: one process at a time creates its tables.

MLflow's database store creates the tables and runs its alembic migrations when it finds
them missing (``SqlAlchemyStore.__init__`` in ``mlflow/store/tracking/sqlalchemy_store.py``:
``_all_tables_exist``, then ``_initialize_tables``), with no lock. Two commands that open a new
store at once both migrate it, and one dies with an alembic traceback ("table experiments
already exists"). :func:`first_open` holds an exclusive lock while this process opens a
database store for the first time, so the second opener finds the tables made and skips the
migration. MLflow's own stores of jobs and workspaces guard their tables the same way
(``_safe_initialize_tables`` in ``mlflow/store/db/utils.py``: a lock file in the temporary
folder), but its tracking store does not.

The lock is a file in the temporary folder named after the database (an SQLite file's absolute
path, else the URI), so every process of this machine opening that store takes the same one.
Stores that are no database (a tracking server, a folder) open without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
"""The URI schemes of MLflow's database stores (a driver may follow: ``postgresql+psycopg2``)."""

_opened: set[str] = set()
"""Database URIs this process has opened once (MLflow keeps the store; its tables exist since)."""


def lock_path(tracking_uri: str) -> Path | None:
    """The lock file of the database ``tracking_uri`` names, or None when it names no database."""
    scheme = urlsplit(tracking_uri).scheme.split("+")[0].lower()
    if scheme not in DATABASE_SCHEMES:
        return None
    key = tracking_uri
    if scheme == "sqlite" and ":///" in tracking_uri:  # sqlite:///relative.db, sqlite:////absolute.db
        database = tracking_uri.split(":///", 1)[1].split("?", 1)[0]
        key = os.path.abspath(database) if database and database != ":memory:" else tracking_uri
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / f"mlflow-roofline-first-open-{digest}.lock"


@contextlib.contextmanager
def first_open(tracking_uri: str) -> Iterator[None]:
    """Hold the store's lock over the block when this process opens the database for the first time.

    Without ``fcntl`` (Windows) or where the lock file cannot be made, the block runs unlocked, as
    MLflow alone would run it.
    """
    path = None if tracking_uri in _opened else lock_path(tracking_uri)
    if path is None:
        yield
        return
    try:
        import fcntl

        handle = open(path, "a")  # held open across the block: the lock lives on it
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
        _opened.add(tracking_uri)
    finally:
        handle.close()  # closing releases the lock
