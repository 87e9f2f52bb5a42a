"""Any encoder with any other family's decoder: the recurrent, Transformer and convolutional halves combined.

A model block of family `hybrid` names its two halves, each written like a model block of its family:

    encoder: {family: transformer, d_model: 256, heads: 4, layers: 3, d_ff: 1024}
    decoder: {family: rnn, cell: lstm, attention: general, embed_dim: 256, hidden_dim: 640}

Each family's file defines its halves (RecurrentEncoder / RecurrentDecoder, TransformerEncoder / TransformerDecoder,
ConvEncoder / ConvDecoder), and the family itself is the pair of its own two halves; a hybrid is a pair of two
families' halves, so it runs exactly the layers the families run. Keys that concern the whole model are the
hybrid's: `tie_embeddings` and `dropout` (one rate for both halves, as in every family).

The projection rule, the one place where the halves meet: the encoder's states (B, S, W_enc) reach the decoder's
attention at the width the decoder attends at, W_dec (a Transformer's d_model, a recurrent decoder's hidden_dim, a
convolutional decoder's embed_dim). Equal widths pass unchanged; otherwise one learned linear map
`memory_projection` (W_dec x W_enc, with a bias) is applied once per sentence. Nothing else crosses: a recurrent
decoder after another family's encoder starts from zeros (it has no final state to take) and reads the source
through its attention, so attention none is refused for it; a convolutional decoder uses the states as its
attention's keys and values (ConvS2S's values add the source embeddings, which only its own encoder keeps).
Where either half is a Transformer, every vocabulary matrix is drawn as the Transformers draw theirs, and the
other half reads it times sqrt(width), at the unit scale of its own family's embeddings.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from nmtbench.config import Block, ConfigError, choice, from_dict
from nmtbench.models.cnn import ConvConfig, ConvDecoder, ConvEncoder
from nmtbench.models.dropout import Dropout
from nmtbench.models.rnn import RecurrentDecoder, RecurrentEncoder, RNNConfig
from nmtbench.models.transformer import TransformerConfig, TransformerDecoder, TransformerEncoder
from nmtbench.models.vocabulary import SHARED_EMBEDDING, ModelConfig, Vocab, VocabularySeq2Seq

# family -> (its config, its encoder half, its decoder half)
HALVES = {"rnn": (RNNConfig, RecurrentEncoder, RecurrentDecoder),
          "transformer": (TransformerConfig, TransformerEncoder, TransformerDecoder),
          "cnn": (ConvConfig, ConvEncoder, ConvDecoder)}
WHOLE = ("tie_embeddings", "dropout")  # the hybrid's own keys, not a half's


class HybridConfig(ModelConfig):
    encoder: dict = {}  # a block of family rnn, transformer or cnn: the encoder half's keys
    decoder: dict = {}
    dropout: float = 0.1

    def half(self, side: str, where: str = "models.hybrid") -> Block:
        """The typed config of the encoder or decoder half, refused in one line where it cannot be one."""
        block, model, where = dict(getattr(self, side)), where, f"{where}.{side}"
        family = block.pop("family", None)
        if family == "decoder_only":
            raise ConfigError(f"{where}.family: decoder_only has no separate encoder and decoder (the source is the "
                              f"prompt of its one stack); choose one of {', '.join(HALVES)}, or family: decoder_only "
                              "for the whole model")
        config_cls, *halves = HALVES[choice(f"{where}.family", family, HALVES)]
        half_cls = halves[side == "decoder"]
        read = half_cls.decoder_keys if side == "decoder" else half_cls.encoder_keys
        for key in sorted(block):
            if key in WHOLE:
                raise ConfigError(f"{where}.{key}: set once for the whole model, as {model}.{key}; remove it here")
            if key not in read:
                raise ConfigError(f"{where}.{key}: not a key of the {family} family's {side}; remove it (it reads "
                                  f"{', '.join(read)})")
        cfg = from_dict(config_cls, {**block, "tie_embeddings": self.tie_embeddings, "dropout": self.dropout}, where)
        cfg.validate(where)
        return cfg

    def validate(self, where: str) -> None:
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout: must be in [0, 1), got {self.dropout}")
        encoder, decoder = self.half("encoder", where), self.half("decoder", where)
        families = self.encoder["family"], self.decoder["family"]
        if families[0] == families[1]:
            others = ", ".join(family for family in HALVES if family != families[0])
            raise ConfigError(f"{where}.decoder.family: {families[0]} is the encoder's family too, which is family: "
                              f"{families[0]} itself; choose one of {others}, or family: {families[0]}")
        if families[1] == "rnn" and decoder.attention == "none":
            raise ConfigError(f"{where}.decoder.attention: none leaves a recurrent decoder after a {families[0]} "
                              "encoder no way to the source (it starts from zeros, having no final state to take); "
                              "choose one of dot, general, reduced_rank, additive")
        widths = HALVES[families[0]][1].source_width(encoder), HALVES[families[1]][2].target_width(decoder)
        if widths[0] != widths[1] and self.tie_embeddings in (None, *SHARED_EMBEDDING):
            tie = self.tie_embeddings or "unset (all, with one joint vocabulary)"
            raise ConfigError(f"{where}.tie_embeddings: {tie} makes the source and the target embedding one matrix, "
                              f"but the encoder reads {widths[0]}-wide embeddings and the decoder {widths[1]}-wide; "
                              "give both halves one width, or set tie_embeddings: target_output or none")


class HybridSeq2Seq(VocabularySeq2Seq):
    """One family's encoder half and another's decoder half, joined by the projection rule (module docstring).
    HybridSeq2Seq(cfg, vocab) builds the class of cfg's pair (PAIRS), so the registry builds it like any family."""

    def __new__(cls, cfg: HybridConfig | None = None, vocab: Vocab | None = None):
        if cls is HybridSeq2Seq:  # copy and pickle call it on the pair's class, without arguments
            cls = PAIRS[cfg.encoder["family"], cfg.decoder["family"]]
        return super().__new__(cls)

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

    def encode(self, src, src_mask):
        """Memory: enc (B, S, W_dec), the encoder half's states at the decoder's width."""
        states = super().encode(src, src_mask)["enc"]  # (B, S, W_enc)
        return {"enc": self.memory_projection(states)}

    # The side whose half is not a Transformer's, in a pair with one: the vocabulary matrices are drawn the
    # Transformer's way (std width^-0.5, which its half reads times sqrt(width)), so this half reads them times
    # sqrt(width) too and sees unit-variance embeddings, as its own family draws them (N(0, 1)). Read as drawn, its
    # inputs were 16 times smaller at width 256, and the grid's hybrids learned far slower than either parent
    # (5.5 and 18.3 BLEU against 25.1 and 27.3 at the default budget: docs/results/2026-11-26-halves-cpu.md).
    rescaled: str | None = None

    def embed_source(self, tokens: torch.Tensor) -> torch.Tensor:
        x = super().embed_source(tokens)  # (B, S, E)
        return x * math.sqrt(x.size(-1)) if self.rescaled == "source" else x

    def embed_target(self, tokens: torch.Tensor) -> torch.Tensor:
        x = super().embed_target(tokens)  # (B, T, E)
        return x * math.sqrt(x.size(-1)) if self.rescaled == "target" else x


class TransformerRecurrent(HybridSeq2Seq, TransformerEncoder, RecurrentDecoder):
    """Self-attention encoder, recurrent decoder: RNMT+'s best hybrid (Chen et al. 2018)."""
    rescaled = "target"


class TransformerConv(HybridSeq2Seq, TransformerEncoder, ConvDecoder):
    """Self-attention encoder, convolutional decoder."""
    rescaled = "target"


class RecurrentTransformer(HybridSeq2Seq, RecurrentEncoder, TransformerDecoder):
    """Recurrent encoder, self-attention decoder."""
    rescaled = "source"


class RecurrentConv(HybridSeq2Seq, RecurrentEncoder, ConvDecoder):
    """Recurrent encoder, convolutional decoder."""


class ConvTransformer(HybridSeq2Seq, ConvEncoder, TransformerDecoder):
    """Convolutional encoder, self-attention decoder."""
    rescaled = "source"


class ConvRecurrent(HybridSeq2Seq, ConvEncoder, RecurrentDecoder):
    """Convolutional encoder, recurrent decoder."""


PAIRS = {("transformer", "rnn"): TransformerRecurrent, ("transformer", "cnn"): TransformerConv,
         ("rnn", "transformer"): RecurrentTransformer, ("rnn", "cnn"): RecurrentConv,
         ("cnn", "transformer"): ConvTransformer, ("cnn", "rnn"): ConvRecurrent}


def halves(block: dict) -> tuple[tuple[str, dict], tuple[str, dict]] | None:
    """The encoder and the decoder of a model block, each as (its family, the values of the keys it reads with the
    family's defaults filled in): the same for a family's own model and for a hybrid with that half, so two models
    share a half exactly when these are equal. None for a model without two halves (decoder_only, an own class).
    What the whole model sets (tie_embeddings, dropout) is no half's."""
    sides = (block.get("encoder", {}), block.get("decoder", {})) if block.get("family") == "hybrid" else (block,) * 2
    if not all(side.get("family") in HALVES for side in sides):
        return None
    found = []
    for side, half in zip(sides, ("encoder", "decoder")):
        config_cls, encoder, decoder = HALVES[side["family"]]
        read = encoder.encoder_keys if half == "encoder" else decoder.decoder_keys
        cfg = config_cls(**{key: value for key, value in side.items() if key in read})
        found.append((side["family"], {key: getattr(cfg, key) for key in read}))
    return found[0], found[1]
