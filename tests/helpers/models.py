"""Tiny models: every registered variant, small enough for exhaustive tests."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from nmtbench.models.interface import DecoderState, Seq2Seq
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab

# the worked example of an own model, outside the package, imported as params.yaml would name it
sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "own_model"))

# Tiny models: one entry per variant the shared model and search tests run on.
V, PAD, BOS, EOS = 20, 0, 2, 3
# The variants of SEPARATE read a source vocabulary of V_SOURCE pieces and write a target vocabulary of V; the
# others one joint vocabulary of V. A source larger than the target: the tests' ids (4 to V) fit either side, and
# a side mixed up shows as a source id out of range or logits of the wrong width.
V_SOURCE = 23

RNN = {"family": "rnn", "embed_dim": 12, "hidden_dim": 16, "dropout": 0.0}
TRANSFORMER = {"family": "transformer", "d_model": 16, "heads": 2, "layers": 2, "d_ff": 32, "dropout": 0.0}
# Hybrids: every encoder x decoder pair of two families (the families are the pairs of one), at the tiny sizes.
# The recurrent decoder attends at 24 and the recurrent encoder gives 20-wide states, so those pairs run through
# the memory projection; the others meet at 16 without one.
ENCODERS = {"transformer": {"family": "transformer", "d_model": 16, "heads": 2, "layers": 2, "d_ff": 32},
            "rnn": {"family": "rnn", "embed_dim": 16, "hidden_dim": 20},
            "cnn": {"family": "cnn", "embed_dim": 16, "channels": 16, "kernel": 3}}
DECODERS = {**ENCODERS, "rnn": {"family": "rnn", "cell": "lstm", "embed_dim": 16, "hidden_dim": 24,
                                "attention": "general"}}
HYBRIDS = {
    **{f"hybrid_{encoder}_{decoder}": {"family": "hybrid", "encoder": ENCODERS[encoder], "decoder": DECODERS[decoder],
                                       "dropout": 0.0}
       for encoder in ENCODERS for decoder in DECODERS if encoder != decoder},
    # other cells, attentions, stacks and tyings on either side
    "hybrid_transformer_gru_untied": {"family": "hybrid", "tie_embeddings": "none", "dropout": 0.0,
                                      "encoder": {**ENCODERS["transformer"], "norm": "pre", "positions": "learned"},
                                      "decoder": {"family": "rnn", "cell": "gru", "embed_dim": 12, "hidden_dim": 16,
                                                  "attention": "additive", "attentional_dim": 20}},
    "hybrid_sparse_rnn_dot": {"family": "hybrid", "dropout": 0.0,
                              "encoder": {**ENCODERS["transformer"], "self_attention": "sparse", "window": 1,
                                          "global_tokens": 1, "random_blocks": 1, "block_size": 2,
                                          "max_positions": 16},
                              "decoder": {"family": "rnn", "cell": "rnn", "embed_dim": 16, "hidden_dim": 16,
                                          "attention": "dot", "input_feeding": False, "layers": 2}},
    "hybrid_gru_transformer_source_target": {"family": "hybrid", "tie_embeddings": "source_target", "dropout": 0.0,
                                             "encoder": {**ENCODERS["rnn"], "cell": "gru", "bidirectional": False},
                                             "decoder": {**DECODERS["transformer"], "positions": "relative",
                                                         "relative_clip": 3}},
    # the recurrent decoder's starts after another family's encoder: a bridge from the memory, with attention and
    # with none (the bridge then being its only way to the source)
    "hybrid_transformer_lstm_bridge": {"family": "hybrid", "dropout": 0.0, "encoder": ENCODERS["transformer"],
                                       "decoder": {**DECODERS["rnn"], "init_hidden": "bridge"}},
    "hybrid_cnn_gru_bridge_no_attention": {"family": "hybrid", "dropout": 0.0, "encoder": ENCODERS["cnn"],
                                           "decoder": {"family": "rnn", "cell": "gru", "embed_dim": 16,
                                                       "hidden_dim": 16, "attention": "none", "layers": 2,
                                                       "init_hidden": "bridge"}},
    "hybrid_cnn_transformer_target_output": {"family": "hybrid", "tie_embeddings": "target_output", "dropout": 0.0,
                                             "encoder": {**ENCODERS["cnn"], "embed_dim": 12, "encoder_layers": 3},
                                             "decoder": {**DECODERS["transformer"], "norm": "pre"}},
}
TINY_VARIANTS = {
    **{f"{cell}_{attention}": {**RNN, "cell": cell, "attention": attention}
       for cell in ("rnn", "gru", "lstm") for attention in ("none", "dot", "general", "reduced_rank", "additive")},
    "lstm_uni_no_feeding": {**RNN, "bidirectional": False, "input_feeding": False, "layers": 2},
    "gru_additive_2layers": {**RNN, "cell": "gru", "layers": 2},
    "lstm_general_bridge": {**RNN, "attention": "general", "init_hidden": "bridge", "layers": 2},
    "lstm_general_zero": {**RNN, "attention": "general", "init_hidden": "zero"},
    "transformer_post": TRANSFORMER,
    "transformer_pre": {**TRANSFORMER, "norm": "pre"},
    "transformer_learned": {**TRANSFORMER, "positions": "learned", "max_positions": 32},
    "transformer_relative": {**TRANSFORMER, "positions": "relative", "relative_clip": 3},
    "transformer_linformer": {**TRANSFORMER, "self_attention": "linformer", "linformer_k": 5, "max_positions": 16,
                              "linformer_sharing": "none"},
    "transformer_linformer_layerwise": {**TRANSFORMER, "self_attention": "linformer", "linformer_k": 3,
                                        "max_positions": 16, "linformer_sharing": "layerwise", "norm": "pre"},
    # window 1, 1 global token and one random block of 2 leave some source tokens unseen by some queries
    "transformer_sparse": {**TRANSFORMER, "self_attention": "sparse", "window": 1, "global_tokens": 1,
                           "random_blocks": 1, "block_size": 2, "max_positions": 16},
    "transformer_sparse_decoder_window": {**TRANSFORMER, "self_attention": "sparse", "window": 2, "global_tokens": 0,
                                          "random_blocks": 2, "block_size": 1, "decoder_window": 2,
                                          "max_positions": 32, "positions": "learned"},
    "decoder_only": {**TRANSFORMER, "family": "decoder_only"},
    "decoder_only_prefix_learned": {**TRANSFORMER, "family": "decoder_only", "prefix_attention": True,
                                    "positions": "learned", "norm": "post"},
    "cnn": {"family": "cnn", "embed_dim": 12, "channels": 16, "kernel": 3, "dropout": 0.0},
    "cnn_wide_kernel": {"family": "cnn", "embed_dim": 12, "channels": 16, "kernel": 5, "encoder_layers": 3,
                        "decoder_layers": 1, "dropout": 0.0},
    "own_bag_gru": {"family": "bag_gru:BagGRU", "embed_dim": 12, "hidden_dim": 16, "dropout": 0.0},
    # tie_embeddings and one vocabulary per side (SEPARATE), every family; a_t wider than the embeddings when untied
    "gru_additive_untied": {**RNN, "cell": "gru", "tie_embeddings": "none", "attentional_dim": 20},
    "lstm_general_target_output": {**RNN, "attention": "general", "tie_embeddings": "target_output"},
    "lstm_additive_source_target": {**RNN, "tie_embeddings": "source_target", "attentional_dim": 20},
    "rnn_none_separate": {**RNN, "cell": "rnn", "attention": "none"},
    "transformer_untied": {**TRANSFORMER, "tie_embeddings": "none"},
    "transformer_target_output": {**TRANSFORMER, "norm": "pre", "tie_embeddings": "target_output"},
    "decoder_only_separate": {**TRANSFORMER, "family": "decoder_only"},
    "decoder_only_untied": {**TRANSFORMER, "family": "decoder_only", "prefix_attention": True,
                            "tie_embeddings": "none"},
    "cnn_untied": {"family": "cnn", "embed_dim": 12, "channels": 16, "kernel": 3, "dropout": 0.0,
                   "tie_embeddings": "none"},
    "cnn_target_output": {"family": "cnn", "embed_dim": 12, "channels": 16, "kernel": 3, "dropout": 0.0,
                          "tie_embeddings": "target_output"},
    "own_bag_gru_separate": {"family": "bag_gru:BagGRU", "embed_dim": 12, "hidden_dim": 16, "dropout": 0.0},
    **HYBRIDS,
}
SEPARATE = {"gru_additive_untied", "rnn_none_separate", "transformer_untied", "decoder_only_separate",
            "decoder_only_untied", "cnn_untied", "own_bag_gru_separate", "hybrid_transformer_gru_untied",
            "hybrid_cnn_transformer_target_output"}


def attends(name) -> bool:
    """Whether the variant's decoder attends to the source (a recurrent one may not; a hybrid's decoder says)."""
    block = TINY_VARIANTS[name]
    return (block["decoder"] if block["family"] == "hybrid" else block).get("attention", "dot") != "none"


def tiny_vocab(name) -> Vocab:
    return Vocab.of(V_SOURCE, V, PAD) if name in SEPARATE else Vocab.of(V, pad_id=PAD)


def make_tiny_model(name, seed=0):
    """A tiny model of every registered variant, in eval mode, the same for the same seed."""
    torch.manual_seed(seed)
    return build_model(name, TINY_VARIANTS[name], tiny_vocab(name)).eval()


class Bigram(Seq2Seq):
    """A decoder whose next token depends on the previous one alone, from a table small enough to search by hand:
    after bos a 0.6, b 0.3, eos 0.1; after a eos 0.5, b 0.4, a 0.1; after b eos 0.9, a and b 0.05. It attends to
    every source piece alike."""
    A, B = 4, 5
    TABLE = {BOS: {A: 0.6, B: 0.3, EOS: 0.1}, A: {EOS: 0.5, B: 0.4, A: 0.1}, B: {EOS: 0.9, A: 0.05, B: 0.05}}

    def __init__(self):
        super().__init__()
        log_probs = torch.full((V, V), float("-inf"))  # (previous token, next token)
        for previous, row in self.TABLE.items():
            for token, p in row.items():
                log_probs[previous, token] = math.log(p)
        self.log_probs = torch.nn.Parameter(log_probs, requires_grad=False)  # a parameter: decoders find the device

    def encode(self, src, src_mask):
        return src

    def init_state(self, memory, src_mask):
        return DecoderState({"mask": src_mask})

    def decode_step(self, state, y_prev):
        mask = state.tensors["mask"].float()  # (B, S)
        attention = mask / mask.sum(1, keepdim=True)
        return self.log_probs[y_prev].clone(), DecoderState(state.tensors, state.step + 1, attention)  # (B, V)
