"""The ``roofline`` model evaluator through ``mlflow.models.evaluate``: a registered law scored on
runs measured as it predicts them (``ok``) and on runs that now cost 30 % more (``refit``)."""

from __future__ import annotations

import configparser
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from law_factory import make_law, synthetic_frame
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from support.registered_law import registered_law

from mlflow_roofline.core.schema import DRIFT_RESIDUALS_ARTIFACT
from mlflow_roofline.serve.validate import INPUT_COLUMNS
from mlflow_roofline.tracking.evaluator import RooflineEvaluator
from mlflow_roofline.tracking.run_context import RooflineRunContext

REPO_ROOT = Path(__file__).resolve().parents[2]

SCORES = (
    "drift_n_rows",
    "drift_mape",
    "drift_median_ape",
    "drift_bias",
    "drift_interval_coverage",
    "drift_extrapolated_share",
    "drift_refit",
)


@pytest.fixture(scope="module")
def champion(tmp_path_factory: pytest.TempPathFactory, store_template: Path) -> Iterator[str]:
    """A law fitted on synthetic runs, registered @champion in this module's own store."""
    yield from registered_law(tmp_path_factory, store_template, make_law())


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    """Newly measured runs: the law's job columns, the measured speedup and energy_j (joules)."""
    _, frame = synthetic_frame(seed=0)
    return frame[[*INPUT_COLUMNS, "speedup", "energy_j"]].reset_index(drop=True)


def _evaluate(champion: str, data: pd.DataFrame) -> tuple[dict[str, float], dict[str, str], str]:
    with mlflow.start_run() as run:
        result = mlflow.models.evaluate(
            champion,
            data,
            targets="energy_j",
            model_type="regressor",
            evaluators=["roofline"],
        )
    stored = MlflowClient().get_run(run.info.run_id)
    assert set(SCORES) <= set(result.metrics) and set(SCORES) <= set(stored.data.metrics)
    return result.metrics, stored.data.tags, run.info.run_id


def test_the_plugins_are_declared_and_installed_as_mlflow_entry_points() -> None:
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg")
    declared = config["options.entry_points"]
    assert declared["mlflow.model_evaluator"].split() == [
        "roofline",
        "=",
        "mlflow_roofline.tracking.evaluator:RooflineEvaluator",
    ]
    assert declared["mlflow.run_context_provider"].split() == [
        "roofline",
        "=",
        "mlflow_roofline.tracking.run_context:RooflineRunContext",
    ]
    # Installed metadata: `pip install -e .` must have run since setup.cfg gained them.
    (evaluator,) = [e for e in importlib.metadata.entry_points(group="mlflow.model_evaluator") if e.name == "roofline"]
    (context,) = [
        e for e in importlib.metadata.entry_points(group="mlflow.run_context_provider") if e.name == "roofline"
    ]
    assert evaluator.load() is RooflineEvaluator and context.load() is RooflineRunContext


def test_a_law_scored_on_runs_it_describes_is_ok(champion: str, runs: pd.DataFrame) -> None:
    metrics, tags, run_id = _evaluate(champion, runs)
    assert metrics["drift_n_rows"] == len(runs) and metrics["drift_refit"] == 0.0
    assert metrics["drift_mape"] < 15 and abs(metrics["drift_bias"]) < 10
    assert metrics["drift_interval_coverage"] >= 80 and metrics["drift_extrapolated_share"] == 0.0
    assert tags["roofline.drift_verdict"] == "ok"
    assert tags["roofline.drift_reason"] == f"within the thresholds on {len(runs)} runs"
    assert DRIFT_RESIDUALS_ARTIFACT in [f.path for f in MlflowClient().list_artifacts(run_id, "roofline")]


def test_runs_that_now_cost_30_percent_more_say_refit(champion: str, runs: pd.DataFrame) -> None:
    drifted = runs.assign(energy_j=runs["energy_j"] * 1.3)
    metrics, tags, _ = _evaluate(champion, drifted)
    assert metrics["drift_refit"] == 1.0 and tags["roofline.drift_verdict"] == "refit"
    assert metrics["drift_bias"] == pytest.approx(100 * (1 / 1.3 - 1), abs=3)  # the law now predicts ~23 % low
    assert "bias" in tags["roofline.drift_reason"]


def test_unknown_evaluator_config_keys_are_refused_by_name(champion: str, runs: pd.DataFrame) -> None:
    with pytest.raises(MlflowException, match="evaluator_config: unknown keys \\['max_mse'\\]"), mlflow.start_run():
        mlflow.models.evaluate(
            champion, runs, targets="energy_j", model_type="regressor", evaluators=["roofline"],
            evaluator_config={"roofline": {"max_mse": 1.0}},
        )  # fmt: skip


def _first(column: pd.Series, value: object) -> list[object]:
    return [value, *column.iloc[1:]]


REFUSED = [
    ("huge energy", lambda r: r.assign(energy_j=_first(r.energy_j, 1e308)), None, "energy_j: row 0: 1e+308 J on "),
    ("tiny energy", lambda r: r.assign(energy_j=_first(r.energy_j, 5e-324)), None, "energy_j: row 0: 4.94066e-324 J"),
    (
        "text energy",
        lambda r: r.assign(energy_j=_first(r.energy_j, "lots")),
        None,
        "energy_j: row 0: must be a measured energy in joules, got 'lots'",
    ),
    (
        "text size",
        lambda r: r.assign(num_steps=_first(r.num_steps, "many")),
        None,
        "the model refused the runs: num_steps (row 0): must be a number, got 'many'",
    ),
    ("text threshold", lambda r: r, {"max_mape": "abc"}, "max_mape: must be a percentage in (0, 100], got 'abc'"),
    ("true threshold", lambda r: r, {"min_coverage": True}, "min_coverage: must be a percentage in (0, 100], got True"),
    (
        "no rows",
        lambda r: pd.DataFrame(columns=r.columns),
        None,
        "data: has no rows; expected one row per measured run: the law's job columns (num_layers, ",
    ),
    ("no strategy", lambda r: r.drop(columns="strategy"), None, "data: lacks the columns strategy; expected one row"),
]


@pytest.mark.parametrize(("change", "config", "start"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_bad_data_or_config_is_one_line_naming_the_field(
    champion: str, runs: pd.DataFrame, change, config, start
) -> None:
    """No raw ValueError, no plot of an impossible energy, no infinite MAPE logged: the field, the row, the rule."""
    with pytest.raises(MlflowException) as raised, mlflow.start_run() as run:
        mlflow.models.evaluate(
            champion, change(runs), targets="energy_j", model_type="regressor", evaluators=["roofline"],
            evaluator_config={"roofline": config} if config else None,
        )  # fmt: skip
    assert raised.value.message.startswith(f"roofline evaluator: {start}"), raised.value.message
    assert "\n" not in raised.value.message
    stored = MlflowClient().get_run(run.info.run_id)
    assert not set(SCORES) & set(stored.data.metrics)  # nothing scored, nothing logged
