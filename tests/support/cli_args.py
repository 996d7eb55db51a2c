"""Command-line arguments the CLI tests share: the smallest BERT shape a train command accepts."""

from __future__ import annotations

TINY_SHAPE: list[str] = [
    "--num-layers",
    "1",
    "--hidden-size",
    "32",
    "--num-heads",
    "2",
    "--ffn-size",
    "64",
    "--seq-len",
    "8",
    "--batch-size",
    "4",
]
"""L=1, d=32, h=2, ff=64, S=8, B=4: a train run of a few milliseconds per step on the CPU."""
