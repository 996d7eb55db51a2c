"""FLOPs of one real BERT training step, counted by ``torch.utils.flop_counter``.

:func:`count_step_flops` builds the workload's model on the ``meta`` device and runs one
forward and backward pass of a global batch under ``FlopCounterMode``: the same
operators as a real step, dispatched on shapes only, so counting costs milliseconds even
for the largest configurations. The meta device matters for one more reason: on CPU,
scaled-dot-product attention runs a fused kernel the flop registry does not know, and
the attention FLOPs would silently be missing; on meta it decomposes into the matmuls
it does (the tests check the meta count against a real CPU step with eager attention).
The optimizer update (element-wise, O(params)) is not counted, as is usual.

What the count is, per token, for a model of L layers (matmuls only, 2 FLOPs per
multiply-add; backward = 2 x forward):

    counted / token = 3 L (8 d^2 + 4 d ff + 4 S d) + (pooler + classifier) / S

against the paper's proxy ``C_tok = 12 L d^2 + 3 L S d``. For the paper's grid (ff = 4 d)
that is ``(72 L d^2 + 12 L S d) / (12 L d^2 + 3 L S d)``: between 4 (attention-bound,
S >> d) and 6 (projection-bound, d >> S). The pooler and classifier add at most
``(6 d^2 + 12 d) / S`` per token, a share below ``1 / (12 L S)`` + a little, i.e. at most
~1 % for L S >= 8. Hence the band :data:`RATIO_BAND` = [4, 6.1] for ff = 4 d and L S >= 8.
The proxy is an order-of-magnitude compute measure (a forward-pass count with an
attention term of its own convention), not an operation count; the band is what ties it
to the work a step really does.
"""

from __future__ import annotations

import contextlib

from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.flop_counter import FlopCounterMode

from mlflow_roofline.core.config import TrainConfig
from mlflow_roofline.train.workload import DEFAULT_SEED, NUM_LABELS, build_model, config_batch

RATIO_BAND: tuple[float, float] = (4.0, 6.1)
"""counted / proxy FLOPs of a training step, for ff = 4 d and L S >= 8 (see module doc)."""


def count_step_flops(config: TrainConfig, device: str = "meta", attn_implementation: str | None = None) -> int:
    """FLOPs of one training step (forward + backward) on the global batch, in FLOPs.

    Args:
        config: the configuration; its strategy and device count do not change the
            work of a step (the counted model is the unsplit one).
        device: ``meta`` (shapes only, the default) or a real device to run the step on.
        attn_implementation: override the model's attention kernel (``eager``, ``sdpa``).
    """
    model = build_model(config, device=device, seed=DEFAULT_SEED)
    if attn_implementation is not None:
        model.set_attn_implementation(attn_implementation)
    input_ids, labels = config_batch(config, 0, DEFAULT_SEED)
    input_ids, labels = input_ids.to(device), labels.to(device)
    # On meta the decoder's batch enters as fake tensors: code that would read a value (its
    # causal mask checks its positions for packed sequences) sees a trace and skips the read.
    # The encoder reads none, and plain meta tensors count the same operators 2-4x faster.
    on_fake = device == "meta" and config.arch == "decoder"
    fake = FakeTensorMode(allow_non_fake_inputs=True) if on_fake else contextlib.nullcontext()
    with fake:
        if isinstance(fake, FakeTensorMode):
            input_ids, labels = fake.from_tensor(input_ids), fake.from_tensor(labels)
        with FlopCounterMode(display=False) as counter:
            loss = model(input_ids=input_ids, labels=labels).loss
            loss.backward()
    return int(counter.get_total_flops())


def analytic_step_flops(config: TrainConfig) -> int:
    """The matmul FLOPs of one encoder training step, by hand (what :func:`count_step_flops` should count).

    Full fine-tuning without checkpointing (the paper's workload).

    Per layer and token, forward: Q, K, V, output projections ``8 d^2``; feed-forward
    ``4 d ff``; scores and weighted values ``4 S d``. Pooler ``2 d^2`` and classifier
    ``2 d labels`` per sample. Backward doubles each (input and weight gradients).
    """
    L, d, ff, S, B = config.num_layers, config.hidden_size, config.ffn_size, config.seq_len, config.batch_size
    per_token = L * (8 * d * d + 4 * d * ff + 4 * S * d)
    per_sample = 2 * d * d + 2 * d * NUM_LABELS
    return 3 * (B * S * per_token + B * per_sample)


def flops_counted(config: TrainConfig) -> float:
    """``flops_counted`` of a run: the counted FLOPs of one step times ``num_steps``."""
    return float(count_step_flops(config) * config.num_steps)
