"""The lecture's two answers to quadratic self-attention, for the Transformer's encoder: Linformer and
BigBird-style sparse attention.

Linformer (Wang et al. 2020) projects the keys and values along the length, S rows -> k rows, with
learned E and F (k x max_positions, sliced to the batch's length), so the attention costs O(S k).
Padding is zeroed before the projection: extra padding adds nothing to the k rows.

Sparse attention (Zaheer et al. 2020, BigBird) lets each query see a local window, the first
`global_tokens` positions (which in turn see everything) and a few random blocks. The keys of each
query are gathered, never masked out of a dense S x S matrix, so a layer costs O(S (window + global
+ random)). Every query has the same number of key slots, short sentences included (slots beyond the
sentence are masked, not dropped), so the cost is an exact polynomial in S and the budget's
interpolation counts it.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.models.attention import scaled_dot_product
from nmtbench.models.dropout import dropout


def check_length(length: int, max_positions: int, what: str) -> None:
    if length > max_positions:
        raise ValueError(f"sequence of {length} tokens exceeds max_positions {max_positions} of {what}; "
                         "raise max_positions in the model block")


class LengthProjection(nn.Module):
    """Linformer's E (keys) and F (values): (heads or 1, k, max_positions); F is E when they are shared."""

    def __init__(self, heads: int, k: int, max_positions: int, share_kv: bool):
        super().__init__()
        self.e = nn.Parameter(torch.randn(heads, k, max_positions) * k ** -0.5)
        self.f = self.e if share_kv else nn.Parameter(torch.randn(heads, k, max_positions) * k ** -0.5)

    def forward(self, k, v, key_mask):
        """k, v (B, h, S, d/h), key_mask (B, S) -> k, v (B, h, k, d/h), none of whose rows is padding."""
        S = k.size(2)
        check_length(S, self.e.size(-1), "the Linformer projection")
        real = key_mask[:, None, :, None]  # (B, 1, S, 1): padding is zeroed before it can mix into a row
        return self.e[..., :S] @ k.masked_fill(~real, 0.0), self.f[..., :S] @ v.masked_fill(~real, 0.0)


def length_projections(cfg) -> list[LengthProjection]:
    """One projection per encoder layer, shared as linformer_sharing says (the paper's variants):
    none: E, F per head; headwise: E, F per layer; key_value: E = F per layer; layerwise: one E = F."""
    heads = cfg.heads if cfg.linformer_sharing == "none" else 1
    share_kv = cfg.linformer_sharing in ("key_value", "layerwise")
    if cfg.linformer_sharing == "layerwise":
        return [LengthProjection(heads, cfg.linformer_k, cfg.max_positions, share_kv)] * cfg.layers
    return [LengthProjection(heads, cfg.linformer_k, cfg.max_positions, share_kv) for _ in range(cfg.layers)]


def random_table(cfg) -> torch.Tensor:
    """(query blocks, random_blocks) key block numbers, drawn once from the model's seed."""
    blocks = math.ceil(cfg.max_positions / cfg.block_size)
    return torch.randint(0, blocks, (blocks, cfg.random_blocks))


class SparsePattern:
    """Which keys each query of a batch sees; built once per batch and shared by every layer.

    Query i sees the window i - before .. i + after, the first `global_tokens` positions and the
    random blocks of its query block (positions taken modulo its sentence's length, so they are real
    tokens and do not move with extra padding). A key that two of these parts both hold counts once.
    The global positions also attend as queries to every key.
    """

    def __init__(self, key_mask, before: int, after: int, global_tokens: int = 0, table=None, block_size: int = 1):
        B, S = key_mask.shape
        self.key_mask, self.before, self.after, self.g = key_mask, before, after, global_tokens
        query = torch.arange(S, device=key_mask.device)[:, None]  # (S, 1)

        def outside_window(key):
            return (key < query - before) | (key > query + after)

        local = F.pad(key_mask, (before, after)).unfold(1, before + after + 1, 1)  # (B, S, W)
        glob = torch.arange(global_tokens, device=key_mask.device)
        glob_ok = F.pad(key_mask, (0, max(0, global_tokens - S)))[:, None, :global_tokens] & outside_window(glob)
        self.random = None
        parts = [local, glob_ok.expand(B, S, global_tokens)]
        if table is not None and table.size(1):
            offsets = torch.arange(block_size, device=key_mask.device)
            keys = (table[query[:, 0] // block_size, :, None] * block_size + offsets).flatten(1)  # (S, R)
            length = key_mask.sum(1).clamp(min=1)[:, None, None]  # (B, 1, 1)
            self.random = keys[None] % length  # (B, S, R)
            ordered, order = self.random.sort(dim=-1)  # a key drawn twice counts once: mask its repeats
            repeated = torch.zeros_like(ordered, dtype=torch.bool).scatter(
                -1, order, F.pad(ordered[..., 1:] == ordered[..., :-1], (1, 0)))
            real = key_mask.gather(1, self.random.flatten(1)).view_as(self.random)
            parts.append(real & outside_window(self.random) & (self.random >= global_tokens) & ~repeated)
        self.visible = torch.cat(parts, dim=-1)[:, None]  # (B, 1, S, W + g + R)

    def __call__(self, q, k, v, dropout_p: float):
        """q, k, v (B, h, S, d/h) -> attention output (B, h, S, d/h)."""
        B, h, S, dh = k.shape
        width, g = self.before + self.after + 1, self.g

        def windows(x):  # (B, h, S, d/h, W): the window of every query, a strided view
            return F.pad(x, (0, 0, self.before, self.after)).unfold(2, width, 1)

        def first(x, n):  # (B, h, n, d/h): the first n rows, zero rows past the end
            return F.pad(x, (0, 0, 0, max(0, n - x.size(2))))[:, :, :n]

        def gathered(x):  # (B, h, S, R, d/h): every query's random keys
            index = self.random.flatten(1)[:, None, :, None].expand(B, h, -1, dh)
            return x.gather(2, index).view(B, h, S, -1, dh)

        k_win, k_glob = windows(k), first(k, g)
        scores = [torch.einsum("bhsd,bhsdw->bhsw", q, k_win), q @ k_glob.transpose(-1, -2)]
        if self.random is not None:
            scores.append(torch.einsum("bhsd,bhsrd->bhsr", q, gathered(k)))
        scores = torch.cat(scores, dim=-1) / math.sqrt(dh)  # (B, h, S, W + g + R)
        # a finite floor, not -inf: a padding query far past its sentence sees no key and must stay finite
        scores = scores.masked_fill(~self.visible, torch.finfo(scores.dtype).min)
        weights = dropout(torch.softmax(scores, dim=-1), dropout_p)
        w_win, w_glob, w_rand = weights.split([width, g, weights.size(-1) - width - g], dim=-1)
        out = torch.einsum("bhsw,bhsdw->bhsd", w_win, windows(v)) + w_glob @ first(v, g)
        if self.random is not None:
            out = out + torch.einsum("bhsr,bhsrd->bhsd", w_rand, gathered(v))
        if not g:
            return out
        key_mask = self.key_mask[:, None, None, :]
        everything, _ = scaled_dot_product(first(q, g), k, v, key_mask, dropout_p)  # (B, h, g, d/h)
        return torch.cat([everything[:, :, :S], out[:, :, g:]], dim=2)
