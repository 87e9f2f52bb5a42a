"""What a model family declares once, beside its config: the one table (TABLE) that the registry, the hybrids, the
verdict, the tune space and `nmtbench check` read. Each family's config file (models/<family>_config.py) ends with
its entry, `register(Family(...))`; models/registry.py imports every built-in family's config file, so the table
holds them all before anything reads it.

An entry names the family's model, and its halves, by `module:name` path, as an own model is named: the model file
imports torch, and is imported only when a model is built, so what reads the table alone (the verdict, check)
loads none of it.

A family with two halves names them: its encoder and decoder halves are mixins of VocabularySeq2Seq whose layers
are the model's own attributes, so a family's model and a hybrid holding one of its halves give that half the
same checkpoint names (models/hybrid.py pairs any family's encoder with any other's decoder from these entries).
Its config then says what the hybrid's config checks without the layers: `embedding_width`, the width of the
embeddings its halves read, and where its decoder cannot follow every encoder, `check_after`
(models/hybrid_config.py).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

from nmtbench.param_blocks import Block

# the mechanisms the verdict contrasts, a half's or a whole model's; self-attention first, the question's subject
MECHANISMS = ("self-attention", "recurrence", "convolution")


@dataclass(frozen=True)
class Family:
    name: str  # what a model block's `family` says
    config: type[Block]  # its keys and their checks
    build: str  # module:name of build(cfg, vocab) -> the model: its class, or what picks one (the hybrid's pair)
    encoder: str | None = None  # module:name of its halves; None for a model without two (decoder_only, a hybrid)
    decoder: str | None = None
    # the keys of its config each half reads: all that a hybrid's encoder or decoder block may set
    encoder_keys: tuple[str, ...] = ()
    decoder_keys: tuple[str, ...] = ()
    # of the decoder's, how the half meets the encoder rather than what it is: two models whose decoders differ only
    # here share the decoder half (a hybrid cannot start from a final state its encoder does not have)
    joining_keys: tuple[str, ...] = ()
    mechanism: str | None = None  # one of MECHANISMS: what the family stands for in the verdict
    # how it draws its vocabulary matrices: unit, N(0, 1) read as drawn (PyTorch's embeddings); or scaled, std
    # width^-0.5 read times sqrt(width) (the Transformer's). A hybrid of a unit and a scaled half draws them scaled
    # and its unit half reads them times sqrt(width), so each half sees the embeddings at its own family's scale.
    embeddings: Literal["unit", "scaled"] = "unit"

    @property
    def halves(self) -> bool:
        return self.encoder is not None and self.decoder is not None

    def keys_read(self, side: str) -> tuple[str, ...]:
        """The keys of its config that its encoder or decoder half reads: all that a hybrid's half may set."""
        return self.encoder_keys if side == "encoder" else self.decoder_keys


def loaded(path: str):
    """What a `module:name` path of the table names, its module imported."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


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
