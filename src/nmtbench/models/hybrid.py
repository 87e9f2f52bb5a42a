"""Any encoder with any other family's decoder: the recurrent, Transformer and convolutional halves combined.

A model block of family `hybrid` names its two halves, each written like a model block of its family:

    encoder: {family: transformer, d_model: 256, heads: 4, layers: 3, d_ff: 1024}
    decoder: {family: rnn, cell: lstm, attention: general, embed_dim: 256, hidden_dim: 640}

Each family's file defines its halves (RecurrentEncoder / RecurrentDecoder, TransformerEncoder / TransformerDecoder,
ConvEncoder / ConvDecoder), and its config file names them in its entry of the family table (models/family.py); the
family itself is the pair of its own two halves. A hybrid is a pair of two families' halves, so it runs exactly the
layers the families run: its class is made from the two entries (pair_class), none is written by hand. Keys that
concern the whole model are the hybrid's: `tie_embeddings` and `dropout` (one rate for both halves, as in every
family); its config, which checks each half against its family's entry, is in models/hybrid_config.py.

The projection rule, the one place where the halves meet: the encoder's states (B, S, W_enc) reach the decoder's
attention at the width the decoder attends at, W_dec (a Transformer's d_model, a recurrent decoder's hidden_dim, a
convolutional decoder's embed_dim). Equal widths pass unchanged; otherwise one learned linear map
`memory_projection` (W_dec x W_enc, with a bias) is applied once per sentence. Nothing else crosses: a recurrent
decoder after another family's encoder has no final state to take; it starts from a bridge learned from the mean
of the memory (decoder.init_hidden: bridge) or from zeros (zero, the default, which then reads the source through its
attention alone, so attention none is refused with it); a convolutional decoder uses the states as its
attention's keys and values (ConvS2S's values add the source embeddings, which only its own encoder keeps).
Where one half's family draws its vocabulary matrices scaled and the other's unit (Family.embeddings: a Transformer
half with a recurrent or convolutional one), every matrix is drawn scaled, as the Transformers draw theirs, and the
unit half reads it times sqrt(width), at the unit scale of its own family's embeddings.
"""
from __future__ import annotations

import functools
import math

import torch
from torch import nn

from nmtbench.models.dropout import Dropout
from nmtbench.models.family import TABLE, Family, loaded
from nmtbench.models.hybrid_config import HybridConfig
from nmtbench.models.vocabulary import TIED_OUTPUT, Vocab
from nmtbench.models.vocabulary_layers import VocabularySeq2Seq


class HybridSeq2Seq(VocabularySeq2Seq):
    """One family's encoder half and another's decoder half, joined by the projection rule (module docstring); the
    base of every pair's class (pair_class), which build_hybrid picks for a config."""

    def __init__(self, cfg: HybridConfig, vocab: Vocab):
        super().__init__()
        self.cfg = cfg
        encoder, decoder = cfg.half("encoder"), cfg.half("decoder")
        self.build_embeddings(vocab, encoder.embedding_width, cfg.tie_embeddings, decoder.embedding_width)
        self.dropout = Dropout(cfg.dropout)
        self.build_encoder(encoder)
        self.build_decoder(decoder)
        widths = self.memory_width(encoder), self.attended_width(decoder)
        self.memory_projection = nn.Linear(*widths) if widths[0] != widths[1] else nn.Identity()
        self.build_output(vocab, self.output_width(decoder))
        self.initialise()

    def encode(self, src, src_mask, *src_lengths):
        """Memory: enc (B, S, W_dec), the encoder half's states at the decoder's width; src_lengths only where the
        encoder half packs by them (packs_source)."""
        states = super().encode(src, src_mask, *src_lengths)["enc"]  # (B, S, W_enc)
        return {"enc": self.memory_projection(states)}

    def __reduce__(self):
        """Pickled and copied by its pair's families, whose class pair_class makes again (it is no module's name)."""
        return rebuilt, (self.cfg.encoder["family"], self.cfg.decoder["family"]), self.__dict__

    # The side whose half draws unit embeddings, in a pair with a half that draws them scaled (Family.embeddings):
    # the vocabulary matrices are drawn the Transformer's way (std width^-0.5, which its half reads times
    # sqrt(width)), so this half reads them times sqrt(width) too and sees unit-variance embeddings, as its own
    # family draws them (N(0, 1)). Read as drawn, its inputs were 16 times smaller at width 256, and the grid's hybrids
    # learned far slower than either parent (5.5 and 18.3 BLEU against 25.1 and 27.3 at the default budget:
    # docs/results/2026-11-26-halves-cpu.md). Set by pair_class.
    rescaled: str | None = None

    def embed_source(self, tokens: torch.Tensor) -> torch.Tensor:
        x = super().embed_source(tokens)  # (B, S, E)
        return x * math.sqrt(x.size(-1)) if self.rescaled == "source" else x

    def embed_target(self, tokens: torch.Tensor) -> torch.Tensor:
        x = super().embed_target(tokens)  # (B, T, E)
        return x * math.sqrt(x.size(-1)) if self.rescaled == "target" else x

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """A unit decoder half whose output layer is the target embedding reads it at its unit scale too: read as
        drawn, its scores were 16 times smaller at width 256 than its own family's (0.14 against 0.67 std)."""
        scores = super().logits(x)  # (..., V)
        tied = self.rescaled == "target" and self.tie in TIED_OUTPUT
        return scores * math.sqrt(self.output.weight.size(1)) if tied else scores


def rescaled_side(encoder: Family, decoder: Family) -> str | None:
    """The side (source or target) whose half reads embeddings drawn scaled times sqrt(width) (HybridSeq2Seq)."""
    draws = encoder.embeddings, decoder.embeddings
    return {("scaled", "unit"): "target", ("unit", "scaled"): "source"}.get(draws)


@functools.cache
def pair_class(encoder: Family, decoder: Family) -> type[HybridSeq2Seq]:
    """The class of encoder's encoder half with decoder's decoder half, named after the halves: TransformerEncoder
    with RecurrentDecoder is TransformerRecurrent."""
    halves = loaded(encoder.encoder), loaded(decoder.decoder)
    name = halves[0].__name__.removesuffix("Encoder") + halves[1].__name__.removesuffix("Decoder")
    doc = f"{encoder.name}'s encoder half with {decoder.name}'s decoder half."
    return type(name, (HybridSeq2Seq, *halves),
                {"__module__": __name__, "__doc__": doc, "rescaled": rescaled_side(encoder, decoder)})


def rebuilt(encoder: str, decoder: str) -> HybridSeq2Seq:
    """An empty model of the pair's class, which unpickling and copying then fill (HybridSeq2Seq.__reduce__)."""
    cls = pair_class(TABLE[encoder], TABLE[decoder])
    return cls.__new__(cls)


def build_hybrid(cfg: HybridConfig, vocab: Vocab) -> HybridSeq2Seq:
    """The model of a hybrid block: its pair's class, built like any family's model."""
    return pair_class(TABLE[cfg.encoder["family"]], TABLE[cfg.decoder["family"]])(cfg, vocab)
