"""A train run's description: one paragraph the MLflow UI shows at the top of the run's page.

It says what ran (the placement first, then the model and the job), what was measured
(energy in joules and time in seconds, the two numbers the law learns) and by which meter,
so that a reader of the runs table knows what one row is without opening its params.
"""

from __future__ import annotations

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.core.schema import M_ENERGY_J, M_TIME_S

ESTIMATE_SOURCE = "estimate"


def _model(config: TrainConfig) -> str:
    """``a 2-layer BERT-style encoder (hidden 64, 2 heads, FFN 256)``, with LoRA and checkpointing where set."""
    kind = "GPT-2-style decoder" if config.arch == "decoder" else "BERT-style encoder"
    extras = [
        "LoRA adapters" if config.peft == "lora" else "",
        "gradient checkpointing" if config.grad_checkpointing else "",
    ]
    tail = "".join(f", {e}" for e in extras if e)
    return (
        f"a {config.num_layers}-layer {kind} (hidden {config.hidden_size}, {config.num_heads} heads, "
        f"FFN {config.ffn_size}{tail})"
    )


def _energy(joules: float) -> str:
    """Joules with a unit that keeps the figure readable (J, kJ, MJ)."""
    for unit, scale in (("MJ", 1e6), ("kJ", 1e3)):
        if abs(joules) >= scale:
            return f"{joules / scale:.3g} {unit}"
    return f"{joules:.3g} J"


def train_description(
    config: TrainConfig, energy_j: float | None, time_s: float, energy_source: str, energy_error: str | None
) -> str:
    """The paragraph for a train run of ``config``: ``energy_j`` joules (None: not measured) in ``time_s`` seconds."""
    what = (
        f"**{config.strategy} x{config.num_devices}**: {_model(config)} trained {config.num_steps} steps of batch "
        f"{config.batch_size} at sequence length {config.seq_len} on {config.device} ({config.precision})."
    )
    samples = config.batch_size * config.num_steps
    if energy_j is None:
        measured = f"Time **{time_s:.3g} s**; energy not measured ({energy_error or 'no reading'})."
    else:
        meter = (
            "the `estimate` meter: a labelled estimate from CPU time, not a hardware counter"
            if energy_source == ESTIMATE_SOURCE
            else f"meter `{energy_source}`"
        )
        measured = (
            f"Measured **{_energy(energy_j)}** in **{time_s:.3g} s** ({meter}); {energy_j / samples:.3g} J per sample."
        )
    return (
        f"{what} {measured} `{M_ENERGY_J}` and `{M_TIME_S}` are the numbers the fit learns from; "
        "the params hold the configuration, the tags how it was measured."
    )
