"""LinearLaw parses its terms once: the design matrix and intervals are those of the formula, term by term."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mlflow_roofline.law.linear import LinearLaw

TERMS = ["Intercept", "log_C", "strategy[T.fsdp]", "C(strategy, Treatment('single'))[T.tp]:log_eta", "log_C:log_N"]


def law() -> LinearLaw:
    rng = np.random.default_rng(3)
    a = rng.normal(size=(5, 5))
    return LinearLaw("y ~ ...", TERMS, [0.5, 1.1, -0.3, 2.0, 0.01], (a @ a.T / 10).tolist(), 0.04, 12.0)


def features() -> dict[str, np.ndarray]:
    return {
        "log_C": np.array([30.0, 31.5, 29.0]),
        "log_N": np.log([1.0, 4.0, 2.0]),
        "log_eta": np.log([1.0, 0.8, 0.9]),
        "strategy": np.array(["single", "tp", "fsdp"], dtype=object),
    }


def test_design_is_each_term_as_written() -> None:
    f = features()
    expected = np.column_stack(
        [
            np.ones(3),
            f["log_C"],
            (f["strategy"] == "fsdp").astype(float),
            (f["strategy"] == "tp") * f["log_eta"],
            f["log_C"] * f["log_N"],
        ]
    )
    linear = law()
    np.testing.assert_array_equal(linear.design(f), expected)
    np.testing.assert_array_equal(linear.design(f), expected)  # again, from the parsed terms


def test_interval_is_mean_plus_minus_t_times_the_prediction_standard_error() -> None:
    linear, f = law(), features()
    x = linear.design(f)
    mean, lo, hi = linear.predict(f)
    se = np.sqrt(np.einsum("ij,jk,ik->i", x, np.array(linear.cov), x) + linear.resid_var)
    np.testing.assert_allclose(mean, x @ np.array(linear.coef))
    np.testing.assert_allclose(hi - mean, stats.t.ppf(0.975, 12.0) * se, rtol=1e-12)
    np.testing.assert_allclose(mean - lo, hi - mean, rtol=1e-12)
    np.testing.assert_allclose(linear.mean(f), mean)


def test_the_parsed_terms_are_not_part_of_the_law_as_data() -> None:
    linear = law()
    linear.predict(features())
    assert set(linear.to_dict()) == {"formula", "terms", "coef", "cov", "resid_var", "df_resid"}
    assert linear == LinearLaw.from_dict(linear.to_dict())
    with pytest.raises(AttributeError):
        linear.coef = [0.0]  # type: ignore[misc]  # still frozen
