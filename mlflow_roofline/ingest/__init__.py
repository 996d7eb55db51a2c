"""Measurements made elsewhere, imported as train runs the fit uses like its own.

``mlflow-roofline import FILE --format table|codecarbon [--mapping MAP.yaml]``: a CSV or
Parquet table in the run schema's names (or renamed by a mapping), or CodeCarbon's
``emissions.csv`` with the model configuration supplied by the mapping. Every valid row
becomes one FINISHED train run tagged ``roofline.source=import:<format>``, exactly once:
each run carries its row's hash, and a row is claimed before it is logged
(:mod:`ingest.row_claim`), so importing a file twice, twice at once, or again after a killed
import stores each row once; a bad row is reported with its
line and field and the other rows are still imported; a required column missing from the
file, or (``--strict``) an unknown column, is one message for the whole file, and so is
a file that cannot be read as a table (:mod:`ingest.files`).

May import core, system (process liveness, signals) and tracking (MLflow only through it;
pandas, yaml); never a stage.
"""
