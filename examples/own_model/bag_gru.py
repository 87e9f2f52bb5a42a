"""An own model for nmtbench, outside its package: a GRU decoder attending over position-free source embeddings.

It asks whether word order in the encoder matters at all on Multi30k's short captions: the encoder is the
source embeddings alone (a bag of subwords the decoder attends over), the decoder a GRU with dot attention.
It implements nmtbench's Seq2Seq interface (encode, teacher_forced, init_state, decode_step), is built from its
config and the vocabularies (nmtbench.models.vocabulary.Vocab: the source's and the target's sizes, whether they
are one joint vocabulary, the pad id) and names its config in `config_class`, so params.yaml trains, tunes,
budgets, decodes and compares it like a built-in:

    models:
      bag_gru:
        family: bag_gru:BagGRU     # with examples/own_model on PYTHONPATH
        embed_dim: 256
        hidden_dim: 512
        dropout: 0.2
"""
from __future__ import annotations

import torch
from torch import nn

from nmtbench.config import Block, ConfigError
from nmtbench.models.dropout import Dropout
from nmtbench.models.interface import DecoderState, Seq2Seq
from nmtbench.models.vocabulary import Vocab


class BagGRUConfig(Block):
    embed_dim: int = 256
    hidden_dim: int = 512
    dropout: float = 0.2

    def validate(self, where: str) -> None:
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout: must be in [0, 1), got {self.dropout}")


class BagGRU(Seq2Seq):
    config_class = BagGRUConfig

    def __init__(self, cfg: BagGRUConfig, vocab: Vocab):
        super().__init__()
        self.cfg, self.pad_id = cfg, vocab.pad_id
        self.embed = nn.Embedding(vocab.source, cfg.embed_dim, padding_idx=vocab.pad_id)
        # one table for both sides when they share a vocabulary, else the target's own
        self.target_embed = self.embed if vocab.joint else nn.Embedding(vocab.target, cfg.embed_dim,
                                                                         padding_idx=vocab.pad_id)
        self.keys = nn.Linear(cfg.embed_dim, cfg.hidden_dim, bias=False)
        self.cell = nn.GRUCell(2 * cfg.embed_dim, cfg.hidden_dim)
        self.out = nn.Linear(cfg.hidden_dim + cfg.embed_dim, vocab.target)
        self.dropout = Dropout(cfg.dropout)  # nn.Dropout's semantics, cheaper masks on a CPU

    def encode(self, src, src_mask):
        memory = self.dropout(self.embed(src))  # (B, S, E): no order, no context
        return {"memory": memory, "keys": self.keys(memory)}  # keys (B, S, H)

    def init_state(self, memory, src_mask):
        mean = (memory["memory"] * src_mask.unsqueeze(-1)).sum(1) / src_mask.sum(1, keepdim=True)  # (B, E)
        hidden = mean.new_zeros(mean.size(0), self.cfg.hidden_dim)
        return DecoderState({**memory, "mask": src_mask, "mean": mean, "hidden": hidden})

    def _step(self, state, emb):
        """emb (B, E) -> output features (B, H + E) and the next state."""
        s = state.tensors
        hidden = self.cell(torch.cat([emb, s["mean"]], dim=-1), s["hidden"])  # (B, H)
        scores = (s["keys"] @ hidden.unsqueeze(-1)).squeeze(-1).masked_fill(~s["mask"], float("-inf"))  # (B, S)
        weights = scores.softmax(-1)
        context = (weights.unsqueeze(1) @ s["memory"]).squeeze(1)  # (B, E)
        return torch.cat([hidden, context], -1), DecoderState({**s, "hidden": hidden}, state.step + 1, weights)

    def teacher_forced(self, memory, src_mask, tgt_in):
        state, outputs = self.init_state(memory, src_mask), []
        for emb in self.dropout(self.target_embed(tgt_in)).unbind(1):
            features, state = self._step(state, emb)
            outputs.append(features)
        return self.out(self.dropout(torch.stack(outputs, 1)))  # (B, T, V)

    def decode_step(self, state, y_prev):
        features, state = self._step(state, self.target_embed(y_prev))
        return torch.log_softmax(self.out(features).float(), -1), state
