"""The one rule table: its scalar and vectorised checks agree, and every user of it reports the same rule."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from law_factory import make_law
from mlflow.exceptions import MlflowException

from mlflow_roofline.core.config import AUTO, TrainConfig
from mlflow_roofline.core.errors import ConfigError
from mlflow_roofline.core.rules import (
    INT_FIELDS,
    KIND_INT_FIELDS,
    PLACEMENT_RULES,
    RULES,
    first_broken,
    first_broken_rows,
)
from mlflow_roofline.core.schema import ARCHS, DEVICES, KIND_PARAM_NAMES, PEFTS, PRECISIONS, STRATEGIES
from mlflow_roofline.serve.placement_search import candidates, evaluate_candidates
from mlflow_roofline.serve.predict import predict_frame

LAW = make_law()


@st.composite
def configs(draw) -> dict[str, object]:
    """Any configuration, valid or not: small integers so that divisibility often fails and often holds.

    Divisors (heads, devices) are >= 1: a zero divisor breaks a minimum rule, checked first.
    """
    values: dict[str, object] = {
        name: draw(st.integers(1 if name in ("num_heads", "num_devices") else -1, 12)) for name in INT_FIELDS
    }
    values["strategy"] = draw(st.sampled_from(STRATEGIES + ("pipeline",)))
    values["device"] = draw(st.sampled_from(DEVICES + ("tpu",)))
    values["precision"] = draw(st.sampled_from(PRECISIONS))
    values["arch"] = draw(st.sampled_from(ARCHS + ("rnn",)))
    not_auto = st.integers(-3, 12).filter(lambda v: v != AUTO)  # AUTO is resolved on construction, not a value
    values["vocab_size"] = draw(not_auto)
    values["peft"] = draw(st.sampled_from(PEFTS + ("prefix",)))
    values["lora_rank"] = draw(not_auto)
    values["grad_checkpointing"] = draw(st.booleans())
    return values


def _columns(rows: list[dict[str, object]]) -> dict[str, np.ndarray]:
    frame = pd.DataFrame(rows)
    return {
        name: frame[name].to_numpy(dtype=float if name in (*INT_FIELDS, *KIND_INT_FIELDS) else object)
        for name in frame.columns
    }


@settings(max_examples=300, deadline=None)
@given(st.lists(configs(), min_size=1, max_size=20))
def test_scalar_and_vector_checks_agree(rows: list[dict[str, object]]) -> None:
    columns = _columns(rows)
    for rule in RULES:
        vector = np.asarray(rule.vector(columns), dtype=bool)
        scalar = np.array([bool(rule.scalar(row)) for row in rows])
        np.testing.assert_array_equal(vector, scalar, err_msg=rule.name)


@settings(max_examples=300, deadline=None)
@given(configs())
def test_one_row_is_checked_by_the_scalar_forms_as_the_vectorised_table_checks_it(values: dict[str, object]) -> None:
    one = first_broken_rows(_columns([values]))  # one row: the scalar forms
    two = first_broken_rows(_columns([values, values]))  # the vectorised forms
    assert (one is None) == (two is None)
    if one is not None and two is not None:
        assert one[0] is two[0] and one[1].tolist() == [0] and two[1].tolist() == [0, 1]


@settings(max_examples=300, deadline=None)
@given(configs())
def test_train_config_reports_the_first_broken_rule_of_the_table(values: dict[str, object]) -> None:
    expected = first_broken(values)
    config = TrainConfig(**values)  # type: ignore[arg-type]
    if expected is None:
        config.validate()
        return
    with pytest.raises(ConfigError) as caught:
        config.validate()
    assert caught.value.field == expected.field
    assert caught.value.rule == expected.describe(values)


def test_each_rule_has_a_distinct_name_and_names_a_field_it_reads() -> None:
    assert len({rule.name for rule in RULES}) == len(RULES)
    for rule in RULES:
        assert rule.field in rule.fields, rule.name
    assert {rule.name for rule in PLACEMENT_RULES} == {
        "single_on_one_device",
        "parallel_on_two_or_more",
        "tp_splits_heads",
        "tp_splits_ffn",
        "data_parallel_splits_batch",
    }


@pytest.mark.parametrize(
    "changes",
    [
        {"hidden_size": 500},
        {"strategy": "single", "num_devices": 2},
        {"strategy": "tp", "num_devices": 1},
        {"strategy": "tp", "num_devices": 3},
        {"strategy": "tp", "num_devices": 4, "ffn_size": 2046},
        {"strategy": "ddp", "num_devices": 3},
        {"num_layers": 0},
    ],
)
def test_served_validation_says_what_the_train_config_says(changes: dict[str, object]) -> None:
    values = {**dataclasses.asdict(TrainConfig(4, 512, 8, 2048, 128, 16, strategy="fsdp", num_devices=2)), **changes}
    with pytest.raises(ConfigError) as config_error:
        TrainConfig(**values).validate()  # type: ignore[arg-type]
    row = {k: v for k, v in values.items() if k not in ("warmup_steps", "device", "precision", *KIND_PARAM_NAMES)}
    with pytest.raises(MlflowException) as served_error:
        predict_frame(LAW, pd.DataFrame([row]))
    assert served_error.value.message == f"{config_error.value.field} (row 0): {config_error.value.rule}"


def test_recommender_candidates_are_exactly_the_configs_train_accepts() -> None:
    jobs = [
        {"num_layers": 4, "hidden_size": 512, "num_heads": 8, "ffn_size": 2048, "seq_len": 128, "batch_size": 16},
        {"num_layers": 2, "hidden_size": 96, "num_heads": 6, "ffn_size": 390, "seq_len": 64, "batch_size": 9},
        {"num_layers": 2, "hidden_size": 120, "num_heads": 12, "ffn_size": 480, "seq_len": 64, "batch_size": 30},
    ]
    jobs = [{**job, "num_steps": 20} for job in jobs]
    cands = candidates(LAW, 8)
    sizes = {k: np.array([j[k] for j in jobs], dtype=float) for k in jobs[0]}
    valid = evaluate_candidates(LAW, sizes, cands, lambda jobs: jobs).valid
    for i, job in enumerate(jobs):
        for j, (strategy, n) in enumerate(zip(cands.strategy, cands.num_devices)):
            config = TrainConfig(**job, strategy=strategy, num_devices=int(n))
            accepted = first_broken(dataclasses.asdict(config)) is None
            assert valid[i, j] == accepted, (job, strategy, n)


def test_first_broken_rows_lists_every_offending_row() -> None:
    columns = {"hidden_size": np.array([64.0, 66.0, 64.0, 70.0]), "num_heads": np.array([4.0, 4.0, 4.0, 4.0])}
    rule, rows = first_broken_rows(columns, [r for r in RULES if r.name == "heads_divide_hidden"])
    assert rule.field == "hidden_size" and rows.tolist() == [1, 3]
    assert rule.describe({"hidden_size": 66.0, "num_heads": 4.0}) == "must be divisible by num_heads (66 % 4 != 0)"
