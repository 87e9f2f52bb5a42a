"""Decoder-only Transformer for translation: source, separator, target in one causal stream.

The source is the prompt: `encode` runs it through the stack once and keeps every layer's keys and
values, and the target continues the same stream, so the model has one stack where the
encoder-decoder has two (about half the parameters at the same depth). The target's bos token is the
separator. With `prefix_attention` the source positions see the whole source (a prefix LM);
without it the whole stream is causal. Source padding is masked and skipped by the position count,
so the target of a short sentence starts right after its last real source token. With one vocabulary per
side (tokenize.joint: false) the source positions read the source embedding and the target positions the
target's: the segment says which table a position comes from. Its config and its entry in the family table are
in models/decoder_only_config.py.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from nmtbench.models.decoder_only_config import DecoderOnlyConfig
from nmtbench.models.dropout import Dropout
from nmtbench.models.interface import DecoderState
from nmtbench.models.transformer import INITIALISATIONS, Layer, sinusoids
from nmtbench.models.vocabulary import Vocab
from nmtbench.models.vocabulary_layers import VocabularySeq2Seq


class DecoderOnlySeq2Seq(VocabularySeq2Seq):
    SOURCE, TARGET = 0, 1  # segment ids: which language a position holds

    def __init__(self, cfg: DecoderOnlyConfig, vocab: Vocab):
        super().__init__()
        self.cfg = cfg
        self.build_embeddings(vocab, cfg.d_model, cfg.tie_embeddings)
        self.segment = nn.Embedding(2, cfg.d_model)
        if cfg.positions == "learned":
            self.position_table = nn.Embedding(cfg.max_positions, cfg.d_model)
        self.dropout = Dropout(cfg.dropout)
        self.layers = nn.ModuleList(Layer(cfg, cross=False) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.build_output(vocab, cfg.d_model)
        for weight in self.vocabulary_weights():
            nn.init.normal_(weight, std=cfg.d_model ** -0.5)
        INITIALISATIONS[cfg.init](self)

    def longest_source(self) -> int | None:
        """Half the learned positions: the source and its translation, about as long, share one stream."""
        return self.cfg.max_positions // 2 if self.cfg.positions == "learned" else None

    def longest_target(self, source_length: int) -> int | None:
        return self.cfg.max_positions - source_length if self.cfg.positions == "learned" else None

    def _embed(self, tokens, positions, segment: int, stream: int | None):
        """tokens (B, T) of the segment's side at positions (B, T) -> (B, T, d). stream: the longest stream's length
        where the host knows it (a padded batch is as wide as its longest source); else it is read off the device."""
        words = self.embed_source if segment == self.SOURCE else self.embed_target
        x = words(tokens) * math.sqrt(self.cfg.d_model) + self.segment.weight[segment]
        if self.cfg.positions == "learned":
            stream = int(positions.max()) + 1 if stream is None else stream
            if stream > self.cfg.max_positions:
                raise ValueError(f"stream of {stream} tokens exceeds max_positions {self.cfg.max_positions}; raise "
                                 "max_positions in the model block")
            x = x + self.position_table(positions)
        else:
            x = x + sinusoids(positions, self.cfg.d_model)
        return self.dropout(x)

    def encode(self, src, src_mask):
        """Run the source prompt; memory holds each layer's keys and values (B, h, S, d/h)."""
        positions = (src_mask.cumsum(1) - 1).clamp(min=0)  # (B, S); padding never advances the count
        S = src.size(1)
        order = torch.arange(S, device=src.device)
        visible = torch.ones(S, S, dtype=torch.bool, device=src.device) if self.cfg.prefix_attention \
            else order[None, :] <= order[:, None]
        mask = visible[None, None] & src_mask[:, None, None, :]  # (B, 1, S, S)
        x, cache = self._embed(src, positions, self.SOURCE, S), []
        for layer in self.layers:
            x, kv, _ = layer(x, mask)
            cache.append(kv)
        return {"kv": cache, "length": src_mask.sum(1)}  # length (B,): where the target starts

    def _continue(self, memory_kv, length, src_mask, tokens, start: int, need_weights=False):
        """Target tokens (B, T) at target steps start.. -> hidden (B, T, d), new keys/values, weights. From step 0
        the longest source is the mask's width; a decoding step's rows may have lost it (finished hypotheses left)."""
        T = tokens.size(1)
        steps = torch.arange(start, start + T, device=tokens.device)
        stream = src_mask.size(1) + T if start == 0 else None
        x = self._embed(tokens, length[:, None] + steps[None, :], self.TARGET, stream)
        causal = torch.arange(start + T, device=tokens.device)[None, :] <= steps[:, None]  # (T, start + T)
        mask = torch.cat([src_mask[:, None, :].expand(-1, T, -1), causal[None].expand(len(tokens), -1, -1)], dim=2)
        mask = mask[:, None]  # (B, 1, T, S + start + T)
        cache, weights = [], None
        for i, layer in enumerate(self.layers):
            x, kv, weights = layer(x, mask, memory_kv[i], need_weights=need_weights and i == len(self.layers) - 1)
            cache.append(kv)
        return self.norm(x), cache, weights

    def teacher_forced(self, memory, src_mask, tgt_in):
        x, _, _ = self._continue(memory["kv"], memory["length"], src_mask, tgt_in, 0)
        return self.output(x)  # (B, T, V)

    def init_state(self, memory, src_mask):
        return DecoderState({"kv": tuple(memory["kv"]), "length": memory["length"], "mask": src_mask})

    def decode_step(self, state, y_prev):
        s = state.tensors
        x, cache, weights = self._continue(s["kv"], s["length"], s["mask"], y_prev[:, None], state.step,
                                           need_weights=True)
        # the new cache holds source + prefix; the source part of the mask stays as it was
        state = DecoderState({**s, "kv": tuple(cache)}, state.step + 1, weights.mean(dim=1)[:, 0])
        return torch.log_softmax(self.output(x[:, 0]).float(), dim=-1), state

