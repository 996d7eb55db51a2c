"""The served law's job columns, as the fit and serving tests take them from a frame of runs."""

from __future__ import annotations

import pandas as pd

from mlflow_roofline.core.schema import LAW_INPUT_NAMES


def law_query(frame: pd.DataFrame) -> pd.DataFrame:
    """The model input of each run in ``frame``: its ``LAW_INPUT_NAMES`` columns, in order."""
    return frame[list(LAW_INPUT_NAMES)]
