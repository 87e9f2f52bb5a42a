"""Any encoder with any other family's decoder: the recurrent, Transformer and convolutional halves combined.

A model block of family `hybrid` names its two halves, each written like a model block of its family:

    encoder: {family: transformer, d_model: 256, heads: 4, layers: 3, d_ff: 1024}
    decoder: {family: rnn, cell: lstm, attention: general, embed_dim: 256, hidden_dim: 640}

Each family's file defines its halves (RecurrentEncoder / RecurrentDecoder, TransformerEncoder / TransformerDecoder,
ConvEncoder / ConvDecoder) and names them in its entry of the family table (models/family.py); the family itself is
the pair of its own two halves. A hybrid is a pair of two families' halves, so it runs exactly the layers the
families run: its class is made from the two entries (pair_class), none is written by hand. Keys that concern the
whole model are the hybrid's: `tie_embeddings` and `dropout` (one rate for both halves, as in every family).

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

from nmtbench.blocks import Block, ConfigError, choice, from_dict
from nmtbench.models.dropout import Dropout
from nmtbench.models.family import TABLE, Family, register, with_halves
from nmtbench.models.vocabulary import SHARED_EMBEDDING, TIED_OUTPUT, ModelConfig, Vocab
from nmtbench.models.vocabulary_layers import VocabularySeq2Seq

WHOLE = ("tie_embeddings", "dropout")  # the hybrid's own keys, not a half's
EXAMPLES = {"encoder": "{family: transformer, layers: 6}", "decoder": "{family: rnn, cell: lstm, attention: general}"}


class HybridConfig(ModelConfig):
    encoder: dict = {}  # a block of family rnn, transformer or cnn: the encoder half's keys
    decoder: dict = {}
    dropout: float = 0.1

    def half(self, side: str, where: str = "models.hybrid") -> Block:
        """The typed config of the encoder or decoder half, refused in one line where it cannot be one."""
        block, model, where = dict(getattr(self, side)), where, f"{where}.{side}"
        family, halves = block.pop("family", None), with_halves()
        if not block and family is None:  # absent, or given empty
            raise ConfigError(f"{where}: missing; a hybrid needs both halves, each a block of its family's keys, e.g. "
                              f"{side}: {EXAMPLES[side]}")
        if family is None:
            raise ConfigError(f"{where}: missing 'family'; choose one of {', '.join(halves)}")
        if family in TABLE and family not in halves:
            raise ConfigError(f"{where}.family: {family} has no encoder and decoder halves of its own to pair; "
                              f"choose one of {', '.join(halves)}, or family: {family} "
                              "for the whole model")
        entry = halves[choice(f"{where}.family", family, halves)]
        read = keys_read(entry, side)
        for key in sorted(block):
            if key in WHOLE:
                raise ConfigError(f"{where}.{key}: set once for the whole model, as {model}.{key}; remove it here")
            if key not in read:
                raise ConfigError(f"{where}.{key}: not a key of the {family} family's {side}; remove it (it reads "
                                  f"{', '.join(read)})")
        cfg = from_dict(entry.config, {**block, "tie_embeddings": self.tie_embeddings, "dropout": self.dropout}, where)
        cfg.validate(where)
        return cfg

    def validate(self, where: str) -> None:
        self.check_dropout(where)
        if self.init != "pytorch":  # each family's draw is its own; nothing says how the projection between is drawn
            raise ConfigError(f"{where}.init: {self.init} is a family's own draw, and a hybrid's halves come from two; "
                              "leave init unset (pytorch) for a hybrid")
        encoder, decoder = self.half("encoder", where), self.half("decoder", where)
        families = self.encoder["family"], self.decoder["family"]
        if families[0] == families[1]:
            others = ", ".join(family for family in with_halves() if family != families[0])
            raise ConfigError(f"{where}.decoder.family: {families[0]} is the encoder's family too, which is family: "
                              f"{families[0]} itself; choose one of {others}, or family: {families[0]}")
        TABLE[families[1]].decoder.check_after(decoder, families[0], f"{where}.decoder")
        widths = TABLE[families[0]].encoder.source_width(encoder), TABLE[families[1]].decoder.target_width(decoder)
        if widths[0] != widths[1] and self.tie_embeddings in (None, *SHARED_EMBEDDING):
            tie = self.tie_embeddings or "unset (all, with one joint vocabulary)"
            raise ConfigError(f"{where}.tie_embeddings: {tie} makes the source and the target embedding one matrix, "
                              f"but the encoder reads {widths[0]}-wide embeddings and the decoder {widths[1]}-wide; "
                              "give both halves one width, or set tie_embeddings: target_output or none")


class HybridSeq2Seq(VocabularySeq2Seq):
    """One family's encoder half and another's decoder half, joined by the projection rule (module docstring); the
    base of every pair's class (pair_class), which build_hybrid picks for a config."""

    def __init__(self, cfg: HybridConfig, vocab: Vocab):
        super().__init__()
        self.cfg = cfg
        encoder, decoder = cfg.half("encoder"), cfg.half("decoder")
        self.build_embeddings(vocab, self.source_width(encoder), cfg.tie_embeddings, self.target_width(decoder))
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
    name = encoder.encoder.__name__.removesuffix("Encoder") + decoder.decoder.__name__.removesuffix("Decoder")
    doc = f"{encoder.name}'s encoder half with {decoder.name}'s decoder half."
    return type(name, (HybridSeq2Seq, encoder.encoder, decoder.decoder),
                {"__module__": __name__, "__doc__": doc, "rescaled": rescaled_side(encoder, decoder)})


def rebuilt(encoder: str, decoder: str) -> HybridSeq2Seq:
    """An empty model of the pair's class, which unpickling and copying then fill (HybridSeq2Seq.__reduce__)."""
    cls = pair_class(TABLE[encoder], TABLE[decoder])
    return cls.__new__(cls)


def build_hybrid(cfg: HybridConfig, vocab: Vocab) -> HybridSeq2Seq:
    """The model of a hybrid block: its pair's class, built like any family's model."""
    return pair_class(TABLE[cfg.encoder["family"]], TABLE[cfg.decoder["family"]])(cfg, vocab)


def keys_read(family: Family, side: str) -> tuple[str, ...]:
    """The keys of family's config that its encoder or decoder half reads: all that a hybrid's half may set."""
    return family.encoder.encoder_keys if side == "encoder" else family.decoder.decoder_keys


def halves(block: dict) -> tuple[tuple[str, dict], tuple[str, dict]] | None:
    """The encoder and the decoder of a model block, each as (its family, the values of the keys it reads with the
    family's defaults filled in): the same for a family's own model and for a hybrid with that half, so two models
    share a half exactly when these are equal. None for a model without two halves (decoder_only, an own class).
    What the whole model sets (tie_embeddings, dropout) is no half's, nor how a half meets the other (its
    joining_keys: a recurrent decoder's init_hidden)."""
    sides = (block.get("encoder", {}), block.get("decoder", {})) if block.get("family") == "hybrid" else (block,) * 2
    halves = with_halves()
    if not all(side.get("family") in halves for side in sides):
        return None
    found = []
    for side, half in zip(sides, ("encoder", "decoder")):
        family = halves[side["family"]]
        read = keys_read(family, half)
        cfg = family.config(**{key: value for key, value in side.items() if key in read})
        joining = getattr(family.encoder if half == "encoder" else family.decoder, "joining_keys", ())
        found.append((side["family"], {key: getattr(cfg, key) for key in read if key not in joining}))
    return found[0], found[1]


FAMILY = register(Family("hybrid", HybridConfig, build_hybrid))
