"""``predict`` asks about every kind of job the served model answers: a decoder, LoRA, checkpointing, a precision.

The options are the job table's request columns; a law fitted on encoders and decoders with and
without LoRA answers a decoder query differently from an encoder one of the same sizes, exactly
as the model asked in process does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from support.registered_law import registered_law

from mlflow_roofline.cli import main
from mlflow_roofline.fit.hardware_fit import fit_hardware
from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.predict import predict_frame
from mlflow_roofline.testing.mixed_arch import MIXED_GPU, generate_mixed_arch_runs

JOB = {"num_layers": 6, "hidden_size": 512, "num_heads": 8, "ffn_size": 2048, "seq_len": 256, "batch_size": 16}
DECODER_LORA = ("--arch", "decoder", "--vocab-size", "50257", "--peft", "lora", "--lora-rank", "8")


@pytest.fixture(scope="module")
def law() -> FittedLaw:
    return fit_hardware(generate_mixed_arch_runs(16, seed=1), MIXED_GPU).law


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory, store_template: Path, law: FittedLaw) -> Iterator[str]:
    yield from registered_law(tmp_path_factory, store_template, law)


def _ask(capsys: pytest.CaptureFixture[str], model: str, *args: str) -> tuple[int, str, str]:
    sizes = [arg for name, value in JOB.items() for arg in (f"--{name.replace('_', '-')}", str(value))]
    code = 0
    try:
        main(["predict", "--model", model, *sizes, "--num-steps", "100", "--json", *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_predict_answers_a_decoder_lora_job_as_the_model_does(
    registered: str, law: FittedLaw, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _ask(capsys, registered, *DECODER_LORA)
    assert code == 0, err
    decoder = json.loads(out)
    frame = pd.DataFrame(
        [{**JOB, "num_steps": 100, "strategy": "single", "num_devices": 1, "arch": "decoder", "vocab_size": 50257}]
    ).assign(peft="lora", lora_rank=8)
    assert decoder["energy_j"] == pytest.approx(predict_frame(law, frame).iloc[0]["energy_j"], rel=1e-12)

    code, out, _ = _ask(capsys, registered)
    encoder = json.loads(out)
    assert code == 0
    assert abs(decoder["energy_j"] / encoder["energy_j"] - 1) > 0.01  # the law tells the two kinds apart

    code, out, _ = _ask(capsys, registered, "--grad-checkpointing", "true", "--precision", "bf16")
    assert code == 0 and json.loads(out)["energy_j"] > 0


def test_a_kind_option_out_of_its_rules_is_refused_naming_it(
    registered: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _ask(capsys, registered, "--peft", "none", "--lora-rank", "4")
    assert code == 2
    assert err.strip().startswith("Error: lora_rank (row 0): must be at least 1 under peft lora and 0 under peft none")
    code, _, err = _ask(capsys, registered, "--arch", "rnn")
    assert code == 2 and "'rnn' is not one of 'encoder', 'decoder'" in err
