"""A linear law's term names: categorical levels are data, whatever characters they hold."""

from __future__ import annotations

import numpy as np
import pytest

from mlflow_roofline.law.linear import LinearLaw, categorical_factor, split_factors

LEVELS = ("fsdp", "cpu:Intel Xeon [8 cores], v1.2", 'gpu]:[T.x "q" \\ y', "a.b,c d")


@pytest.mark.parametrize("level", LEVELS)
def test_a_level_reads_back_as_written_alone_and_in_an_interaction(level: str) -> None:
    term = categorical_factor("hardware", level)
    assert split_factors(f"log_C:{term}:log_M") == ["log_C", term, "log_M"]
    law = LinearLaw("y ~ x", ["Intercept", term, f"log_C:{term}"], [1.0, 2.0, 3.0], np.eye(3).tolist(), 0.1, 10)
    features = {"hardware": np.array([level, "other"], dtype=object), "log_C": np.array([5.0, 5.0])}
    np.testing.assert_allclose(law.mean(features), [1.0 + 2.0 + 15.0, 1.0])


def test_plain_levels_keep_patsys_names_and_old_laws_still_read() -> None:
    assert categorical_factor("strategy", "fsdp") == "strategy[T.fsdp]"
    law = LinearLaw("y ~ x", ["Intercept", "strategy[T.tp]:log_eta", "hardware[T.Sim Base]"], [1.0, 2.0, 4.0], [], 0, 1)
    features = {
        "strategy": np.array(["tp", "ddp"], dtype=object),
        "hardware": np.array(["Sim Base", "x"], dtype=object),
        "log_eta": np.array([-1.0, -1.0]),
    }
    np.testing.assert_allclose(law.mean(features), [1.0 - 2.0 + 4.0, 1.0])
