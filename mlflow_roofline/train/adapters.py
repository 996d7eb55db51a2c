"""LoRA adapters through ``peft``: which weights a ``peft=lora`` run trains.

:func:`add_lora` injects rank-``lora_rank`` adapters into every layer's attention and MLP
projections (:class:`~mlflow_roofline.train.architecture.Architecture.projections`) and
freezes every other weight, except the encoder's classifier (freshly initialised, so it is
trained beside the adapters through peft's ``modules_to_save``). The model keeps its own
class and module paths (peft replaces each adapted ``nn.Linear`` in place by a LoRA layer
holding it as ``base_layer``), so the parallel strategies find its layers where they were.
Adapters start as peft makes them (``lora_B`` zero): the model's function is unchanged at
step 0.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING

from torch import nn

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.train.architecture import ARCHITECTURES

if TYPE_CHECKING:
    # imported lazily at run time: transformers is slow to load
    from transformers import PreTrainedModel

LORA_ALPHA_PER_RANK = 2
"""``lora_alpha = 2 x rank``: a scaling of 2 whatever the rank (a common choice)."""
ADAPTER = "default"
"""peft's name of the one adapter."""


def add_lora(model: PreTrainedModel, config: TrainConfig) -> PreTrainedModel:
    """``model`` with LoRA adapters of rank ``config.lora_rank`` on its projections, the rest frozen."""
    from peft import LoraConfig, get_peft_model  # peft imports transformers: only for a LoRA run

    parts = ARCHITECTURES[config.arch]
    lora = LoraConfig(
        r=config.lora_rank,
        lora_alpha=LORA_ALPHA_PER_RANK * config.lora_rank,
        lora_dropout=0.0,
        bias="none",
        target_modules=parts.lora_target_pattern(),
        modules_to_save=list(parts.trainable_head) or None,
    )
    # the model itself, adapted in place (the PeftModel around it only adds save/load helpers)
    return typing.cast("PreTrainedModel", get_peft_model(model, lora, adapter_name=ADAPTER).get_base_model())


def is_lora_layer(module: nn.Module) -> bool:
    """Whether ``module`` is a projection peft wrapped (it holds the original as ``base_layer``)."""
    return hasattr(module, "base_layer") and hasattr(module, "lora_A")
