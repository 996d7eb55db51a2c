"""The served model's optional kind columns: defaults, refusals naming the field, and what they change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from law_factory import make_law, query
from mlflow.exceptions import MlflowException

from mlflow_roofline.core.schema import LAW_INPUT_NAMES
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.job_kind import job_kind
from mlflow_roofline.serve.placement_search import recommend_frame
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.testing.mixed_arch import MIXED_GPU, generate_mixed_arch_runs
from mlflow_roofline.testing.roofline_generator import generate_roofline_runs

LEGACY_LAW = Path(__file__).parents[1] / "data" / "legacy_model_0_1_0" / "artifacts" / "fitted_law.json"
DEFAULTS = {"arch": "encoder", "vocab_size": 30522, "peft": "none", "lora_rank": 0, "grad_checkpointing": False}


@pytest.fixture(scope="module")
def paper_law() -> FittedLaw:
    return make_law()


@pytest.fixture(scope="module")
def mixed_law() -> FittedLaw:
    return fit_hardware(generate_mixed_arch_runs(16, seed=1), MIXED_GPU).law


def test_absent_or_empty_kind_columns_take_the_defaults_of_older_runs() -> None:
    kind = job_kind(pd.DataFrame({"num_layers": [2, 2, 2]}))
    assert list(kind["arch"]) == ["encoder"] * 3 and list(kind["vocab_size"]) == [30522.0] * 3
    assert list(kind["lora_rank"]) == [0.0] * 3 and not kind["grad_checkpointing"].any()
    partial = job_kind(
        pd.DataFrame(
            {
                "arch": ["decoder", None, "decoder"],
                "vocab_size": [None, None, 1000],
                "peft": ["lora", "none", None],
                "grad_checkpointing": ["true", None, False],
            }
        )
    )
    assert list(partial["arch"]) == ["decoder", "encoder", "decoder"]
    assert list(partial["vocab_size"]) == [50257.0, 30522.0, 1000.0]  # the arch's default
    assert list(partial["lora_rank"]) == [8.0, 0.0, 0.0]  # the peft's default
    assert list(partial["grad_checkpointing"]) == [True, False, False]


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("arch", "gpt", "arch (row 0): must be one of encoder, decoder, got 'gpt'"),
        ("arch", 3, "arch (row 0): must be text, got 3"),
        ("peft", "qlora", "peft (row 0): must be one of none, lora, got 'qlora'"),
        ("vocab_size", 2.5, "vocab_size (row 0): must be an integer, got 2.5"),
        ("vocab_size", 0, "vocab_size (row 0): must be a positive integer, got 0"),
        ("lora_rank", 4, "lora_rank (row 0): must be at least 1 under peft lora and 0 under peft none"),
        ("grad_checkpointing", "maybe", "grad_checkpointing (row 0): must be true or false, got 'maybe'"),
    ],
)
def test_a_bad_kind_value_is_refused_naming_the_field(
    paper_law: FittedLaw, column: str, value: object, message: str
) -> None:
    frame = pd.DataFrame([{**query(), column: value}])
    with pytest.raises(MlflowException, match=message.replace("(", r"\(").replace(")", r"\)")):
        predict_frame(paper_law, frame)


def test_a_law_fitted_before_the_kind_params_serves_a_request_without_them() -> None:
    legacy = FittedLaw.from_json(LEGACY_LAW.read_text())
    plain = pd.DataFrame([query(strategy="ddp", num_devices=2)])
    out = predict_frame(legacy, plain)
    said = predict_frame(legacy, plain.assign(**DEFAULTS))
    assert np.isfinite(out["energy_j"]).all() and out["energy_j"].iloc[0] > 0
    pd.testing.assert_frame_equal(out, said)  # the defaults are what no column means


def test_a_decoder_request_changes_the_answer_under_a_law_fitted_on_mixed_runs(mixed_law: FittedLaw) -> None:
    job = {
        "num_layers": 8,
        "hidden_size": 768,
        "num_heads": 12,
        "ffn_size": 3072,
        "seq_len": 256,
        "batch_size": 16,
        "num_steps": 20,
        "strategy": "single",
        "num_devices": 1,
    }
    frame = pd.DataFrame(
        [job, {**job, "arch": "decoder", "vocab_size": 50257}, {**job, "arch": "decoder", "vocab_size": 128256}]
    )
    energy = predict_frame(mixed_law, frame)["energy_j"].to_numpy()
    assert energy[1] > 1.05 * energy[0]  # a vocabulary head costs more than a classification head
    assert energy[2] > energy[1]  # and more with a bigger vocabulary
    lora = predict_frame(mixed_law, pd.DataFrame([{**job, "arch": "decoder", "peft": "lora", "lora_rank": 8}]))
    assert lora["energy_j"].iloc[0] < energy[1]  # frozen weights: no gradients, no optimizer state
    ranked = recommend_frame(mixed_law, frame.iloc[[1]].drop(columns=["strategy", "num_devices"]))
    assert np.isfinite(ranked["energy_j"]).all()


def test_a_kind_no_run_measured_is_flagged_extrapolated() -> None:
    runs = generate_roofline_runs(8, seed=0)
    law = fit_hardware(runs, "Roofline GPU").law  # encoders only
    assert law.ranges["arch_decoder"] == [0.0, 0.0]
    job = runs.iloc[0][list(LAW_INPUT_NAMES)].to_dict()
    out = predict_frame(law, pd.DataFrame([job, {**job, "arch": "decoder"}, {**job, "grad_checkpointing": True}]))
    assert list(out["extrapolated"]) == [False, True, True]
