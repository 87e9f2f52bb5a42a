"""What a model family declares once, beside its code: the one table (TABLE) that the registry, the hybrids, the
verdict, the tune space and `nmtbench check` read. Each family's file ends with its entry, `register(Family(...))`;
models/registry.py imports every built-in family's file, so the table holds them all before anything reads it.

A family with two halves names them: its encoder and decoder halves are mixins of VocabularySeq2Seq whose layers
are the model's own attributes, so a family's model and a hybrid holding one of its halves give that half the
same checkpoint names (models/hybrid.py pairs any family's encoder with any other's decoder from these entries).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from nmtbench.blocks import Block

# the mechanisms the verdict contrasts, a half's or a whole model's; self-attention first, the question's subject
MECHANISMS = ("self-attention", "recurrence", "convolution")


@dataclass(frozen=True)
class Family:
    name: str  # what a model block's `family` says
    config: type[Block]  # its keys and their checks
    build: Callable  # build(cfg, vocab) -> the model: its class, or what picks one (the hybrid's pair)
    encoder: type | None = None  # its halves; None for a model without two (decoder_only, a hybrid itself)
    decoder: type | None = None
    mechanism: str | None = None  # one of MECHANISMS: what the family stands for in the verdict
    # how it draws its vocabulary matrices: unit, N(0, 1) read as drawn (PyTorch's embeddings); or scaled, std
    # width^-0.5 read times sqrt(width) (the Transformer's). A hybrid of a unit and a scaled half draws them scaled
    # and its unit half reads them times sqrt(width), so each half sees the embeddings at its own family's scale.
    embeddings: Literal["unit", "scaled"] = "unit"

    @property
    def halves(self) -> bool:
        return self.encoder is not None and self.decoder is not None


TABLE: dict[str, Family] = {}  # name -> its entry, by name: messages list them the same whatever imported first


def register(family: Family) -> Family:
    """Adds a family to TABLE, refusing a second family of the same name."""
    if family.name in TABLE and TABLE[family.name] != family:
        raise ValueError(f"two families named {family.name}: rename one")
    if family.mechanism is not None and family.mechanism not in MECHANISMS:
        raise ValueError(f"family {family.name}: mechanism {family.mechanism!r} is not one of {', '.join(MECHANISMS)}")
    TABLE[family.name] = family
    for name in sorted(TABLE):
        TABLE[name] = TABLE.pop(name)
    return family


def with_halves() -> dict[str, Family]:
    """The families a hybrid can take a half of."""
    return {name: family for name, family in TABLE.items() if family.halves}
