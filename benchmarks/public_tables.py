"""Accuracy on measurements this project did not make: the public tables of benchmarks/data/public/.

Each CSV there (its source, columns and every conversion: benchmarks/data/public/README.md) goes
through what a user runs, in a temporary SQLite store: ``mlflow-roofline import`` (the real CLI,
in process), the real fit (:func:`mlflow_roofline.fit.pipeline.run_fit`, what ``mlflow-roofline
fit`` runs), and ``models:/<name>@champion`` loaded with ``mlflow.pyfunc.load_model``. Printed per
table, energy MAPE in % and the share of measured energies inside the served 95 % interval, and the
served time's MAPE in %:

- ``rows``: rows in the file, runs imported, runs the full fit used (the fit's own line says why it
  dropped any);
- ``cv``: grouped cross-validation through @champion: the job configurations (every column but
  the hardware and the measurements) split into ``--folds`` groups; each group's rows on every
  GPU are held out, the rest imported and fitted, the held-out rows asked of @champion;
- ``bigger``: fitted on the rows whose L*d^2 is at or below the 75th percentile of the table's
  sizes, the larger ones asked (only where the table has 4+ sizes);
- ``loho``: one GPU left out (only where the table has 2+ GPUs of the hardware table): fitted on
  the others, the left-out GPU asked by name; a refusal is printed with @champion's reason.

Nothing is tuned to these tables; a figure a table is too small for is printed as ``n/a`` with why.

    python benchmarks/public_tables.py [--table NAME] [--folds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from fit_accuracy import request_columns, request_frame  # benchmarks/ is the script's directory

DATA = Path(__file__).resolve().parent / "data" / "public"
MEASURED = ("energy_j", "time_s", "energy_cpu_j", "energy_dram_j", "energy_node_j")
"""Columns a row measures: never part of a job configuration."""
BIGGER_QUANTILE, MIN_SIZES = 0.75, 4
"""Bigger models: fit on L*d^2 at or below this quantile of the sizes; only with this many sizes or more."""


@dataclasses.dataclass(frozen=True)
class Asked:
    """@champion's answers to held-out rows: absolute % errors of energy and inside-interval flags, or a refusal;
    the absolute % errors of the served time beside them."""

    errors: np.ndarray
    inside: np.ndarray
    refused: str = ""
    time_errors: np.ndarray = dataclasses.field(default_factory=lambda: np.array([]))


@dataclasses.dataclass(frozen=True)
class Store:
    """A temporary SQLite tracking store and the directory its imported CSVs are written to."""

    root: Path

    def csv(self, rows: pd.DataFrame, name: str) -> Path:
        path = self.root / f"{name}.csv"
        rows.to_csv(path, index=False)
        return path


@contextlib.contextmanager
def _store() -> Iterator[Store]:
    """A fresh SQLite store as MLflow's tracking and registry URI for the duration, run from its directory
    (an SQLite store's artifacts go to ./mlruns: there, not into the working tree)."""
    import mlflow

    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        previous = os.environ.get("MLFLOW_TRACKING_URI")
        os.environ["MLFLOW_TRACKING_URI"] = uri
        mlflow.set_tracking_uri(uri)
        try:
            yield Store(Path(tmp))
        finally:
            if previous is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = previous


def _cli(*args: str) -> tuple[int, str]:
    """``mlflow-roofline ARGS`` in process: exit status and what it printed (stdout and stderr)."""
    from mlflow_roofline.cli import main

    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue()


def _import_and_fit(store: Store, rows: pd.DataFrame, name: str) -> tuple[int, int, str]:
    """Import ``rows`` into experiment ``name`` with the real CLI and fit it as model ``name``.

    Returns the runs imported, the runs the fit used and the import's and the fit's summary lines."""
    import mlflow

    from mlflow_roofline.fit.pipeline import run_fit

    code, printed = _cli("import", str(store.csv(rows, name)), "--experiment", name)
    summary = next((line for line in printed.splitlines() if line.startswith("imported")), printed.strip())
    if code not in (0, 1):
        raise RuntimeError(f"import of {name} failed ({code}): {printed.strip()}")
    experiment = mlflow.get_experiment_by_name(name)
    imported = len(mlflow.search_runs([experiment.experiment_id])) if experiment else 0
    outcome = run_fit([name], model_name=name, alias="champion", echo=lambda *_: None)
    return imported, sum(len(fit.frame) for fit in outcome.fits), f"{summary}; fit: {outcome.run_data.summary()}"


def _ask(name: str, rows: pd.DataFrame) -> Asked:
    """``models:/<name>@champion`` asked about ``rows`` (with their hardware), in process."""
    import mlflow

    model = mlflow.pyfunc.load_model(f"models:/{name}@champion")
    try:
        served = model.predict(request_frame(rows, ("hardware",)))
    except mlflow.exceptions.MlflowException as refused:
        return Asked(np.array([]), np.array([], dtype=bool), refused.message.splitlines()[0])
    actual = rows["energy_j"].to_numpy(dtype=float)
    errors = 100.0 * np.abs(served["energy_j"].to_numpy(dtype=float) / actual - 1.0)
    inside = (served["energy_j_lower"].to_numpy() <= actual) & (actual <= served["energy_j_upper"].to_numpy())
    seconds = rows["time_s"].to_numpy(dtype=float)
    return Asked(errors, inside, time_errors=100.0 * np.abs(served["time_s"].to_numpy(dtype=float) / seconds - 1.0))


def _configurations(rows: pd.DataFrame) -> pd.Series:
    """Each row's job configuration: every column but the hardware, the measurements and source notes."""
    asked = {*request_columns(rows), "device"}
    keys = [c for c in rows.columns if c in asked]
    return rows[keys].astype(str).agg("|".join, axis=1)


def _fold_of(rows: pd.DataFrame, folds: int) -> np.ndarray:
    """Fold of each row: its configuration's index (configurations sorted) modulo ``folds``."""
    config = _configurations(rows)
    order = {c: i for i, c in enumerate(sorted(config.unique()))}
    return np.array([order[c] % folds for c in config])


def _held_out(store: Store, rows: pd.DataFrame, train: np.ndarray, name: str) -> Asked:
    """Fit on ``rows[train]``, ask @champion about the rest."""
    _import_and_fit(store, rows[train], name)
    return _ask(name, rows[~train])


def _merge(parts: list[Asked]) -> Asked:
    answered = [p for p in parts if not p.refused]
    refusals = "; ".join(sorted({p.refused for p in parts if p.refused}))
    if not answered:
        return Asked(np.array([]), np.array([], dtype=bool), refusals)
    return Asked(
        np.concatenate([p.errors for p in answered]),
        np.concatenate([p.inside for p in answered]),
        refusals,
        np.concatenate([p.time_errors for p in answered]),
    )


def _cv(store: Store, rows: pd.DataFrame, folds: int, tag: str) -> Asked:
    fold = _fold_of(rows, folds)
    return _merge([_held_out(store, rows, fold != k, f"{tag}-cv{k}") for k in range(folds) if (fold == k).any()])


def _bigger(store: Store, rows: pd.DataFrame, tag: str) -> Asked | str:
    size = rows["num_layers"].to_numpy(dtype=float) * rows["hidden_size"].to_numpy(dtype=float) ** 2
    sizes = np.unique(size)
    if len(sizes) < MIN_SIZES:
        return f"n/a: {len(sizes)} model size(s) by L*d^2 (needs {MIN_SIZES}+)"
    return _held_out(store, rows, size <= np.quantile(sizes, BIGGER_QUANTILE), f"{tag}-bigger")


def _loho(store: Store, rows: pd.DataFrame, tag: str) -> dict[str, Asked] | str:
    from mlflow_roofline.core.gpu_datasheets import load_hardware_table

    table = load_hardware_table(env={})
    gpus = [g for g in rows["hardware"].unique() if table.lookup(str(g)) is not None]
    if len(gpus) < 2:
        return f"n/a: {len(gpus)} GPU(s) of the hardware table (needs 2+)"
    return {
        str(gpu): _held_out(store, rows, (rows["hardware"] != gpu).to_numpy(), f"{tag}-loho{i}")
        for i, gpu in enumerate(gpus)
    }


def _figure(asked: Asked | str) -> str:
    """``MAPE %, inside %, (n)`` of answers, with any refusal; or the reason a figure is not given."""
    if isinstance(asked, str):
        return asked
    text = ""
    if len(asked.errors):
        text = f"MAPE {np.mean(asked.errors):.1f} % (median {np.median(asked.errors):.1f}, max "
        text += f"{np.max(asked.errors):.1f}), inside the 95 % interval {100.0 * np.mean(asked.inside):.0f} %"
        text += f" of {len(asked.errors)}"
        if len(asked.time_errors):
            text += f"; time MAPE {np.mean(asked.time_errors):.1f} %"
    return text + (f"{'; ' if text else ''}refused: {asked.refused}" if asked.refused else "")


def score_table(path: Path, folds: int, echo: Callable[[str], object] = print) -> None:
    """Import, fit and ask @champion about one public table; print its figures."""
    rows = pd.read_csv(path)
    tag = path.stem.replace("_", "-")
    with _store() as store:
        imported, used, summary = _import_and_fit(store, rows, tag)
        echo(f"{path.name}: {len(rows)} rows, {rows['hardware'].nunique()} GPU(s); {summary}")
        echo(
            f"  rows: {len(rows)} in the file, {imported} imported, {used} used by the fit ({imported - used} dropped)"
        )
        echo(f"  cv ({folds} folds by configuration): {_figure(_cv(store, rows, folds, tag))}")
        echo(f"  bigger models: {_figure(_bigger(store, rows, tag))}")
        loho = _loho(store, rows, tag)
        if isinstance(loho, str):
            echo(f"  a GPU left out: {loho}")
            return
        for gpu, asked in loho.items():
            echo(f"  {gpu} left out: {_figure(asked)}")
        echo(f"  all GPUs left out in turn: {_figure(_merge(list(loho.values())))}")


def _table_path(table: str) -> Path:
    """A table's CSV: a path to one, or the name of one under benchmarks/data/public/."""
    path = Path(table)
    return path if path.suffix == ".csv" else DATA / f"{table}.csv"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--table",
        default=None,
        help="only benchmarks/data/public/TABLE.csv, or a CSV's path (e.g. benchmarks/data/simulated/blind_fleet.csv)",
    )
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow  # noqa: F401  (configures its loggers on import: quieted after)

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    paths = [_table_path(args.table)] if args.table else sorted(DATA.glob("*.csv"))
    for path in paths:
        score_table(path, args.folds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
