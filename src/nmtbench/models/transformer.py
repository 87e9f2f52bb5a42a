"""Transformer encoder-decoder (Vaswani et al. 2017), post-norm as in the paper or pre-norm.

Everything for the family's forward pass is in this file. Incremental decoding caches, per decoder
layer, the self-attention keys and values of the target prefix and the cross-attention keys and values
of the source, so a step costs O(t d) attention work instead of re-running the prefix.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.config import ConfigError, choice
from nmtbench.models.interface import DecoderState, Seq2Seq

NORMS = ("post", "pre")
POSITIONS = ("sinusoidal", "learned")


@dataclass
class TransformerConfig:
    norm: str = "post"
    positions: str = "sinusoidal"
    d_model: int = 256
    heads: int = 4
    layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1
    max_positions: int = 512  # size of the learned position table; sinusoids have no limit

    def validate(self, where: str) -> None:
        choice(f"{where}.norm", self.norm, NORMS)
        choice(f"{where}.positions", self.positions, POSITIONS)
        if self.d_model % self.heads:
            raise ConfigError(f"{where}: d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        if min(self.d_model, self.heads, self.layers, self.d_ff, self.max_positions) < 1:
            raise ConfigError(f"{where}: d_model, heads, layers, d_ff and max_positions must be positive")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout: must be in [0, 1), got {self.dropout}")


def sinusoids(positions: torch.Tensor, d: int) -> torch.Tensor:
    """positions (T,) -> (T, d) sine/cosine encodings of Vaswani et al."""
    freqs = torch.exp(torch.arange(0, d, 2, device=positions.device) * (-math.log(10000.0) / d))
    angles = positions.float().unsqueeze(1) * freqs  # (T, d/2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # interleaved (T, d)


class MultiHeadAttention(nn.Module):
    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def split(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        return x.view(B, T, self.heads, d // self.heads).transpose(1, 2)  # (B, h, T, d/h)

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.split(self.k(x)), self.split(self.v(x))

    def forward(self, x, k, v, mask, need_weights: bool = False):
        """x (B, T, d) attends to k, v (B, h, S, d/h) where mask (B, 1, T|1, S) is True."""
        q = self.split(self.q(x))
        if need_weights:  # the fused kernel does not return weights; compute them explicitly
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.size(-1))
            weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (B, h, T, S)
            out = weights @ v
        else:
            weights = None
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                 dropout_p=self.dropout if self.training else 0.0)
        B, h, T, dh = out.shape
        return self.o(out.transpose(1, 2).reshape(B, T, h * dh)), weights


class FeedForward(nn.Sequential):
    def __init__(self, d: int, d_ff: int, dropout: float):
        super().__init__(nn.Linear(d, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d))


class Sublayer(nn.Module):
    """Residual connection around fn with the layer norm before (pre-norm) or after (post-norm) it."""

    def __init__(self, d: int, pre_norm: bool, dropout: float):
        super().__init__()
        self.norm, self.pre_norm, self.dropout = nn.LayerNorm(d), pre_norm, nn.Dropout(dropout)

    def forward(self, x, fn):
        if self.pre_norm:
            out, extra = fn(self.norm(x))
            return x + self.dropout(out), extra
        out, extra = fn(x)
        return self.norm(x + self.dropout(out)), extra


class EncoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        pre = cfg.norm == "pre"
        self.attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.sub_attn, self.sub_ff = (Sublayer(cfg.d_model, pre, cfg.dropout) for _ in range(2))

    def forward(self, x, mask):
        x, _ = self.sub_attn(x, lambda y: self.attn(y, *self.attn.project_kv(y), mask))
        x, _ = self.sub_ff(x, lambda y: (self.ff(y), None))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.sub_self, self.sub_cross, self.sub_ff = (Sublayer(cfg.d_model, pre, cfg.dropout) for _ in range(3))

    def forward(self, x, self_kv, self_mask, cross_kv, cross_mask, need_weights=False):
        """self_kv: None (teacher forcing: keys from x) or the cached prefix (k, v), extended here."""
        new_kv = []

        def self_attention(y):
            k, v = self.self_attn.project_kv(y)
            if self_kv is not None:
                k, v = torch.cat([self_kv[0], k], dim=2), torch.cat([self_kv[1], v], dim=2)
            new_kv.append((k, v))
            return self.self_attn(y, k, v, self_mask)

        x, _ = self.sub_self(x, self_attention)
        x, weights = self.sub_cross(x, lambda y: self.cross_attn(y, *cross_kv, cross_mask, need_weights))
        x, _ = self.sub_ff(x, lambda y: (self.ff(y), None))
        return x, new_kv[0], weights


class TransformerSeq2Seq(Seq2Seq):
    def __init__(self, cfg: TransformerConfig, vocab_size: int, pad_id: int):
        super().__init__()
        self.cfg, self.pad_id = cfg, pad_id
        self.embed = nn.Embedding(vocab_size, cfg.d_model, padding_idx=pad_id)  # joint vocabulary: shared
        if cfg.positions == "learned":
            self.position_table = nn.Embedding(cfg.max_positions, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers))
        # pre-norm leaves the residual stream unnormalised, so it ends each stack with a norm
        final_norm = (lambda: nn.LayerNorm(cfg.d_model)) if cfg.norm == "pre" else nn.Identity
        self.encoder_norm, self.decoder_norm = final_norm(), final_norm()
        self.output = nn.Linear(cfg.d_model, vocab_size, bias=False)
        self.output.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=cfg.d_model ** -0.5)

    def _embed(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """tokens (B, T) at positions offset..offset+T-1 -> (B, T, d)."""
        positions = torch.arange(offset, offset + tokens.size(1), device=tokens.device)
        if self.cfg.positions == "learned":
            if positions[-1] >= self.cfg.max_positions:
                raise ValueError(f"sequence of {positions[-1] + 1} tokens exceeds max_positions "
                                 f"{self.cfg.max_positions}; raise max_positions in the model block")
            pos = self.position_table(positions)
        else:
            pos = sinusoids(positions, self.cfg.d_model)
        return self.dropout(self.embed(tokens) * math.sqrt(self.cfg.d_model) + pos)

    def encode(self, src, src_mask):
        x = self._embed(src)  # (B, S, d)
        mask = src_mask[:, None, None, :]  # (B, 1, 1, S)
        for layer in self.encoder_layers:
            x = layer(x, mask)
        return self.encoder_norm(x)

    def teacher_forced(self, memory, src_mask, tgt_in):
        T = tgt_in.size(1)
        x = self._embed(tgt_in)  # (B, T, d)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None, None]  # (1, 1, T, T)
        cross_mask = src_mask[:, None, None, :]
        for layer in self.decoder_layers:
            x, _, _ = layer(x, None, causal, layer.cross_attn.project_kv(memory), cross_mask)
        return self.output(self.decoder_norm(x))  # (B, T, V)

    def init_state(self, memory, src_mask):
        tensors = {"mask": src_mask}
        for i, layer in enumerate(self.decoder_layers):
            tensors[f"cross{i}"] = layer.cross_attn.project_kv(memory)  # (B, h, S, d/h) twice
        return DecoderState(tensors)

    def decode_step(self, state, y_prev):
        s = state.tensors
        x = self._embed(y_prev.unsqueeze(1), offset=state.step)  # (B, 1, d)
        cross_mask = s["mask"][:, None, None, :]
        tensors, last = {"mask": s["mask"]}, len(self.decoder_layers) - 1
        for i, layer in enumerate(self.decoder_layers):
            x, kv, weights = layer(x, s.get(f"self{i}"), None, s[f"cross{i}"], cross_mask, need_weights=i == last)
            tensors[f"self{i}"], tensors[f"cross{i}"] = kv, s[f"cross{i}"]
        logits = self.output(self.decoder_norm(x[:, 0]))  # (B, V)
        attention = weights.mean(dim=1)[:, 0]  # heads averaged, (B, S)
        return torch.log_softmax(logits.float(), dim=-1), DecoderState(tensors, state.step + 1, attention)
