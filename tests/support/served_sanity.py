"""The served-law properties the roofline tests check on random jobs (hypothesis).

Every registered law must give, for any job a request can reach: a finite, positive
energy (and interval); no less energy when a size grows; and, once fixed costs are
amortised, about twice the energy for twice the steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import strategies as st

from mlflow_roofline.law.fitted import FittedLaw
from mlflow_roofline.serve.predict import predict_frame

GROWING_FIELDS = ["num_layers", "hidden_size", "seq_len", "batch_size"]


@st.composite
def served_jobs(draw: st.DrawFn) -> dict[str, object]:
    """A job every rule of the served model accepts: d = 64 h, ff = 4 d, h, B divisible by N."""
    heads = draw(st.integers(1, 24))
    strategy = draw(st.sampled_from(["single", "ddp", "fsdp", "tp"]))
    devices = 1 if strategy == "single" else draw(st.sampled_from([2, 4]))
    return {
        "num_layers": draw(st.integers(1, 48)),
        "hidden_size": 64 * heads * devices,
        "num_heads": heads * devices,
        "ffn_size": 256 * heads * devices,
        "seq_len": draw(st.integers(8, 2048)),
        "batch_size": devices * draw(st.integers(1, 64)),
        "num_steps": draw(st.integers(1, 10_000)),
        "strategy": strategy,
        "num_devices": devices,
    }


def check_served_law(law: FittedLaw, job: dict[str, object], field: str, factor: int, steps_rel: float) -> None:
    """Assert the properties for ``job`` and the job with ``field`` grown ``factor`` times.

    ``steps_rel``: the relative tolerance of "twice the steps, twice the energy" at 10,000
    steps (about 0 for a law whose every term scales with the steps).
    """
    bigger = dict(job)
    bigger[field] = int(job[field]) * factor  # type: ignore[call-overload]
    if field == "hidden_size":  # the heads and the FFN grow with the width, as the rules want
        bigger["num_heads"] = int(job["num_heads"]) * factor  # type: ignore[call-overload]
        bigger["ffn_size"] = int(job["ffn_size"]) * factor  # type: ignore[call-overload]
    amortised, doubled = {**job, "num_steps": 10_000}, {**job, "num_steps": 20_000}
    out = predict_frame(law, pd.DataFrame([job, bigger, amortised, doubled]))
    energy = out["energy_j"].to_numpy()
    assert np.all(np.isfinite(energy) & (energy > 0))
    assert np.all(np.isfinite(out["energy_j_lower"]) & np.isfinite(out["energy_j_upper"]))
    assert energy[1] >= energy[0] * (1 - 1e-9)
    assert energy[3] / energy[2] == pytest.approx(2.0, rel=steps_rel)
