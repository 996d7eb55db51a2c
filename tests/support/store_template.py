"""An empty SQLite tracking store, already migrated, for tests to copy instead of creating one each.

MLflow's first open of a new SQLite file runs every schema migration: about 1.2 CPU-seconds and
dozens of synced writes (5-10 s of wall time on a busy disk), paid again by every test and by
every child process that opens a fresh store first. A copy of a migrated file costs one file copy.

The template holds the tables and MLflow's bookkeeping rows but not the Default experiment
(id 0): that row names an artifact location under the working directory of whoever created it,
so the first process that opens the copy creates it, exactly as on a new store.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path


def make_store_template(root: Path) -> Path:
    """Create ``root/template.db``, an empty migrated store without the Default experiment; return its path."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    path = root / "template.db"
    store = SqlAlchemyStore(f"sqlite:///{path}", (root / "unused-artifacts").as_uri())
    store.engine.dispose()  # no connection of this process stays on the file
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DELETE FROM experiments WHERE experiment_id = 0")
    return path


def copy_store(template: Path, target: Path) -> Path:
    """Copy the template to ``target`` (an SQLite file path, which must not exist yet); return ``target``."""
    if target.exists():
        raise FileExistsError(f"{target} exists: a copied store would replace it")
    shutil.copyfile(template, target)
    return target
