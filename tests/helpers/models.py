"""Tiny models: every registered variant, small enough for exhaustive tests."""
from __future__ import annotations

import torch

from nmtbench.models.registry import build_model

# Tiny models: one entry per variant the shared model and search tests run on.
V, PAD, BOS, EOS = 20, 0, 2, 3

RNN = {"family": "rnn", "embed_dim": 12, "hidden_dim": 16, "dropout": 0.0}
TRANSFORMER = {"family": "transformer", "d_model": 16, "heads": 2, "layers": 2, "d_ff": 32, "dropout": 0.0}
TINY_VARIANTS = {
    **{f"{cell}_{attention}": {**RNN, "cell": cell, "attention": attention}
       for cell in ("rnn", "gru", "lstm") for attention in ("none", "dot", "general", "reduced_rank", "additive")},
    "lstm_uni_no_feeding": {**RNN, "bidirectional": False, "input_feeding": False, "layers": 2},
    "gru_additive_2layers": {**RNN, "cell": "gru", "layers": 2},
    "transformer_post": TRANSFORMER,
    "transformer_pre": {**TRANSFORMER, "norm": "pre"},
    "transformer_learned": {**TRANSFORMER, "positions": "learned", "max_positions": 32},
    "transformer_relative": {**TRANSFORMER, "positions": "relative", "relative_clip": 3},
    "decoder_only": {**TRANSFORMER, "family": "decoder_only"},
    "decoder_only_prefix_learned": {**TRANSFORMER, "family": "decoder_only", "prefix_attention": True,
                                    "positions": "learned", "norm": "post"},
    "cnn": {"family": "cnn", "embed_dim": 12, "channels": 16, "kernel": 3, "dropout": 0.0},
    "cnn_wide_kernel": {"family": "cnn", "embed_dim": 12, "channels": 16, "kernel": 5, "encoder_layers": 3,
                        "decoder_layers": 1, "dropout": 0.0},
}


def make_tiny_model(name, seed=0):
    """A tiny model of every registered variant, in eval mode, the same for the same seed."""
    torch.manual_seed(seed)
    return build_model(name, TINY_VARIANTS[name], V, PAD).eval()
