"""Recurrent encoder-decoder: vanilla RNN (Elman, tanh), GRU or LSTM, with or without attention.

Everything for the forward pass of the recurrent family is in this file, as an encoder half and a decoder half
that the family pairs and a hybrid (models/hybrid.py) pairs with another family's; its config, the keys each
half reads and its entry in the family table are in models/rnn_config.py. Without attention the decoder
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

from nmtbench.models.attention import SCORERS, attend
from nmtbench.models.dropout import dropout
from nmtbench.models.interface import DecoderState, SourceLengths
from nmtbench.models.rnn_config import RNNConfig
from nmtbench.models.vocabulary import Vocab
from nmtbench.models.vocabulary_layers import VocabularySeq2Seq

# a new cell's name goes in rnn_config.CELLS too, which the config checks without torch
CELL_LAYERS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


class RecurrentEncoder(VocabularySeq2Seq):
    """The encoder half: a (bidirectional) RNN over the source embeddings. Its layers are the model's own
    attributes, named as the family always named them, so a whole RNNSeq2Seq keeps its checkpoint keys and a
    hybrid (models/hybrid.py) takes this half alone."""

    packs_source = True

    @staticmethod
    def memory_width(cfg: RNNConfig) -> int:
        return cfg.hidden_dim  # both directions side by side

    def build_encoder(self, cfg: RNNConfig) -> None:
        self.encoder_cfg = cfg
        directions = 2 if cfg.bidirectional else 1
        self.encoder = CELL_LAYERS[cfg.cell](cfg.embed_dim, cfg.hidden_dim // directions, cfg.layers, batch_first=True,
                                       bidirectional=cfg.bidirectional, dropout=between_layers(cfg))

    def encode(self, src, src_mask, src_lengths: SourceLengths | None = None):
        """Memory: enc (B, S, H), the states the decoder attends to, and final, the last state of each layer,
        batch first (B, L, H) or an LSTM's (h, c) pair of those. src_lengths: the batch's, made on the host; without
        them they are read off the mask, which on a GPU waits for it (decoding does, once a batch)."""
        x = dropout(self.embed_source(src), self.encoder_cfg.dropout_at("source_embedding"), self.training)  # (B, S, E)
        if src_lengths is None:
            src_lengths = SourceLengths.of(src_mask.sum(1).cpu())
        order = src_lengths.order.to(src.device)  # a no-op for a batch's own, which moved with it
        # pack_padded_sequence would sort and restore the rows itself, reading the order back from the device
        packed = pack_padded_sequence(x.index_select(0, order), src_lengths.longest_first, batch_first=True)
        out, final = self.encoder(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))  # (B, S, H), longest first
        restore = torch.argsort(order)
        final = (tuple(self._join_directions(f, restore) for f in final) if isinstance(final, tuple)
                 else self._join_directions(final, restore))
        return {"enc": out.index_select(0, restore), "final": final}

    def _join_directions(self, h: torch.Tensor, restore: torch.Tensor) -> torch.Tensor:
        """(L * dirs, B, H / dirs), rows longest first -> (B, L, H) in the batch's order: the decoder's initial state,
        batch first for reordering."""
        h = h.index_select(1, restore)
        if self.encoder_cfg.bidirectional:
            L, B = self.encoder_cfg.layers, h.size(1)
            h = h.view(L, 2, B, -1)
            h = torch.cat([h[:, 0], h[:, 1]], dim=-1)  # (L, B, H)
        return h.transpose(0, 1).contiguous()


class RecurrentDecoder(VocabularySeq2Seq):
    """The decoder half: an RNN over the target embeddings with Luong's attentional layer on top (see the module
    docstring). It starts as init_hidden says (rnn_config.INIT_HIDDEN); by default from the encoder's final state
    where the memory has one (a recurrent encoder of the same family), else from zeros."""

    @staticmethod
    def attended_width(cfg: RNNConfig) -> int:
        return cfg.hidden_dim  # the scorers compare h_t (B, T, H) with encoder states of the same width

    @staticmethod
    def output_width(cfg: RNNConfig) -> int:
        return cfg.attentional

    def build_decoder(self, cfg: RNNConfig) -> None:
        self.decoder_cfg = cfg
        feed = cfg.attentional if cfg.input_feeding else 0
        self.decoder = CELL_LAYERS[cfg.cell](cfg.embed_dim + feed, cfg.hidden_dim, cfg.layers, batch_first=True,
                                       dropout=between_layers(cfg))
        attended = cfg.hidden_dim
        if cfg.attention != "none":
            self.scorer = SCORERS[cfg.attention](cfg.hidden_dim, cfg.hidden_dim, cfg.attention_rank)
            attended += cfg.hidden_dim
        self.pre_output = nn.Linear(attended, cfg.attentional)
        if cfg.init_hidden == "bridge":  # the memory reaches the decoder at its width, hidden_dim
            self.bridge = nn.Linear(cfg.hidden_dim, cfg.layers * cfg.hidden_dim)

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
        cfg = self.decoder_cfg
        emb = dropout(self.embed_target(tgt_in), cfg.dropout_at("target_embedding"), self.training)  # (B, T, E)
        state = self.init_state(memory, src_mask)
        if not cfg.input_feeding:  # no recurrence through a_t: the whole sequence in one RNN call
            out, _ = self._run_decoder(emb, state.tensors["hidden"])
            attentional, _ = self._attentional(out, state.tensors, src_mask)
        else:
            steps = []
            for t in range(tgt_in.size(1)):
                step, state = self._step(state, emb[:, t : t + 1])
                steps.append(step)
            attentional = torch.cat(steps, dim=1)  # (B, T, A)
        return self.logits(dropout(attentional, cfg.dropout_at("output"), self.training))  # (B, T, V)

    def initial_hidden(self, memory, src_mask):
        """The decoder's first state (rnn_config.INIT_HIDDEN), batch first: (B, L, H), or an LSTM's (h, c) pair of
        those."""
        cfg, enc = self.decoder_cfg, memory["enc"]  # enc (B, S, H)
        start = cfg.init_hidden or ("last" if "final" in memory else "zero")
        if start == "last":
            return memory["final"]
        if start == "bridge":
            mask = src_mask.unsqueeze(-1).to(enc.dtype)  # (B, S, 1)
            mean = (enc * mask).sum(1) / mask.sum(1)  # (B, H), padding left out
            h = torch.tanh(self.bridge(mean)).view(-1, cfg.layers, cfg.hidden_dim)  # (B, L, H)
        else:
            h = enc.new_zeros(src_mask.size(0), cfg.layers, cfg.hidden_dim)
        return (h, h) if cfg.cell == "lstm" else h  # an LSTM's cell starts where its output does, as JoeyNMT's

    def init_state(self, memory, src_mask):
        cfg = self.decoder_cfg
        enc = dropout(memory["enc"], cfg.context_dropout, self.training)  # (B, S, H)
        memory = {**memory, "enc": enc}
        tensors = {"enc": enc, "mask": src_mask, "hidden": self.initial_hidden(memory, src_mask)}
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
        logits = self.logits(attentional[:, 0])  # (B, V)
        return torch.log_softmax(logits.float(), dim=-1), state


def between_layers(cfg: RNNConfig) -> float:
    """Dropout between stacked RNN layers (torch warns when it is set for one layer)."""
    return cfg.dropout_at("layer") if cfg.layers > 1 else 0.0


class RNNSeq2Seq(RecurrentEncoder, RecurrentDecoder):
    """The recurrent family: both halves of one config, the decoder starting from the encoder's final state."""

    def __init__(self, cfg: RNNConfig, vocab: Vocab):
        super().__init__()
        self.cfg = cfg
        self.build_embeddings(vocab, cfg.embed_dim, cfg.tie_embeddings)
        self.build_encoder(cfg)
        self.build_decoder(cfg)
        self.build_output(vocab, cfg.attentional)
        INITIALISATIONS[cfg.init](self)


def nmtpytorch_initialisation(model: nn.Module) -> None:
    """nmtpytorch's draw (befa5f6 models/nmt.py reset_parameters): every parameter but the biases, the embeddings'
    and the recurrent matrices' included, from Kaiming's normal, std sqrt(2 / fan_in), padding rows too; the
    biases of its feed-forward layers zero (layers/ff.py bias_zero), the RNN's as PyTorch drew them."""
    for name, parameter in model.named_parameters():
        if "bias" not in name.rsplit(".", 1)[-1] and parameter.dim() > 1:
            nn.init.kaiming_normal_(parameter)
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)


# how a recurrent model's weights are drawn (the model block's init): after PyTorch's draw; a new draw's name goes in
# rnn_config.INITS too
INITIALISATIONS = {"pytorch": lambda model: None, "nmtpytorch": nmtpytorch_initialisation}

