"""Which of an array's values are among a set of levels: row by row on a served request's few rows.

``numpy.isin`` on a one-row object array costs about 25 us (it sorts and concatenates); a set lookup
per row costs about 2 us. A served request runs several such checks (strategies, devices, the kinds),
so below :data:`FEW_ROWS` rows the lookup is a Python loop, above it ``numpy.isin``; both answer the
same (equality of values, NaN never a member).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

FEW_ROWS = 16
"""Up to how many rows a lookup runs row by row (numpy's per-call cost dominates below)."""


def is_in(values: object, levels: Collection[object]) -> np.ndarray:
    """A bool array of ``values``' shape, True where a value is one of ``levels``."""
    array = np.asarray(values, dtype=object)
    if array.ndim == 1 and len(array) <= FEW_ROWS:
        allowed = levels if isinstance(levels, (set, frozenset)) else frozenset(levels)
        try:
            return np.array([value in allowed for value in array.tolist()], dtype=bool)
        except TypeError:  # an unhashable value (a list in a cell): numpy compares it
            pass
    return np.isin(array, np.array(list(levels), dtype=object))
