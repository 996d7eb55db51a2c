"""Read the roofline shape (layers, width, FFN size, heads) from a Hugging Face model config.

Each field is looked up under the names the common families use, first match wins:

============  ===============================================================
field         config attribute names
============  ===============================================================
num_layers    ``num_hidden_layers`` (BERT, Llama), ``n_layer`` (GPT-2), ``num_layers``, ``n_layers``
hidden_size   ``hidden_size``, ``n_embd`` (GPT-2), ``d_model``, ``dim``
num_heads     ``num_attention_heads``, ``n_head`` (GPT-2), ``num_heads``, ``n_heads``
ffn_size      ``intermediate_size`` (BERT, Llama), ``n_inner`` (GPT-2), ``ffn_dim``, ``d_ff``, ``hidden_dim``
============  ===============================================================

GPT-2 leaves ``n_inner`` at ``None`` to mean 4 x ``n_embd``; that rule is applied. A
field found under none of the names is reported missing (the caller warns and logs
energy and time without it). :func:`batch_shape` reads the rows and padded length of one
forward call's batch, for the integrations' forward pre-hooks.
"""

from __future__ import annotations

from typing import Any

SHAPE_ALIASES: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "num_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "ffn_size": ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "hidden_dim"),
}


def model_shape(model: Any) -> tuple[dict[str, int], list[str]]:
    """The shape fields of ``model.config`` that could be read, and the names of those that could not."""
    config = getattr(model, "config", None)
    shape: dict[str, int] = {}
    for field, names in SHAPE_ALIASES.items():
        value = _first_int(config, names) if config is not None else None
        if value is not None:
            shape[field] = value
    if "ffn_size" not in shape and getattr(config, "model_type", None) == "gpt2" and "hidden_size" in shape:
        shape["ffn_size"] = 4 * shape["hidden_size"]  # GPT-2: n_inner=None means 4 * n_embd
    missing = [field for field in SHAPE_ALIASES if field not in shape]
    return shape, missing


def batch_shape(args: tuple, kwargs: dict) -> tuple[int, int] | None:
    """(rows, padded sequence length in tokens) of one forward call's batch, or None.

    Read from the forward pre-hook's arguments: ``input_ids`` (keyword or first positional),
    else ``inputs_embeds``; None when neither has a shape of two or more dimensions.
    """
    ids = kwargs.get("input_ids", args[0] if args else None)
    if ids is None:
        ids = kwargs.get("inputs_embeds")
    shape = getattr(ids, "shape", None)
    if shape is not None and len(shape) >= 2:
        return int(shape[0]), int(shape[1])
    return None


def _first_int(config: Any, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = _attribute(config, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _attribute(config: Any, name: str) -> Any:
    """``config.name`` without triggering a config's attribute map on names it lacks."""
    if isinstance(config, dict):
        return config.get(name)
    try:
        return getattr(config, name, None)
    except Exception:
        return None
