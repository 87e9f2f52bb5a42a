"""The vocabularies a model is built for and the tying of its vocabulary layers (source embedding, target
embedding, output projection), as the model block's `tie_embeddings` says:

    all            one matrix: source embedding = target embedding = output projection (one joint vocabulary)
    source_target  source embedding = target embedding, the output projection its own (one joint vocabulary)
    target_output  the target embedding is the output projection (Press & Wolf 2017); the source has its own
    none           three matrices, as in Bahdanau et al. 2015 and JoeyNMT's RNN recipes
    null           the most the vocabularies allow: all with one joint vocabulary, target_output with one per side

The registry (`model_config`, `build_model`) resolves null for the vocabularies and refuses a tying they cannot
take (`tying`), so a family only builds what its config says, through `VocabularySeq2Seq`
(models/vocabulary_layers.py). Nothing here imports torch: `nmtbench check` and the comparison read model blocks
without it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nmtbench.config import TokenizeConfig
from nmtbench.param_blocks import Block, ConfigError

SHARED_EMBEDDING = ("all", "source_target")  # the source embedding is the target's: one joint vocabulary only
TIED_OUTPUT = ("all", "target_output")  # the output projection is the target embedding


@dataclass(frozen=True)
class Vocab:
    """The vocabularies a model reads (source) and writes (target): their sizes, and whether they are one joint
    vocabulary, whose pieces have the same id on both sides."""
    source: int
    target: int
    joint: bool
    pad_id: int = 0

    @classmethod
    def of(cls, size: int, target_size: int | None = None, pad_id: int = 0) -> Vocab:
        """One joint vocabulary of `size` pieces; with target_size, a source of `size` and a target of target_size."""
        return cls(size, size if target_size is None else target_size, target_size is None, pad_id)

    @classmethod
    def planned(cls, tokenize: TokenizeConfig) -> Vocab:
        """The vocabularies the tokenize stage makes, as far as its params tell before it runs: joint or one per
        side, of the sizes asked for (sentencepiece may make fewer pieces; no check of a model block reads sizes)."""
        if tokenize.joint:
            return cls.of(tokenize.vocab_size)
        return cls.of(tokenize.vocab_size, tokenize.target_vocab_size or tokenize.vocab_size)


class ModelConfig(Block):
    """What every built-in family's config holds besides its architecture: the tying of its vocabulary layers, how
    its weights are drawn, and the rates of its dropout sites. A family names each site it drops at in a key
    `<site>_dropout`; unset (null), a site drops at the model's `dropout`, so one rate serves a model whose recipe
    gives one (docs/models.md, "Dropout sites and initialisation")."""
    tie_embeddings: Literal["all", "source_target", "target_output", "none"] | None = None
    # pytorch: every layer as PyTorch draws it (and a family's own vocabulary draw); the others redraw the weights
    # as the toolkit of that name does for the family (its file's INITIALISATIONS)
    init: str = "pytorch"

    def check_after(self, encoder: str, where: str) -> None:
        """Refuses, in one line, a decoder half's config that cannot follow another family's encoder half (a hybrid's
        memory is the encoder's states alone); each family's decoder states its own rules, most have none."""

    def dropout_at(self, site: str) -> float:
        """The rate at one dropout site: its own `<site>_dropout`, or the model's dropout where that is unset."""
        rate = getattr(self, f"{site}_dropout")
        return self.dropout if rate is None else rate

    def check_dropout(self, where: str) -> None:
        """Refuses, in one line, a dropout rate outside [0, 1), the model's or a site's."""
        for key in type(self).model_fields:
            rate = getattr(self, key)
            if (key == "dropout" or key.endswith("_dropout")) and rate is not None and not 0 <= rate < 1:
                raise ConfigError(f"{where}.{key}: must be in [0, 1), got {rate}")


def tying(cfg: ModelConfig, vocab: Vocab, where: str) -> str:
    """The tie_embeddings a model is built with: cfg's, or for null the most the vocabularies allow."""
    tie = cfg.tie_embeddings or ("all" if vocab.joint else "target_output")
    if tie in SHARED_EMBEDDING and not vocab.joint:
        raise ConfigError(f"{where}.tie_embeddings: {tie} makes the source and the target embedding one matrix, "
                          "which needs one joint vocabulary, but the tokenize stage makes one per side "
                          "(tokenize.joint: false); set tie_embeddings: target_output or none, or tokenize.joint: true")
    return tie
