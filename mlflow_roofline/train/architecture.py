"""Where each model kind keeps its parts: the layer list, the projections TP splits and LoRA adapts.

Two kinds (:data:`~mlflow_roofline.core.schema.ARCHS`):

- ``encoder``: ``BertForSequenceClassification``; a layer's attention is ``attention.self.query``,
  ``.key``, ``.value`` (each d -> d) and ``attention.output.dense`` (d -> d), its feed-forward
  block ``intermediate.dense`` (d -> ff) and ``output.dense`` (ff -> d);
- ``decoder``: ``GPT2LMHeadModel`` with its ``Conv1D`` projections turned into the equivalent
  ``nn.Linear`` (:mod:`mlflow_roofline.train.decoder`); a block's attention is ``attn.c_attn``
  (d -> 3d, the fused query, key and value) and ``attn.c_proj`` (d -> d), its MLP ``mlp.c_fc``
  (d -> ff) and ``mlp.c_proj`` (ff -> d).

Tensor parallel splits both the same way (Megatron): the projections into the attention and
the MLP column-wise, those out of them row-wise. LoRA adapts exactly these projections, so
that the adapters' size (:func:`mlflow_roofline.core.proxies.proxy_params_trainable`) is
``rank x (in + out)`` summed over them.
"""

from __future__ import annotations

import dataclasses
import typing

from torch import nn

COLUMN = "column"
"""A projection split by output features (each rank computes a slice of heads or MLP units)."""
ROW = "row"
"""A projection split by input features (partial sums all-reduced)."""


@dataclasses.dataclass(frozen=True)
class Architecture:
    """The parts of one model kind.

    Attributes:
        layers: path of the ``nn.ModuleList`` of transformer layers inside the model.
        projections: submodule of a layer -> how tensor parallel splits it (:data:`COLUMN`
            or :data:`ROW`); the same submodules get LoRA adapters.
        attention: submodule of a layer whose heads tensor parallel divides among ranks.
        trainable_head: top-level modules trained beside LoRA adapters (the encoder's
            freshly initialised classifier), empty when none.
    """

    layers: str
    projections: dict[str, str]
    attention: str
    trainable_head: tuple[str, ...] = ()

    def lora_target_pattern(self) -> str:
        """A regular expression (peft's ``target_modules``) that matches each layer's projections only."""
        names = "|".join(name.replace(".", r"\.") for name in self.projections)
        return rf".*{self.layers.replace('.', chr(92) + '.')}\.\d+\.({names})"


ARCHITECTURES: dict[str, Architecture] = {
    "encoder": Architecture(
        layers="bert.encoder.layer",
        projections={
            "attention.self.query": COLUMN,
            "attention.self.key": COLUMN,
            "attention.self.value": COLUMN,
            "attention.output.dense": ROW,
            "intermediate.dense": COLUMN,
            "output.dense": ROW,
        },
        attention="attention.self",
        trainable_head=("classifier",),
    ),
    "decoder": Architecture(
        layers="transformer.h",
        projections={"attn.c_attn": COLUMN, "attn.c_proj": ROW, "mlp.c_fc": COLUMN, "mlp.c_proj": ROW},
        attention="attn",
    ),
}
"""Each arch's parts, by its schema name."""


def arch_of(model: nn.Module) -> str:
    """The arch whose layer list ``model`` holds (a wrapped or adapted model keeps its paths).

    Raises:
        ValueError: a model with none of the known layer lists.
    """
    for arch, parts in ARCHITECTURES.items():
        try:
            model.get_submodule(parts.layers)
        except AttributeError:
            continue
        return arch
    raise ValueError(f"{type(model).__name__} has none of the layer lists {[a.layers for a in ARCHITECTURES.values()]}")


def layers_of(model: nn.Module) -> nn.ModuleList:
    """The transformer layers of ``model``, in order."""
    return typing.cast(nn.ModuleList, model.get_submodule(ARCHITECTURES[arch_of(model)].layers))
