"""Synthetic tasks: deterministic, correct targets, the lengths asked for, and exact-match scoring."""
import random

import torch

from nmtbench.analysis.synthetic import (
    FIRST_NOUN,
    FIRST_SYMBOL,
    PLURAL_VERB,
    SINGULAR_VERB,
    accuracy,
    evaluation_pairs,
    loader,
    make_pair,
    train_pairs,
)
from nmtbench.config import ANALYZE_ROLES, AnalyzeConfig
from nmtbench.data.subwords import EOS

MODELS = {"t": {"family": "transformer", "d_model": 8, "heads": 2, "layers": 1, "d_ff": 16}}
ROLES = dict.fromkeys(ANALYZE_ROLES, "t")


def config(**overrides) -> AnalyzeConfig:
    return AnalyzeConfig(models=MODELS, roles=ROLES, gradient_models=["t"], synthetic_models=["t"], vocab_size=16,
                         train_length=8, min_length=5, synthetic_steps=3, synthetic_batch=4, test_examples=3,
                         **overrides)


def test_pairs_are_the_same_every_time_and_differ_by_seed_and_task():
    cfg = config()
    assert train_pairs("copy", cfg) == train_pairs("copy", cfg)
    assert evaluation_pairs("reverse", cfg) == evaluation_pairs("reverse", cfg)
    assert train_pairs("copy", cfg) != train_pairs("copy", config(seed=1))
    assert [s for s, _ in train_pairs("copy", cfg)] != [s for s, _ in train_pairs("reverse", cfg)]


def test_copy_is_identity_and_reverse_of_reverse_is_identity():
    rng = random.Random(0)
    for length in (5, 17, 200):
        src, tgt = make_pair("copy", length, 16, rng)
        assert tgt == src and len(src) == length
        src, tgt = make_pair("reverse", length, 16, rng)
        assert tgt[::-1] == src
        assert all(FIRST_SYMBOL <= token < 16 for token in src)


def test_agreement_target_is_the_verb_of_the_first_nouns_number():
    rng = random.Random(0)
    pairs = [make_pair("agreement", 30, 16, rng) for _ in range(200)]
    for src, tgt in pairs:
        assert all(FIRST_NOUN <= noun < 16 for noun in src)
        assert tgt == [SINGULAR_VERB if src[0] % 2 == 0 else PLURAL_VERB]
    assert {tuple(t) for _, t in pairs} == {(SINGULAR_VERB,), (PLURAL_VERB,)}
    assert any((s[0] - s[-1]) % 2 for s, _ in pairs)  # the last noun often has the other number: an attractor


def test_training_lengths_stay_within_l_and_tests_reach_two_l():
    cfg = config()
    assert len(train_pairs("copy", cfg)) == cfg.synthetic_steps * cfg.synthetic_batch
    assert {len(s) for s, _ in train_pairs("copy", cfg)} <= set(range(5, 9))
    tests = evaluation_pairs("copy", cfg)
    assert list(tests) == list(range(5, 17)) and all(len(p) == 3 and len(p[0][0]) == n for n, p in tests.items())


def test_loader_batches_stay_within_the_token_budget():
    cfg = config()
    for batch in loader(train_pairs("copy", cfg), cfg):
        assert batch["src"].numel() + batch["tgt_in"].numel() <= cfg.synthetic_batch * 2 * (cfg.train_length + 1)


class Echo(torch.nn.Module):
    """Stands in for a model in greedy decoding: answers `answer` per row, then end of sentence."""

    def __init__(self, answers):
        super().__init__()
        self.answers = answers

    def encode(self, src, src_mask):
        return torch.arange(src.size(0))

    def init_state(self, memory, src_mask):
        from nmtbench.models.interface import DecoderState

        return DecoderState({"row": memory})

    def decode_step(self, state, y_prev):
        from nmtbench.models.interface import DecoderState

        rows = state.tensors["row"]
        log_probs = torch.full((len(rows), 16), -9.0)
        for i, row in enumerate(rows.tolist()):
            answer = self.answers[row]
            log_probs[i, answer[state.step] if state.step < len(answer) else EOS] = 0.0
        return log_probs, DecoderState({"row": rows}, state.step + 1)


def test_accuracy_is_exact_match_and_a_longer_output_is_wrong():
    pairs = [([5, 6], [5, 6]), ([7, 8], [7, 8]), ([9, 9], [9, 9])]
    model = Echo([[5, 6], [7, 9], [9, 9, 9]])  # right, one token wrong, one token too many
    assert accuracy(model, pairs, "cpu") == 1 / 3
