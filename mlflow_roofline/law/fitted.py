"""The fitted law as plain data: coefficients, covariance and ranges, evaluated with numpy.

The fit (statsmodels) produces a :class:`FittedLaw`; the served model reads it back from
JSON and predicts with vectorised numpy. No statsmodels object is ever pickled: a
:class:`LinearLaw` holds its design-matrix column names as statsmodels/patsy names them
(``Intercept``, ``log_C``, ``strategy[T.fsdp]``, ``strategy[T.tp]:log_eta``) and rebuilds
the design matrix from a frame of features by those names.

Features (:func:`law_features`), all natural logs:

- ``log_C``   log proxy_flops of the job (FLOPs)
- ``log_M``   log proxy_mem_traffic of the job (activation elements)
- ``log_eta`` log hardware efficiency S(N)/N (dimensionless)
- ``log_N``   log num_devices
- ``strategy`` the strategy name (categorical)

Responses: ``log_E`` (energy, joules) for the energy laws; ``log_t1`` (seconds the same
job takes on one device) for the time law.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats

from mlflow_roofline.core.errors import LawFileError
from mlflow_roofline.core.proxies import proxy_flops, proxy_mem_traffic
from mlflow_roofline.law.speedup import SpeedupLaw

LAW_SCHEMA_VERSION = 1
INTERVAL_LEVEL = 0.95
JOULES_PER_KWH = 3.6e6

# A categorical factor as patsy names it: strategy[T.fsdp], strategy[fsdp] (full-rank
# coding) or C(strategy, Treatment('single'))[T.fsdp].
_CATEGORICAL_TERM = re.compile(
    r"^(?:C\((?P<cname>\w+)(?:,.*)?\)|(?P<name>\w+))\[(?:T\.)?(?P<level>[^\]]+)\]$"
)


def law_features(
    *,
    num_layers: np.ndarray,
    hidden_size: np.ndarray,
    seq_len: np.ndarray,
    batch_size: np.ndarray,
    num_steps: np.ndarray,
    num_devices: np.ndarray,
    speedup: np.ndarray,
    strategy: np.ndarray,
) -> dict[str, np.ndarray]:
    """The law's features for arrays of configurations (one entry per row).

    The fit and the served model both call this, so a law sees the same features at
    prediction time as at fit time.
    """
    as_float = {
        name: np.asarray(value, dtype=float)
        for name, value in dict(
            num_layers=num_layers,
            hidden_size=hidden_size,
            seq_len=seq_len,
            batch_size=batch_size,
            num_steps=num_steps,
            num_devices=num_devices,
            speedup=speedup,
        ).items()
    }
    c = proxy_flops(
        as_float["num_layers"], as_float["hidden_size"], as_float["seq_len"], as_float["batch_size"], as_float["num_steps"]
    )
    m = proxy_mem_traffic(
        as_float["num_layers"], as_float["hidden_size"], as_float["seq_len"], as_float["batch_size"], as_float["num_steps"]
    )
    eta = as_float["speedup"] / as_float["num_devices"]
    return {
        "log_C": np.log(c),
        "log_M": np.log(m),
        "log_eta": np.log(eta),
        "log_N": np.log(as_float["num_devices"]),
        "strategy": np.asarray(strategy, dtype=object),
    }


@functools.lru_cache(maxsize=256)
def t_quantile(probability: float, df: float) -> float:
    """Student t quantile, cached: a served law asks for the same one on every request."""
    return float(stats.t.ppf(probability, df))


@dataclasses.dataclass(frozen=True)
class LinearLaw:
    """A linear law in logs, y = X b + e, e ~ N(0, resid_var), fitted by OLS.

    Attributes:
        formula: the statsmodels formula it was fitted with (for people; not parsed).
        terms: design-matrix column names, in coefficient order.
        coef: the coefficients b.
        cov: covariance of b (robust HC3 where the fit used it).
        resid_var: residual variance sigma^2 (log units squared).
        df_resid: residual degrees of freedom (for the t quantile of intervals).
    """

    formula: str
    terms: list[str]
    coef: list[float]
    cov: list[list[float]]
    resid_var: float
    df_resid: float

    def design(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """The design matrix X (rows x terms) of ``features`` by term name."""
        n_rows = len(next(iter(features.values())))
        columns = [self._term_column(term, features, n_rows) for term in self.terms]
        return np.column_stack(columns) if columns else np.empty((n_rows, 0))

    @staticmethod
    def _term_column(term: str, features: Mapping[str, np.ndarray], n_rows: int) -> np.ndarray:
        column = np.ones(n_rows)
        if term == "Intercept":
            return column
        for factor in term.split(":"):
            match = _CATEGORICAL_TERM.match(factor)
            if match:
                values = np.asarray(features[match["cname"] or match["name"]], dtype=object)
                column = column * (values == match["level"]).astype(float)
            else:
                column = column * np.asarray(features[factor], dtype=float)
        return column

    def predict(
        self, features: Mapping[str, np.ndarray], level: float = INTERVAL_LEVEL
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean and prediction interval of y (log units) for new observations.

        The interval is mean -/+ t(df_resid) * sqrt(x' cov x + resid_var): the uncertainty
        of the coefficients plus the scatter of a single new run.
        """
        x = self.design(features)
        mean = x @ np.asarray(self.coef)
        # x' cov x per row; optimize=True contracts x @ cov first (2-6x faster on large grids).
        se = np.sqrt(np.einsum("ij,jk,ik->i", x, np.asarray(self.cov), x, optimize=True) + self.resid_var)
        half = t_quantile(0.5 + level / 2.0, self.df_resid) * se
        return mean, mean - half, mean + half

    def mean(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """Mean of y (log units) for new observations, without an interval."""
        return self.design(features) @ np.asarray(self.coef)

    def coefficient(self, term: str) -> float:
        """The coefficient of ``term``; 0.0 when the law has no such term."""
        return self.coef[self.terms.index(term)] if term in self.terms else 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LinearLaw:
        return cls(
            formula=str(data["formula"]),
            terms=[str(t) for t in data["terms"]],
            coef=[float(v) for v in data["coef"]],
            cov=[[float(v) for v in row] for row in data["cov"]],
            resid_var=float(data["resid_var"]),
            df_resid=float(data["df_resid"]),
        )


@dataclasses.dataclass(frozen=True)
class FittedLaw:
    """Everything the served model needs, as JSON-ready data.

    Attributes:
        hardware: the ``roofline.hardware`` the runs were measured on.
        energy_source: the ``roofline.energy_source`` of the runs (``estimate`` is labelled).
        form: name of the energy-law form chosen by cross-validation (e.g. ``paper``).
        energy_law: log_E law used for predictions (joules).
        time_law: log_t1 law: seconds the job takes on one device.
        speedup_laws: one law per strategy seen in the fit.
        ranges: [min, max] of each model input (and of log_C, log_M) over the fitted runs;
            a query outside them is flagged ``extrapolated``.
        n_runs: runs the law was fitted on.
        cv_mape: grouped cross-validated mean absolute percentage error of energy, in %.
    """

    hardware: str
    energy_source: str
    form: str
    energy_law: LinearLaw
    time_law: LinearLaw
    speedup_laws: dict[str, SpeedupLaw]
    ranges: dict[str, list[float]]
    n_runs: int
    cv_mape: float
    schema_version: int = LAW_SCHEMA_VERSION

    @property
    def strategies(self) -> list[str]:
        """Strategies the law can predict."""
        return sorted(self.speedup_laws)

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["energy_law"] = self.energy_law.to_dict()
        data["time_law"] = self.time_law.to_dict()
        data["speedup_laws"] = {k: v.to_dict() for k, v in self.speedup_laws.items()}
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FittedLaw:
        """Inverse of :meth:`to_json`.

        Raises:
            LawFileError: another schema version, or a field missing or malformed.
        """
        data = json.loads(text)
        version = int(data.get("schema_version", 0))
        if version != LAW_SCHEMA_VERSION:
            raise LawFileError(f"model: law schema_version {version} is not {LAW_SCHEMA_VERSION}; refit the model")
        try:
            return cls._from_data(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise LawFileError(f"model: the law JSON has a missing or malformed field ({exc!r}); refit the model") from exc

    @classmethod
    def _from_data(cls, data: dict[str, Any]) -> FittedLaw:
        return cls(
            hardware=str(data["hardware"]),
            energy_source=str(data["energy_source"]),
            form=str(data["form"]),
            energy_law=LinearLaw.from_dict(data["energy_law"]),
            time_law=LinearLaw.from_dict(data["time_law"]),
            speedup_laws={k: SpeedupLaw.from_dict(v) for k, v in data["speedup_laws"].items()},
            ranges={k: [float(lo), float(hi)] for k, (lo, hi) in data["ranges"].items()},
            n_runs=int(data["n_runs"]),
            cv_mape=float(data["cv_mape"]),
        )
