"""The recurrent family's config, the keys each of its halves reads and its entry in the family table; its layers
are in models/rnn.py. Nothing here imports torch: `nmtbench check` and the comparison read model blocks without it.
"""
from __future__ import annotations

from nmtbench.models.family import Family, register
from nmtbench.models.vocabulary import TIED_OUTPUT, ModelConfig
from nmtbench.param_blocks import ConfigError, choice

CELLS = ("rnn", "gru", "lstm")  # Elman (tanh), GRU, LSTM
ATTENTION_KINDS = ("none", "dot", "general", "reduced_rank", "additive")  # models/attention.py's scorers, or none
# how the decoder starts: the recurrent encoder's final states (Sutskever et al. 2014), a learned bridge from the
# mean of the encoder states (h_0 = tanh(W mean_s enc_s + b), as dl4mt and Nematus start; Bahdanau et al. 2015 from
# the backward encoder's first state), or zeros, reading the source through attention alone
INIT_HIDDEN = ("last", "bridge", "zero")
INITS = ("pytorch", "nmtpytorch")  # how its weights are drawn (the model block's init): models/rnn.py draws each


class RNNConfig(ModelConfig):
    cell: str = "lstm"
    bidirectional: bool = True
    layers: int = 1
    embed_dim: int = 256
    hidden_dim: int = 256  # decoder size; a bidirectional encoder gives each direction half of it
    attention: str = "additive"
    attention_rank: int = 64  # rank of W = U^T V for reduced_rank attention
    input_feeding: bool = True  # feed a_{t-1} into the decoder RNN (Luong); forces a step-by-step loop
    attentional_dim: int | None = None  # width of a_t, which the output layer reads; None: embed_dim
    init_hidden: str | None = None  # the decoder's first state (INIT_HIDDEN); None: last after a recurrent encoder,
    # zero after another family's (the start every checkpoint before the option was trained with)
    dropout: float = 0.2
    # the sites, JoeyNMT's and nmtpytorch's names beside: null drops at dropout, where the family always dropped
    source_embedding_dropout: float | None = None  # JoeyNMT encoder.embeddings.dropout, nmtpytorch dropout_emb
    target_embedding_dropout: float | None = None  # JoeyNMT decoder.embeddings.dropout (nmtpytorch drops none)
    layer_dropout: float | None = None  # between stacked RNN layers, both halves (JoeyNMT and torch: dropout)
    context_dropout: float = 0.0  # the encoder states the decoder attends to and starts from (nmtpytorch dropout_ctx)
    output_dropout: float | None = None  # a_t before the output layer (nmtpytorch dropout_out)

    def validate(self, where: str) -> None:
        choice(f"{where}.cell", self.cell, CELLS)
        choice(f"{where}.attention", self.attention, ATTENTION_KINDS)
        if self.init_hidden is not None:
            choice(f"{where}.init_hidden", self.init_hidden, INIT_HIDDEN)
        if self.init_hidden == "zero" and self.attention == "none":
            raise ConfigError(f"{where}.init_hidden: zero with attention none leaves the decoder no way to the source; "
                              "choose last or bridge, or an attention")
        if self.bidirectional and self.hidden_dim % 2:
            raise ConfigError(f"{where}.hidden_dim: a bidirectional encoder needs an even size, got {self.hidden_dim}")
        if min(self.layers, self.embed_dim, self.hidden_dim, self.attention_rank, self.attentional) < 1:
            raise ConfigError(f"{where}: layers, embed_dim, hidden_dim, attention_rank and attentional_dim must be "
                              "positive")
        if self.attentional != self.embed_dim and self.tie_embeddings in (None, *TIED_OUTPUT):
            raise ConfigError(f"{where}.attentional_dim: {self.attentional} is not embed_dim ({self.embed_dim}), but "
                              f"tie_embeddings {self.tie_embeddings or 'unset'} makes the output layer the target "
                              "embedding; set tie_embeddings: none or source_target, or attentional_dim: null")
        choice(f"{where}.init", self.init, INITS)
        self.check_dropout(where)

    def check_after(self, encoder: str, where: str) -> None:
        if self.init_hidden == "last":
            raise ConfigError(f"{where}.init_hidden: last takes a recurrent encoder's final state, which a {encoder} "
                              "encoder does not have; choose bridge (learned from the mean of its states) or zero")
        if self.attention == "none" and self.init_hidden != "bridge":
            kinds = ", ".join(kind for kind in ATTENTION_KINDS if kind != "none")
            raise ConfigError(f"{where}.attention: none leaves a recurrent decoder after a {encoder} encoder no way "
                              "to the source (it starts from zeros, having no final state to take); choose one of "
                              f"{kinds}, or init_hidden: bridge")

    @property
    def embedding_width(self) -> int:
        return self.embed_dim

    @property
    def attentional(self) -> int:
        """The width of a_t."""
        return self.embed_dim if self.attentional_dim is None else self.attentional_dim


FAMILY = register(Family(
    "rnn", RNNConfig, "nmtbench.models.rnn:RNNSeq2Seq", "nmtbench.models.rnn:RecurrentEncoder",
    "nmtbench.models.rnn:RecurrentDecoder",
    encoder_keys=("cell", "bidirectional", "layers", "embed_dim", "hidden_dim", "source_embedding_dropout",
                  "layer_dropout"),
    decoder_keys=("cell", "layers", "embed_dim", "hidden_dim", "attention", "attention_rank", "input_feeding",
                  "attentional_dim", "init_hidden", "target_embedding_dropout", "layer_dropout", "context_dropout",
                  "output_dropout"),
    joining_keys=("init_hidden",), mechanism="recurrence"))
