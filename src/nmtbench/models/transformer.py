"""Transformer encoder-decoder (Vaswani et al. 2017), post-norm as in the paper or pre-norm, with
sinusoidal, learned or relative (Shaw et al. 2018) positions, and full, Linformer or sparse encoder
self-attention (models/efficient_attention.py).

Everything for the family's forward pass is in this file, as an encoder half and a decoder half that the family
pairs and a hybrid (models/hybrid.py) pairs with another family's; the decoder-only model reuses its layers. Its
config, the keys each half reads and its entry in the family table are in models/transformer_config.py.
Incremental decoding caches, per decoder layer, the self-attention keys and values of the target prefix
and the cross-attention keys and values of the source, so a step costs O(t d) attention work instead of
re-running the prefix.

Linformer touches only the encoder: a length projection of the decoder's keys would mix future target
positions into every row, and the source is already encoded when the decoder attends to it, so causal
self-attention and cross-attention stay full. Sparse attention may give the decoder a causal window
(`decoder_window`), whose cache then keeps only the last window + 1 keys.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from nmtbench.models.attention import scaled_dot_product
from nmtbench.models.dropout import Dropout
from nmtbench.models.efficient_attention import SparsePattern, check_length, length_projections, random_table
from nmtbench.models.interface import DecoderState, smallest
from nmtbench.models.transformer_config import TransformerConfig
from nmtbench.models.vocabulary import Vocab
from nmtbench.models.vocabulary_layers import VocabularySeq2Seq


def sinusoids(positions: torch.Tensor, d: int) -> torch.Tensor:
    """positions (...) -> (..., d) sine/cosine encodings of Vaswani et al."""
    freqs = torch.exp(torch.arange(0, d, 2, device=positions.device) * (-math.log(10000.0) / d))
    angles = positions.float().unsqueeze(-1) * freqs  # (..., d/2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # interleaved (..., d)


class RelativePositions(nn.Module):
    """Shaw et al. 2018: a learned vector a_(j-i) per clipped distance, so logit_ij += q_i . a_(j-i).

    The logits then depend on how far apart two tokens are, never on where they stand.
    """

    def __init__(self, d_head: int, clip: int):
        super().__init__()
        self.clip = clip
        self.table = nn.Embedding(2 * clip + 1, d_head)

    def forward(self, q: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """q (B, h, T, d/h), positions (T,) and (S,) -> logit bias (B, h, T, S), scaled like q.k."""
        distance = (k_pos[None, :] - q_pos[:, None]).clamp(-self.clip, self.clip) + self.clip  # (T, S)
        return torch.einsum("bhtd,tsd->bhts", q, self.table(distance)) / math.sqrt(q.size(-1))


class MultiHeadAttention(nn.Module):
    def __init__(self, d: int, heads: int, dropout: float, relative_clip: int = 0):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.relative = RelativePositions(d // heads, relative_clip) if relative_clip else None

    def split(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        return x.view(B, T, self.heads, d // self.heads).transpose(1, 2)  # (B, h, T, d/h)

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.split(self.k(x)), self.split(self.v(x))

    def forward(self, x, k, v, mask, need_weights: bool = False, positions=None):
        """x (B, T, d) attends to k, v (B, h, S, d/h) where mask (B, 1, T|1, S) is True, or as a SparsePattern says.

        positions: (query positions (T,), key positions (S,)) for relative attention.
        """
        q = self.split(self.q(x))
        if self.relative is not None:  # the bias joins the mask: -inf where masked, q.a elsewhere
            bias = self.relative(q, *positions)
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        dropout_p = self.dropout if self.training else 0.0
        if isinstance(mask, SparsePattern):  # relative positions are refused with it; it gathers the keys itself
            weights, out = None, mask(q, k, v, dropout_p)
        else:
            out, weights = scaled_dot_product(q, k, v, mask, dropout_p, need_weights)
        B, h, T, dh = out.shape
        return self.o(out.transpose(1, 2).reshape(B, T, h * dh)), weights


class FeedForward(nn.Sequential):
    def __init__(self, d: int, d_ff: int, dropout: float):
        super().__init__(nn.Linear(d, d_ff), nn.ReLU(), Dropout(dropout), nn.Linear(d_ff, d))


class Sublayer(nn.Module):
    """Residual connection around fn with the layer norm before (pre-norm) or after (post-norm) it."""

    def __init__(self, d: int, pre_norm: bool, dropout: float):
        super().__init__()
        self.norm, self.pre_norm, self.dropout = nn.LayerNorm(d), pre_norm, Dropout(dropout)

    def forward(self, x, fn):
        if self.pre_norm:
            out, extra = fn(self.norm(x))
            return x + self.dropout(out), extra
        out, extra = fn(x)
        return self.norm(x + self.dropout(out)), extra


class Layer(nn.Module):
    """Self-attention, then (in an encoder-decoder's decoder) attention to the source, then feed-forward."""

    def __init__(self, cfg: TransformerConfig, cross: bool, length_projection=None, cache_limit: int = 0):
        super().__init__()
        self.length_projection, self.cache_limit = length_projection, cache_limit
        pre = cfg.norm == "pre"
        clip = cfg.relative_clip if cfg.positions == "relative" else 0
        attention = cfg.dropout_at("attention")
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, attention, clip)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, attention) if cross else None
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout_at("activation"))
        self.sub_self, self.sub_ff = Sublayer(cfg.d_model, pre, cfg.dropout), Sublayer(cfg.d_model, pre, cfg.dropout)
        self.sub_cross = Sublayer(cfg.d_model, pre, cfg.dropout) if cross else None

    def forward(self, x, self_mask, self_kv=None, positions=None, cross_kv=None, cross_mask=None,
                need_weights=False):
        """x (B, T, d) -> (x, (k, v) of the self-attention, weights).

        self_kv: None (keys from x alone) or cached keys and values (B, h, P, d/h) that x's keys extend;
        with a cache_limit only its last cache_limit keys are kept (a causal window).
        self_mask: a boolean mask, or a SparsePattern that picks each query's keys.
        Weights are those of the attention to the source where there is one, else of the self-attention.
        """
        new_kv = []

        def self_attention(y):
            k, v = self.self_attn.project_kv(y)
            if self_kv is not None:
                k, v = torch.cat([self_kv[0], k], dim=2), torch.cat([self_kv[1], v], dim=2)
                if self.cache_limit:
                    k, v = k[:, :, -self.cache_limit:], v[:, :, -self.cache_limit:]
            new_kv.append((k, v))
            mask = self_mask
            if self.length_projection is not None:  # S keys and values -> k rows, none of them padding
                (k, v), mask = self.length_projection(k, v, self_mask[:, 0, 0]), None
            return self.self_attn(y, k, v, mask, need_weights and self.cross_attn is None, positions)

        x, weights = self.sub_self(x, self_attention)
        if self.cross_attn is not None:
            x, weights = self.sub_cross(x, lambda y: self.cross_attn(y, *cross_kv, cross_mask, need_weights))
        x, _ = self.sub_ff(x, lambda y: (self.ff(y), None))
        return x, new_kv[0], weights


class TransformerPart(VocabularySeq2Seq):
    """What both Transformer halves share: embeddings scaled by sqrt(d) plus positions, and their initialisation."""

    def build_positions(self, cfg: TransformerConfig) -> None:
        """The learned position table, one for both halves of a whole Transformer (built by the first half)."""
        if cfg.positions == "learned" and not hasattr(self, "position_table"):
            self.position_table = nn.Embedding(cfg.max_positions, cfg.d_model)

    @staticmethod
    def _positions(cfg: TransformerConfig, start: int, end: int, device) -> torch.Tensor:
        """Positions start .. end - 1 (end - start,), checked against a learned table's size on the host, so the
        check never reads the device."""
        if cfg.positions == "learned" and end > cfg.max_positions:
            raise ValueError(f"sequence of {end} tokens exceeds max_positions {cfg.max_positions}; raise "
                             "max_positions in the model block")
        return torch.arange(start, end, device=device)

    def _embed(self, cfg: TransformerConfig, words, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) of one side (words: embed_source or embed_target) at positions (T,) from _positions ->
        (B, T, d); relative positions add nothing here."""
        x = words(tokens) * math.sqrt(cfg.d_model)
        if cfg.positions == "learned":
            x = x + self.position_table(positions)
        elif cfg.positions == "sinusoidal":
            x = x + sinusoids(positions, cfg.d_model)
        return self.dropout(x)

    def initialise(self) -> None:
        """Every vocabulary matrix from N(0, d^-1/2): scaled by sqrt(d) above, an embedding enters at unit size."""
        super().initialise()
        for weight in self.vocabulary_weights():
            nn.init.normal_(weight, std=weight.size(1) ** -0.5)


def final_norm(cfg: TransformerConfig) -> nn.Module:
    """Pre-norm leaves the residual stream unnormalised, so it ends each stack with a norm."""
    return nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()


class TransformerEncoder(TransformerPart):
    """The encoder half: self-attention layers (full, Linformer or sparse) over the source. Its layers are the
    model's own attributes, named as the family always named them, so a whole TransformerSeq2Seq keeps its
    checkpoint keys and a hybrid (models/hybrid.py) takes this half alone."""

    @staticmethod
    def memory_width(cfg: TransformerConfig) -> int:
        return cfg.d_model

    def longest_source(self) -> int | None:
        cfg = self.encoder_cfg  # Linformer's projections and the sparse random block table span max_positions too
        table = cfg.positions == "learned" or cfg.self_attention != "full"
        return smallest(cfg.max_positions if table else None, super().longest_source())

    def build_encoder(self, cfg: TransformerConfig) -> None:
        self.encoder_cfg = cfg
        self.build_positions(cfg)
        projections = length_projections(cfg) if cfg.self_attention == "linformer" else [None] * cfg.layers
        self.encoder_layers = nn.ModuleList(Layer(cfg, False, projection) for projection in projections)
        self.encoder_norm = final_norm(cfg)

    def initialise(self) -> None:
        super().initialise()
        if self.encoder_cfg.self_attention == "sparse":  # from the model's seed, saved with it: it decodes alike twice
            self.register_buffer("random_blocks", random_table(self.encoder_cfg))

    def encode(self, src, src_mask):
        """Memory: enc (B, S, d), the encoder's output."""
        cfg = self.encoder_cfg
        positions = self._positions(cfg, 0, src.size(1), src.device)
        x = self._embed(cfg, self.embed_source, src, positions)  # (B, S, d)
        mask = src_mask[:, None, None, :]  # (B, 1, 1, S)
        if cfg.self_attention == "sparse":
            check_length(src.size(1), cfg.max_positions, "the random block table")
            mask = SparsePattern(src_mask, cfg.window, cfg.window, cfg.global_tokens, self.random_blocks,
                                 cfg.block_size)
        for layer in self.encoder_layers:
            x, _, _ = layer(x, mask, positions=(positions, positions))
        return {"enc": self.encoder_norm(x)}


class TransformerDecoder(TransformerPart):
    """The decoder half: causal self-attention, attention to the encoder's states, feed-forward, per layer."""

    @staticmethod
    def attended_width(cfg: TransformerConfig) -> int:
        return cfg.d_model  # the cross-attention's key and value projections read d-wide states

    @staticmethod
    def output_width(cfg: TransformerConfig) -> int:
        return cfg.d_model

    def longest_source(self) -> int | None:
        return smallest(self.longest_target(0), super().longest_source())

    def longest_target(self, source_length: int) -> int | None:
        return self.decoder_cfg.max_positions if self.decoder_cfg.positions == "learned" else None

    def build_decoder(self, cfg: TransformerConfig) -> None:
        self.decoder_cfg = cfg
        self.build_positions(cfg)
        window = cfg.decoder_window + 1 if cfg.self_attention == "sparse" and cfg.decoder_window else 0
        self.decoder_layers = nn.ModuleList(Layer(cfg, True, cache_limit=window) for _ in range(cfg.layers))
        self.decoder_norm = final_norm(cfg)

    def teacher_forced(self, memory, src_mask, tgt_in):
        cfg = self.decoder_cfg
        positions = self._positions(cfg, 0, tgt_in.size(1), tgt_in.device)
        x = self._embed(cfg, self.embed_target, tgt_in, positions)  # (B, T, d)
        causal = positions[None, :] <= positions[:, None]  # (T, T): query t sees keys up to t
        if self.decoder_layers[0].cache_limit:  # query t sees keys t - decoder_window .. t
            causal = SparsePattern(torch.ones_like(tgt_in, dtype=torch.bool), cfg.decoder_window, 0)
        cross_mask = src_mask[:, None, None, :]
        for layer in self.decoder_layers:
            x, _, _ = layer(x, causal, positions=(positions, positions),
                            cross_kv=layer.cross_attn.project_kv(memory["enc"]), cross_mask=cross_mask)
        return self.output(self.decoder_norm(x))  # (B, T, V)

    def init_state(self, memory, src_mask):
        tensors = {"mask": src_mask}
        for i, layer in enumerate(self.decoder_layers):
            tensors[f"cross{i}"] = layer.cross_attn.project_kv(memory["enc"])  # (B, h, S, d/h) twice
        return DecoderState(tensors)

    def decode_step(self, state, y_prev):
        s = state.tensors
        step = self._positions(self.decoder_cfg, state.step, state.step + 1, y_prev.device)
        x = self._embed(self.decoder_cfg, self.embed_target, y_prev.unsqueeze(1), step)  # (B, 1, d)
        cross_mask = s["mask"][:, None, None, :]
        positions = (step, torch.arange(state.step + 1, device=y_prev.device))
        tensors, last = {"mask": s["mask"]}, len(self.decoder_layers) - 1
        for i, layer in enumerate(self.decoder_layers):
            x, kv, weights = layer(x, None, s.get(f"self{i}"), positions, s[f"cross{i}"], cross_mask,
                                   need_weights=i == last)
            tensors[f"self{i}"], tensors[f"cross{i}"] = kv, s[f"cross{i}"]
        logits = self.output(self.decoder_norm(x[:, 0]))  # (B, V)
        attention = weights.mean(dim=1)[:, 0]  # heads averaged, (B, S)
        return torch.log_softmax(logits.float(), dim=-1), DecoderState(tensors, state.step + 1, attention)


class TransformerSeq2Seq(TransformerEncoder, TransformerDecoder):
    """The Transformer family: both halves of one config, sharing the learned position table where there is one."""

    def __init__(self, cfg: TransformerConfig, vocab: Vocab):
        super().__init__()
        self.cfg = cfg
        self.build_embeddings(vocab, cfg.d_model, cfg.tie_embeddings)
        self.dropout = Dropout(cfg.dropout)
        self.build_encoder(cfg)
        self.build_decoder(cfg)
        for norm in ("encoder_norm", "decoder_norm"):  # after both stacks, where the family always listed them: a
            self._modules[norm] = self._modules.pop(norm)  # saved optimiser state follows the parameters' order
        self.build_output(vocab, cfg.d_model)
        self.initialise()
        INITIALISATIONS[cfg.init](self)


def fairseq_initialisation(model: nn.Module) -> None:
    """fairseq's Transformer draw, over the PyTorch one: every Linear of the attention and the feed-forward
    Xavier-uniform, the query, key and value projections with gain 1/sqrt(2) and their biases as PyTorch drew them
    (modules/multihead_attention.py reset_parameters), the attention's output projection and the feed-forward's
    biases zero (models/transformer.py Linear); the vocabulary matrices N(0, d^-1/2) as this family draws them, with
    the padding row zero (models/transformer.py Embedding); learned positions likewise (modules/
    learned_positional_embedding.py through PositionalEmbedding). Layer norms stay at one and zero, as in both."""
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            for projection in (module.q, module.k, module.v):
                nn.init.xavier_uniform_(projection.weight, gain=2 ** -0.5)
            nn.init.xavier_uniform_(module.o.weight)
            nn.init.zeros_(module.o.bias)
        elif isinstance(module, FeedForward):
            for linear in (module[0], module[3]):
                nn.init.xavier_uniform_(linear.weight)
                nn.init.zeros_(linear.bias)
    table = getattr(model, "position_table", None)
    if table is not None:
        nn.init.normal_(table.weight, std=table.weight.size(1) ** -0.5)
    with torch.no_grad():  # the embeddings' padding rows; an output projection of its own keeps its row
        for table in {id(table): table for table in (model.embed, model.target_table())}.values():
            table.weight[model.pad_id] = 0


# how a Transformer's weights are drawn (the model block's init): after PyTorch's draw and the family's own; a new
# draw's name goes in transformer_config.INITS too
INITIALISATIONS = {"pytorch": lambda model: None, "fairseq": fairseq_initialisation}

