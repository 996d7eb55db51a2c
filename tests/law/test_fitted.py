"""LinearLaw rebuilds statsmodels' design matrix and prediction intervals from plain data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.law.linear import LinearLaw
from mlflow_roofline.law.log_features import law_features
from mlflow_roofline.law.speedup import SpeedupLaw


def _frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    strategy = rng.choice(["single", "ddp", "fsdp", "tp"], size=n)
    frame = pd.DataFrame(
        {
            "log_C": rng.uniform(20, 30, n),
            "log_M": rng.uniform(10, 18, n),
            "log_eta": rng.uniform(-1.0, 0.0, n),
            "strategy": strategy,
        }
    )
    offsets = pd.Series(strategy).map({"single": 0.0, "ddp": 0.1, "fsdp": -0.05, "tp": 0.2}).to_numpy()
    frame["log_E"] = 0.2 * frame.log_C + 0.5 * frame.log_M - 1.0 * frame.log_eta + offsets + rng.normal(0, 0.05, n)
    return frame


def _as_law(result, formula: str) -> LinearLaw:
    return LinearLaw(
        formula=formula,
        terms=list(result.model.exog_names),
        coef=list(result.params.to_numpy()),
        cov=result.cov_params().to_numpy().tolist(),
        resid_var=float(result.scale),
        df_resid=float(result.df_resid),
    )


@pytest.mark.parametrize(
    "formula",
    [
        "log_E ~ log_C + log_M + log_eta + strategy",
        "log_E ~ log_C + log_M + log_eta + strategy + strategy:log_eta",
        "log_E ~ log_C + log_M + log_eta + C(strategy, Treatment('single'))",
        "log_E ~ log_C + log_M + strategy:log_eta",
    ],
)
def test_predictions_and_intervals_match_statsmodels(formula: str) -> None:
    train, new = _frame(seed=1), _frame(n=25, seed=2)
    result = smf.ols(formula, data=train).fit()
    law = _as_law(result, formula)

    mean, lower, upper = law.predict({c: new[c].to_numpy() for c in new.columns}, level=0.95)

    expected = result.get_prediction(new).summary_frame(alpha=0.05)
    np.testing.assert_allclose(mean, expected["mean"], rtol=1e-10)
    np.testing.assert_allclose(lower, expected["obs_ci_lower"], rtol=1e-10)
    np.testing.assert_allclose(upper, expected["obs_ci_upper"], rtol=1e-10)


def test_fitted_law_round_trips_through_json() -> None:
    frame = _frame()
    result = smf.ols("log_E ~ log_C + log_M + log_eta + strategy", data=frame).fit(cov_type="HC3")
    energy = _as_law(result, "log_E ~ log_C + log_M + log_eta + strategy")
    law = FittedLaw(
        hardware="cpu:test",
        energy_source="estimate",
        form="paper",
        energy_law=energy,
        time_law=energy,
        speedup_laws={"tp": SpeedupLaw("tp", "saturating_exp", {"s_max": 1.8, "k": 0.7}, 3, 0.01)},
        ranges={"num_layers": [2.0, 4.0]},
        n_runs=len(frame),
        cv_mape=3.5,
    )
    again = FittedLaw.from_json(law.to_json())
    assert again == law
    assert again.energy_law.coefficient("log_C") == pytest.approx(result.params["log_C"])
    assert again.energy_law.coefficient("no_such_term") == 0.0


def test_law_features_follow_the_proxies() -> None:
    features = law_features(
        num_layers=np.array([4]),
        hidden_size=np.array([256]),
        seq_len=np.array([128]),
        batch_size=np.array([16]),
        num_steps=np.array([10]),
        num_devices=np.array([2]),
        speedup=np.array([1.5]),
        strategy=np.array(["ddp"]),
    )
    flops = (12 * 4 * 256**2 + 3 * 4 * 128 * 256) * 16 * 128 * 10
    traffic = 16 * 128 * 256 * 4 * 10
    assert features["log_C"][0] == pytest.approx(np.log(flops))
    assert features["log_M"][0] == pytest.approx(np.log(traffic))
    assert features["log_eta"][0] == pytest.approx(np.log(0.75))
    assert features["log_N"][0] == pytest.approx(np.log(2))


def test_a_law_file_from_another_version_or_incomplete_is_named_as_such() -> None:
    from mlflow_roofline.core.errors import LawFileError

    with pytest.raises(LawFileError, match="^model: law schema_version 0 is not 1; refit the model$"):
        FittedLaw.from_json('{"hardware": "x"}')
    with pytest.raises(LawFileError, match="missing or malformed field .*energy_source"):
        FittedLaw.from_json('{"schema_version": 1, "hardware": "x"}')
