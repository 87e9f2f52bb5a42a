"""The vocabulary layers of every built-in family: source embedding, target embedding and output projection,
sized by the vocabularies the tokenize stage made and tied as the model block's `tie_embeddings` says
(models/vocabulary.py).
"""
from __future__ import annotations

import torch
from torch import nn

from nmtbench.models.interface import Seq2Seq
from nmtbench.models.vocabulary import SHARED_EMBEDDING, TIED_OUTPUT, Vocab


class VocabularySeq2Seq(Seq2Seq):
    """A Seq2Seq whose vocabulary layers follow cfg.tie_embeddings: `embed` reads the source (and the target too
    when the two share it), `target_embed` the target otherwise, and `output` projects onto the target vocabulary.

    A family builds the embeddings first and the output layer last, the order they were always built in: a model
    tied as before tie_embeddings existed draws the same initial weights and keeps its checkpoint keys.
    """

    def build_embeddings(self, vocab: Vocab, dim: int, tie: str, target_dim: int | None = None) -> None:
        """The source embedding of width dim and, unless tied to it, the target's of width target_dim (a hybrid's
        decoder may read narrower or wider embeddings than its encoder; None: dim)."""
        self.pad_id, self.tie = vocab.pad_id, tie
        self.embed = nn.Embedding(vocab.source, dim, padding_idx=vocab.pad_id)
        if tie not in SHARED_EMBEDDING:
            self.target_embed = nn.Embedding(vocab.target, target_dim or dim, padding_idx=vocab.pad_id)

    def build_output(self, vocab: Vocab, dim: int) -> None:
        """The projection of dim-wide decoder outputs onto the target vocabulary."""
        self.output = nn.Linear(dim, vocab.target, bias=False)
        if self.tie in TIED_OUTPUT:
            self.output.weight = self.target_table().weight

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Decoder outputs (..., dim) -> scores over the target vocabulary (..., V)."""
        return self.output(x)

    def target_table(self) -> nn.Embedding:
        return self.embed if self.tie in SHARED_EMBEDDING else self.target_embed

    def embed_source(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embed(tokens)

    def embed_target(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.target_table()(tokens)

    def initialise(self) -> None:
        """What a model draws once all its layers exist; by default nothing, PyTorch's initialisation stands. A
        Transformer half redraws the vocabulary matrices, a sparse encoder its random blocks (models/transformer.py),
        after every layer as the family always did, so a seed gives the same weights."""

    def vocabulary_weights(self) -> list[nn.Parameter]:
        """Each distinct matrix of the vocabulary layers once, for a family that initialises them its own way."""
        weights = [self.embed.weight, self.target_table().weight, self.output.weight]
        return list({id(weight): weight for weight in weights}.values())
