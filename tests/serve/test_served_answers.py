"""Every served answer of a fixed grid of queries is the one the model gave when the golden file was written.

The grid and the laws are in tests/support/served_answers.py, the answers in tests/data/served_answers.json
(written from the serving code before the planning modes were vectorised). Numbers must agree to
1e-9 relative; text, flags, integers, row order and columns exactly.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from support.served_answers import GOLDEN, answer, as_json_columns, asked

RELATIVE = 1e-9

_GOLDEN = json.loads(GOLDEN.read_text())


def _label(case: dict[str, Any]) -> str:
    params = ",".join(f"{k}={v}" for k, v in sorted(case["params"].items()))
    return f"{case['queries']}:{params}"


def _same(expected: Any, got: Any) -> bool:
    if isinstance(expected, float) and not isinstance(got, bool) and isinstance(got, (int, float)):
        return math.isclose(got, expected, rel_tol=RELATIVE, abs_tol=0.0)
    return type(got) is type(expected) and got == expected


@pytest.mark.parametrize("case", _GOLDEN["cases"], ids=_label)
def test_the_served_answer_is_unchanged(case: dict[str, Any]) -> None:
    law_name, rows = _GOLDEN["queries"][case["queries"]]
    got = as_json_columns(answer(_GOLDEN["laws"][law_name], asked(rows, case["params"]), case["params"]))
    expected = case["answer"]
    assert list(got) == list(expected)
    for column, values in expected.items():
        assert len(got[column]) == len(values), column
        wrong = [i for i, (e, g) in enumerate(zip(values, got[column], strict=True)) if not _same(e, g)]
        first = wrong[:3]
        assert not wrong, (
            f"{column}: rows {first}: expected {[values[i] for i in first]}, got {[got[column][i] for i in first]}"
        )
