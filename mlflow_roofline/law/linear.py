"""A linear law in logs as plain data, evaluated with numpy (no statsmodels object is pickled).

A :class:`LinearLaw` holds its design-matrix column names as statsmodels/patsy names them
(``Intercept``, ``log_C``, ``strategy[T.fsdp]``, ``strategy[T.tp]:log_eta``; a level that is not a
plain word JSON-quoted, ``hardware[T."cpu:Xeon [8]"]``, see :func:`categorical_factor`) and rebuilds
the design matrix from a mapping of features (:mod:`law.log_features`) by those names. Its
prediction interval is the one of :class:`~mlflow_roofline.law.coefficients.LawCoefficients`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping

import numpy as np

from mlflow_roofline.law.coefficients import LAW_FAMILIES, LawCoefficients

# A categorical factor as patsy names it: strategy[T.fsdp], strategy[fsdp] (full-rank
# coding) or C(strategy, Treatment('single'))[T.fsdp]; a level that is not a plain word
# (a hardware name such as "cpu:Intel Xeon [8]") is written JSON-quoted: hardware[T."cpu:..."].
_CATEGORICAL_TERM = re.compile(r"^(?:C\((?P<cname>\w+)(?:,.*)?\)|(?P<name>\w+))\[(?:T\.)?(?P<level>[^\]]+)\]$")
_QUOTED_TERM = re.compile(r'^(?P<name>\w+)\[(?:T\.)?(?P<level>".*")\]$', re.DOTALL)
_PLAIN_LEVEL = re.compile(r"^\w+$")


def categorical_factor(feature: str, level: str, treatment: bool = True) -> str:
    """The term name of ``feature == level``: ``strategy[T.fsdp]``, ``hardware[T."a:b"]`` (``T.``: treatment coding).

    A level that is not a plain word is JSON-quoted, so that no character of it (``:``,
    ``[``, ``]``, quotes) is ever read as part of the term's syntax.
    """
    shown = level if _PLAIN_LEVEL.match(level) else json.dumps(level)
    return f"{feature}[{'T.' if treatment else ''}{shown}]"


def split_factors(term: str) -> list[str]:
    """The factors of an interaction term (``a:b``), split at the colons outside JSON-quoted levels."""
    factors, start, quoted, escaped = [], 0, False, False
    for i, char in enumerate(term):
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char == ":":
            factors.append(term[start:i])
            start = i + 1
    factors.append(term[start:])
    return factors


def _factor(text: str) -> tuple[str, str | None]:
    """One factor as ``(feature, level)``; level None for a numeric feature."""
    quoted = _QUOTED_TERM.match(text)
    if quoted:
        return quoted["name"], str(json.loads(quoted["level"]))
    match = _CATEGORICAL_TERM.match(text)
    if match:
        return match["cname"] or match["name"], match["level"]
    return text, None


class LinearLaw(LawCoefficients):
    """A linear law in logs, y = X b + e, e ~ N(0, resid_var), fitted by OLS.

    Attributes:
        formula: the statsmodels formula it was fitted with (for people; not parsed).
        terms: design-matrix column names, in coefficient order.
        coef: the coefficients b.
        cov: covariance of b (robust HC3 where the fit used it).
        resid_var: residual variance sigma^2 (log units squared).
        df_resid: residual degrees of freedom (for the t quantile of intervals).
    """

    @functools.cached_property
    def _plan(self) -> tuple[tuple[tuple[str, str | None], ...], ...]:
        """Each term as its factors ``(feature, level or None)``, parsed once (``Intercept``: no factor)."""
        plan = []
        for term in self.terms:
            factors: list[tuple[str, str | None]] = []
            if term != "Intercept":
                factors = [_factor(factor) for factor in split_factors(term)]
            plan.append(tuple(factors))
        return tuple(plan)

    @functools.cached_property
    def _coef_array(self) -> np.ndarray:
        return np.asarray(self.coef, dtype=float)

    def design(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """The design matrix X (rows x terms) of ``features`` by term name.

        The terms are parsed once per law (a served law builds X on every request).
        """
        n_rows = len(next(iter(features.values())))
        x = np.ones((n_rows, len(self.terms)))
        for j, factors in enumerate(self._plan):
            for name, level in factors:
                if level is None:
                    x[:, j] *= np.asarray(features[name], dtype=float)
                else:
                    x[:, j] *= np.asarray(features[name], dtype=object) == level
        return x

    def mean_and_gradient(self, features: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """X b and the gradient of the mean with respect to b, which is X itself."""
        x = self.design(features)
        return x @ self._coef_array, x


LAW_FAMILIES[""] = LinearLaw  # a law JSON without a ``kind`` is linear: it writes none
