"""Encoder-decoder attention for the recurrent family: dot and general (Luong), reduced-rank general
(W = U^T V), additive (Bahdanau); and the Transformers' scaled dot product with dropout on its weights.

Each scorer splits its work in two: `keys(encoder_outputs)` runs once per source sentence (and is cached
in the decoder state), `scores(query, keys)` runs once per target step. That split is what makes
incremental decoding cheap for additive attention, whose key projection would otherwise be redone per step.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.models.dropout import dropout


class DotScorer(nn.Module):
    def __init__(self, query_dim: int, key_dim: int, rank: int):
        super().__init__()
        if query_dim != key_dim:
            raise ValueError(f"dot attention needs equal query and key sizes, got {query_dim} and {key_dim}")

    def keys(self, enc: torch.Tensor) -> torch.Tensor:
        return enc  # (B, S, H)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return query @ keys.transpose(1, 2)  # (B, T, H) x (B, H, S) -> (B, T, S)


class GeneralScorer(DotScorer):
    def __init__(self, query_dim: int, key_dim: int, rank: int):
        nn.Module.__init__(self)
        self.proj = nn.Linear(key_dim, query_dim, bias=False)  # W in q^T W k

    def keys(self, enc: torch.Tensor) -> torch.Tensor:
        return self.proj(enc)  # (B, S, Hq)


class ReducedRankScorer(DotScorer):
    """q^T U^T V k: the general score with W restricted to rank r, i.e. 2 r H parameters instead of H^2."""

    def __init__(self, query_dim: int, key_dim: int, rank: int):
        nn.Module.__init__(self)
        self.u = nn.Linear(query_dim, rank, bias=False)
        self.v = nn.Linear(key_dim, rank, bias=False)

    def keys(self, enc: torch.Tensor) -> torch.Tensor:
        return self.v(enc)  # (B, S, r)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return self.u(query) @ keys.transpose(1, 2)  # (B, T, r) x (B, r, S) -> (B, T, S)


class AdditiveScorer(nn.Module):
    def __init__(self, query_dim: int, key_dim: int, rank: int):
        super().__init__()
        self.key_proj = nn.Linear(key_dim, key_dim, bias=False)
        self.query_proj = nn.Linear(query_dim, key_dim, bias=False)
        self.energy = nn.Linear(key_dim, 1, bias=False)

    def keys(self, enc: torch.Tensor) -> torch.Tensor:
        return self.key_proj(enc)  # (B, S, K)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        q = self.query_proj(query).unsqueeze(2)  # (B, T, 1, K)
        return self.energy(torch.tanh(q + keys.unsqueeze(1))).squeeze(-1)  # (B, T, S)


# a new scorer's name goes in rnn_config.ATTENTION_KINDS too, which the config checks without torch
SCORERS = {"dot": DotScorer, "general": GeneralScorer, "reduced_rank": ReducedRankScorer, "additive": AdditiveScorer}


def attend(scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over source positions that are not padding; returns context (B, T, H) and weights (B, T, S)."""
    scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ values, weights


def scaled_dot_product(q, k, v, mask, dropout_p: float = 0.0, need_weights: bool = False):
    """softmax(q k^T / sqrt(d/h) + mask) v for q (B, h, T, d/h) and k, v (B, h, S, d/h).

    mask: None, boolean (True where a query may attend) or a float bias, broadcast to (B, h, T, S).
    Returns the output (B, h, T, d/h) and, when asked or when dropping, the weights before dropout.
    With neither, torch's fused kernel does it all; with dropout it is written out, because the fused
    kernel's dropout draws its masks with bernoulli_, the cost models/dropout.py removes.
    """
    if not dropout_p and not need_weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores + mask if mask.is_floating_point() else scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, h, T, S)
    return dropout(weights, dropout_p) @ v, weights
