"""Recurrent encoder-decoder: vanilla RNN (Elman, tanh), GRU or LSTM, with or without attention.

Everything for the forward pass of the recurrent family is in this file, as an encoder half and a decoder half
that the family pairs and a hybrid (models/hybrid.py) pairs with another family's. Without attention the decoder
sees the source only through the encoder's final state (Sutskever et al. 2014: the bottleneck); with
attention it follows Luong et al. 2015: h_t = RNN(y_{t-1}[, a_{t-1}]), c_t = attend(h_t, encoder),
a_t = tanh(W [h_t; c_t]), logits = E a_t, with the output projection E tied to the target embedding unless
tie_embeddings is none or source_target (models/vocabulary.py); then a_t may be wider than the embeddings
(attentional_dim).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmtbench.config import ConfigError, choice
from nmtbench.models.attention import ATTENTION_KINDS, SCORERS, attend
from nmtbench.models.dropout import Dropout
from nmtbench.models.interface import DecoderState
from nmtbench.models.vocabulary import TIED_OUTPUT, ModelConfig, Vocab, VocabularySeq2Seq

CELLS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


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
    dropout: float = 0.2

    def validate(self, where: str) -> None:
        choice(f"{where}.cell", self.cell, CELLS)
        choice(f"{where}.attention", self.attention, ATTENTION_KINDS)
        if self.bidirectional and self.hidden_dim % 2:
            raise ConfigError(f"{where}.hidden_dim: a bidirectional encoder needs an even size, got {self.hidden_dim}")
        if min(self.layers, self.embed_dim, self.hidden_dim, self.attention_rank, self.attentional) < 1:
            raise ConfigError(f"{where}: layers, embed_dim, hidden_dim, attention_rank and attentional_dim must be "
                              "positive")
        if self.attentional != self.embed_dim and self.tie_embeddings in (None, *TIED_OUTPUT):
            raise ConfigError(f"{where}.attentional_dim: {self.attentional} is not embed_dim ({self.embed_dim}), but "
                              f"tie_embeddings {self.tie_embeddings or 'unset'} makes the output layer the target "
                              "embedding; set tie_embeddings: none or source_target, or attentional_dim: null")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout: must be in [0, 1), got {self.dropout}")

    @property
    def attentional(self) -> int:
        """The width of a_t."""
        return self.embed_dim if self.attentional_dim is None else self.attentional_dim


class RecurrentEncoder(VocabularySeq2Seq):
    """The encoder half: a (bidirectional) RNN over the source embeddings. Its layers are the model's own
    attributes, named as the family always named them, so a whole RNNSeq2Seq keeps its checkpoint keys and a
    hybrid (models/hybrid.py) takes this half alone."""

    # the keys of its config this half reads: all that a hybrid's encoder block may set
    encoder_keys = ("cell", "bidirectional", "layers", "embed_dim", "hidden_dim")

    @staticmethod
    def source_width(cfg: RNNConfig) -> int:
        return cfg.embed_dim

    @staticmethod
    def memory_width(cfg: RNNConfig) -> int:
        return cfg.hidden_dim  # both directions side by side

    def build_encoder(self, cfg: RNNConfig) -> None:
        self.encoder_cfg = cfg
        directions = 2 if cfg.bidirectional else 1
        self.encoder = CELLS[cfg.cell](cfg.embed_dim, cfg.hidden_dim // directions, cfg.layers, batch_first=True,
                                       bidirectional=cfg.bidirectional, dropout=between_layers(cfg))

    def encode(self, src, src_mask):
        """Memory: enc (B, S, H), the states the decoder attends to, and final, the last state of each layer,
        batch first (B, L, H) or an LSTM's (h, c) pair of those."""
        x = self.dropout(self.embed_source(src))  # (B, S, E)
        lengths = src_mask.sum(1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, final = self.encoder(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))  # (B, S, H)
        final = (tuple(self._join_directions(f) for f in final) if isinstance(final, tuple)
                 else self._join_directions(final))
        return {"enc": out, "final": final}

    def _join_directions(self, h: torch.Tensor) -> torch.Tensor:
        """(L * dirs, B, H / dirs) -> (B, L, H): the decoder's initial state, batch first for reordering."""
        if self.encoder_cfg.bidirectional:
            L, B = self.encoder_cfg.layers, h.size(1)
            h = h.view(L, 2, B, -1)
            h = torch.cat([h[:, 0], h[:, 1]], dim=-1)  # (L, B, H)
        return h.transpose(0, 1).contiguous()


class RecurrentDecoder(VocabularySeq2Seq):
    """The decoder half: an RNN over the target embeddings with Luong's attentional layer on top (see the module
    docstring). It starts from the encoder's final state where the memory has one (a recurrent encoder of the same
    family), else from zeros and reads the source through its attention alone."""

    # the keys of its config this half reads: all that a hybrid's decoder block may set
    decoder_keys = ("cell", "layers", "embed_dim", "hidden_dim", "attention", "attention_rank", "input_feeding",
                    "attentional_dim")

    @staticmethod
    def target_width(cfg: RNNConfig) -> int:
        return cfg.embed_dim

    @staticmethod
    def attended_width(cfg: RNNConfig) -> int:
        return cfg.hidden_dim  # the scorers compare h_t (B, T, H) with encoder states of the same width

    @staticmethod
    def output_width(cfg: RNNConfig) -> int:
        return cfg.attentional

    def build_decoder(self, cfg: RNNConfig) -> None:
        self.decoder_cfg = cfg
        feed = cfg.attentional if cfg.input_feeding else 0
        self.decoder = CELLS[cfg.cell](cfg.embed_dim + feed, cfg.hidden_dim, cfg.layers, batch_first=True,
                                       dropout=between_layers(cfg))
        attended = cfg.hidden_dim
        if cfg.attention != "none":
            self.scorer = SCORERS[cfg.attention](cfg.hidden_dim, cfg.hidden_dim, cfg.attention_rank)
            attended += cfg.hidden_dim
        self.pre_output = nn.Linear(attended, cfg.attentional)

    def _attentional(self, h, memory, src_mask):
        """Decoder outputs h (B, T, H) -> attentional vectors (B, T, A) and attention weights (B, T, S)."""
        if self.decoder_cfg.attention == "none":
            return torch.tanh(self.pre_output(h)), None
        context, weights = attend(self.scorer.scores(h, memory["keys"]), memory["enc"], src_mask)
        return torch.tanh(self.pre_output(torch.cat([h, context], dim=-1))), weights

    def _run_decoder(self, inputs, hidden):
        """inputs (B, T, in); hidden batch-first (B, L, H) or a (h, c) pair of those."""
        to_rnn = lambda t: t.transpose(0, 1).contiguous()  # noqa: E731  (B, L, H) -> (L, B, H)
        hidden = tuple(map(to_rnn, hidden)) if isinstance(hidden, tuple) else to_rnn(hidden)
        out, hidden = self.decoder(inputs, hidden)
        from_rnn = lambda t: t.transpose(0, 1)  # noqa: E731
        return out, (tuple(map(from_rnn, hidden)) if isinstance(hidden, tuple) else from_rnn(hidden))

    def teacher_forced(self, memory, src_mask, tgt_in):
        emb = self.dropout(self.embed_target(tgt_in))  # (B, T, E)
        state = self.init_state(memory, src_mask)
        if not self.decoder_cfg.input_feeding:  # no recurrence through a_t: the whole sequence in one RNN call
            out, _ = self._run_decoder(emb, state.tensors["hidden"])
            attentional, _ = self._attentional(out, state.tensors, src_mask)
            return self.output(self.dropout(attentional))
        steps = []
        for t in range(tgt_in.size(1)):
            attentional, state = self._step(state, emb[:, t : t + 1])
            steps.append(attentional)
        return self.output(self.dropout(torch.cat(steps, dim=1)))  # (B, T, V)

    def init_state(self, memory, src_mask):
        cfg, enc = self.decoder_cfg, memory["enc"]
        hidden = memory.get("final")
        if hidden is None:  # no recurrent encoder: zeros, (B, L, H) or an LSTM's (h, c) pair
            zeros = enc.new_zeros(src_mask.size(0), cfg.layers, cfg.hidden_dim)
            hidden = (zeros, zeros) if cfg.cell == "lstm" else zeros
        tensors = {"enc": enc, "mask": src_mask, "hidden": hidden}
        if cfg.attention != "none":  # the scorer's keys, once per sentence
            tensors["keys"] = self.scorer.keys(enc)
        if cfg.input_feeding:
            tensors["feed"] = enc.new_zeros(src_mask.size(0), 1, cfg.attentional)
        return DecoderState(tensors)

    def _step(self, state, emb):
        """One target position: emb (B, 1, E) -> attentional vector (B, 1, A) and the new state."""
        s = state.tensors
        inputs = torch.cat([emb, s["feed"]], dim=-1) if self.decoder_cfg.input_feeding else emb
        out, hidden = self._run_decoder(inputs, s["hidden"])
        attentional, weights = self._attentional(out, s, s["mask"])
        tensors = {**s, "hidden": hidden}
        if self.decoder_cfg.input_feeding:
            tensors["feed"] = attentional
        return attentional, DecoderState(tensors, state.step + 1, None if weights is None else weights[:, 0])

    def decode_step(self, state, y_prev):
        attentional, state = self._step(state, self.embed_target(y_prev).unsqueeze(1))
        logits = self.output(attentional[:, 0])  # (B, V)
        return torch.log_softmax(logits.float(), dim=-1), state


def between_layers(cfg: RNNConfig) -> float:
    """Dropout between stacked RNN layers (torch warns when it is set for one layer)."""
    return cfg.dropout if cfg.layers > 1 else 0.0


class RNNSeq2Seq(RecurrentEncoder, RecurrentDecoder):
    """The recurrent family: both halves of one config, the decoder starting from the encoder's final state."""

    def __init__(self, cfg: RNNConfig, vocab: Vocab):
        super().__init__()
        self.cfg = cfg
        self.build_embeddings(vocab, cfg.embed_dim, cfg.tie_embeddings)
        self.dropout = Dropout(cfg.dropout)
        self.build_encoder(cfg)
        self.build_decoder(cfg)
        self.build_output(vocab, cfg.attentional)
