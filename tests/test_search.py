import itertools
import math

import pytest
import torch

from helpers.models import BOS, EOS, PAD, TINY_VARIANTS, Bigram, attends, make_tiny_model
from nmtbench.decoding.search import _banned_ngram_tokens, beam_search, greedy, length_penalty, max_lengths
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab


def sources():
    g = torch.Generator().manual_seed(5)
    return [torch.randint(4, 20, (n,), generator=g).tolist() for n in (3, 7, 1, 5, 6)]


def padded(rows, extra=0):
    width = max(map(len, rows)) + extra
    src = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    return src, src != PAD


@torch.no_grad()
def teacher_forced_log_probs(model, row, outputs):
    """Log-probability of each output (tokens, ended) given the source row, + eos when ended, in one batch.

    The decoders are causal, so padding after an output's last token leaves its log-probabilities alone.
    """
    targets = [tokens + [EOS] if ended else tokens for tokens, ended in outputs]
    width = max(1, *map(len, targets))
    src, mask = padded([row] * len(targets))
    inputs = torch.tensor([([BOS] + target[:-1] + [PAD] * width)[:width] for target in targets])
    log_probs = model(src, mask, inputs).log_softmax(-1)  # (N, T, V)
    gold = torch.tensor([target + [PAD] * (width - len(target)) for target in targets])  # (N, T)
    picked = log_probs.gather(2, gold[..., None])[..., 0]  # (N, T)
    lengths = torch.tensor([len(target) for target in targets])
    return picked.masked_fill(torch.arange(width) >= lengths[:, None], 0.0).sum(1).tolist()


def test_max_lengths_is_a_times_source_length_plus_b():
    _, mask = padded([[5, 6, 7], [5]])
    assert max_lengths(mask, 1.5, 2).tolist() == [6, 3]


def test_length_penalties():
    assert length_penalty("none", 1.0, 7) == 1.0
    assert length_penalty("normalize", 0.5, 9) == 3.0
    assert length_penalty("gnmt", 1.0, 7) == 2.0
    assert length_penalty("gnmt", 0.0, 7) == 1.0


def test_banned_ngram_tokens():
    assert _banned_ngram_tokens([5, 6, 7, 5, 6], 3) == {7}
    assert _banned_ngram_tokens([5, 6, 5, 8, 5], 2) == {6, 8}
    assert _banned_ngram_tokens([5, 6], 3) == set()
    assert _banned_ngram_tokens([5, 6, 5], 1) == {5, 6}


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_beam_of_one_is_greedy(name):
    model = make_tiny_model(name)
    src, mask = padded(sources())
    budget = max_lengths(mask, 2.0, 3)
    beams = beam_search(model, src, mask, BOS, EOS, budget, beam=1, penalty="gnmt", alpha=1.0)
    assert [h[0].tokens for h in beams] == greedy(model, src, mask, BOS, EOS, budget)


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_beam_output_is_independent_of_batch_and_padding(name):
    model = make_tiny_model(name)
    rows = sources()
    src, mask = padded(rows)
    together = beam_search(model, src, mask, BOS, EOS, max_lengths(mask, 2.0, 3), beam=4, nbest=2)
    for row, expected in zip(rows, together):
        alone, alone_mask = padded([row], extra=3)
        (got,) = beam_search(model, alone, alone_mask, BOS, EOS, max_lengths(alone_mask, 2.0, 3), beam=4, nbest=2)
        assert [h.tokens for h in got] == [h.tokens for h in expected]
        assert [h.score for h in got] == pytest.approx([h.score for h in expected], abs=1e-5)


@pytest.mark.parametrize("name", TINY_VARIANTS)
@pytest.mark.parametrize("penalty, alpha", [("none", 0.0), ("normalize", 1.0), ("gnmt", 0.6)])
def test_scores_are_the_teacher_forced_log_probability_over_the_penalty(name, penalty, alpha):
    model = make_tiny_model(name)
    rows = sources()[:3]
    src, mask = padded(rows)
    results = beam_search(model, src, mask, BOS, EOS, max_lengths(mask, 2.0, 3), beam=3, nbest=3,
                          penalty=penalty, alpha=alpha)
    for row, hyps in zip(rows, results):
        assert len(hyps) == 3 and [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h, log_prob in zip(hyps, teacher_forced_log_probs(model, row, [(h.tokens, h.ended) for h in hyps])):
            assert h.log_prob == pytest.approx(log_prob, abs=1e-4)
            penalty_at_length = length_penalty(penalty, alpha, len(h.tokens) + h.ended)
            assert h.score == pytest.approx(log_prob / penalty_at_length, abs=1e-4)


@pytest.mark.parametrize("name", ["lstm_additive", "transformer_post", "transformer_linformer", "transformer_sparse",
                                  "decoder_only", "cnn"])
def test_a_wide_beam_finds_the_exhaustive_best(name):
    vocab, budget = 6, 3  # every output of at most 3 tokens: 1 + 5 + 25 + 125 ended ones and 125 cut off
    torch.manual_seed(1)
    model = build_model(name, TINY_VARIANTS[name], Vocab.of(vocab, pad_id=PAD)).eval()
    row = [4, 5, 4]
    src, mask = padded([row])
    others = [t for t in range(vocab) if t != EOS]
    outputs = [(list(tokens), ended) for length in range(budget + 1)
               for tokens in itertools.product(others, repeat=length)
               for ended in ((True, False) if length == budget else (True,))]
    candidates = zip(teacher_forced_log_probs(model, row, outputs), (tokens for tokens, _ in outputs))
    best_log_prob, best_tokens = max(candidates)
    (found,) = beam_search(model, src, mask, BOS, EOS, torch.tensor([budget]), beam=vocab ** budget, penalty="none")
    assert found[0].tokens == best_tokens
    assert found[0].log_prob == pytest.approx(best_log_prob, abs=1e-4)


def test_min_length_and_ngram_blocking_hold():
    model = make_tiny_model("transformer_post")
    src, mask = padded(sources())
    for hyps in beam_search(model, src, mask, BOS, EOS, max_lengths(mask, 3.0, 6), beam=3, min_len=4,
                            no_repeat_ngram=2):
        tokens = hyps[0].tokens
        assert len(tokens) >= 4
        bigrams = list(zip(tokens, tokens[1:]))
        assert len(bigrams) == len(set(bigrams))


def test_nbest_above_beam_is_refused():
    model = make_tiny_model("transformer_post")
    src, mask = padded(sources())
    with pytest.raises(ValueError, match=r"nbest \(3\) cannot exceed the beam size \(2\)"):
        beam_search(model, src, mask, BOS, EOS, max_lengths(mask, 1.0, 1), beam=2, nbest=3)


def test_greedy_output_of_a_sentence_is_independent_of_its_batch():
    for name in ("lstm_additive", "transformer_post"):
        model = make_tiny_model(name)
        rows = sources()
        src, mask = padded(rows)
        together = greedy(model, src, mask, BOS, EOS, max_lengths(mask, 2.0, 3))
        for row, expected in zip(rows, together):
            alone_src, alone_mask = padded([row])
            assert greedy(model, alone_src, alone_mask, BOS, EOS, max_lengths(alone_mask, 2.0, 3)) == [expected]
        assert all(len(h) <= 2 * len(r) + 3 for h, r in zip(together, rows))


def test_greedy_takes_the_argmax_at_every_step():
    model = make_tiny_model("transformer_post")
    src, mask = padded([sources()[1]])
    (hyp,) = greedy(model, src, mask, BOS, EOS, torch.tensor([6]))
    state = model.init_state(model.encode(src, mask), mask)
    y, expected = torch.tensor([BOS]), []
    for _ in range(6):
        log_probs, state = model.decode_step(state, y)
        y = log_probs.argmax(-1)
        if y.item() == EOS:
            break
        expected.append(y.item())
    assert hyp == expected


def eos_prone(model, boost=1.5):
    """The model with eos made likelier at every step, so hypotheses end early and at various lengths."""
    decode_step = model.decode_step

    def step(state, y_prev):
        log_probs, state = decode_step(state, y_prev)
        log_probs[:, EOS] += boost
        return log_probs.log_softmax(-1), state

    model.decode_step = step
    return model


@pytest.mark.parametrize("name", ["lstm_additive", "transformer_pre", "cnn", "decoder_only"])
def test_early_exit_skips_steps_without_changing_the_result(name, monkeypatch):
    import nmtbench.decoding.search as search

    src, mask = padded(sources())
    budget = max_lengths(mask, 2.0, 6)
    runs = {}
    for exit_early in (True, False):
        if not exit_early:  # only the K-ended rule: every beam runs until K hypotheses have ended
            monkeypatch.setattr(search, "_settled", lambda ended, beam, nbest, bound: len(ended) >= beam)
        model = eos_prone(make_tiny_model(name))
        calls = []
        inner = model.decode_step
        model.decode_step = lambda state, y, calls=calls, inner=inner: calls.append(1) or inner(state, y)
        found = [[(h.tokens, round(h.score, 5)) for h in hyps]
                 for penalty, alpha, nbest in (("none", 0.0, 1), ("gnmt", 1.0, 1), ("normalize", 0.6, 2))
                 for hyps in beam_search(model, src, mask, BOS, EOS, budget, beam=4, nbest=nbest,
                                         penalty=penalty, alpha=alpha)]
        runs[exit_early] = (len(calls), found)
    assert runs[True][1] == runs[False][1]
    assert runs[True][0] < runs[False][0]


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_greedy_collects_the_attention_of_every_step(name):
    """Each step's row equals the attention of the sentence decoded alone; padding gets none."""
    model, rows = make_tiny_model(name), sources()
    src, mask = padded(rows)
    budget = max_lengths(mask, 2.0, 3)
    attention = [[] for _ in rows]
    outputs = greedy(model, src, mask, BOS, EOS, budget, attention)
    if not attends(name):
        assert attention == [[] for _ in rows]
        return
    for row, tokens, weights, steps in zip(rows, outputs, attention, budget.tolist()):
        assert len(weights) == min(len(tokens) + 1, steps)  # one row per step, the eos step included
        alone, alone_mask = padded([row])
        state = model.init_state(model.encode(alone, alone_mask), alone_mask)
        for step, y in enumerate([BOS] + tokens[: len(weights) - 1]):
            _, state = model.decode_step(state, torch.tensor([y]))
            torch.testing.assert_close(weights[step][: len(row)], state.attention[0, : len(row)], atol=1e-5, rtol=0)
            assert not weights[step][len(row) : src.size(1)].any()


def test_the_trace_shows_each_steps_beams_and_what_ended_there():
    """Beam 2 by hand: step 0 keeps a (0.6) and b (0.3); at step 1 a+eos (0.30) and b+eos (0.27) outrank a b (0.24)
    and a a (0.06), so both end, two of K = 2 have ended, and the search stops with a as the best."""
    A, B, log = Bigram.A, Bigram.B, math.log
    src, mask = padded([[7]])
    trace = [[]]
    (found,) = beam_search(Bigram(), src, mask, BOS, EOS, torch.tensor([5]), beam=2, penalty="none", trace=trace)
    (steps,) = trace
    assert [[tokens for tokens, _ in step.live] for step in steps] == [[[A], [B]], [[A, B], [A, A]]]
    assert [lp for step in steps for _, lp in step.live] == pytest.approx([log(0.6), log(0.3), log(0.24), log(0.06)])
    assert steps[0].ended == []
    assert [(h.tokens, h.ended) for h in steps[1].ended] == [([A], True), ([B], True)]
    assert [h.score for h in steps[1].ended] == pytest.approx([log(0.3), log(0.27)])
    assert found == [steps[1].ended[0]]


def test_the_trace_ends_with_the_beams_the_length_budget_stopped():
    A, B, log = Bigram.A, Bigram.B, math.log
    src, mask = padded([[7]])
    trace = [[]]
    (found,) = beam_search(Bigram(), src, mask, BOS, EOS, torch.tensor([1]), beam=2, penalty="none", trace=trace)
    (first, stopped) = trace[0]
    assert [tokens for tokens, _ in first.live] == [[A], [B]] and first.ended == []
    assert stopped.live == [] and [(h.tokens, h.ended) for h in stopped.ended] == [([A], False), ([B], False)]
    assert [(h.log_prob, h.score) for h in stopped.ended] == [pytest.approx((log(0.6),) * 2),
                                                              pytest.approx((log(0.3),) * 2)]
    assert found == [stopped.ended[0]]


@pytest.mark.parametrize("name", ["lstm_additive", "transformer_pre", "cnn", "decoder_only"])
def test_a_trace_changes_nothing_and_ends_where_the_search_does(name):
    """The same hypotheses with and without the trace; what ended across a sentence's steps, ranked, is what
    beam_search returns; every step keeps at most K live beams, best first."""
    src, mask = padded(sources())
    budget = max_lengths(mask, 2.0, 6)
    for penalty, alpha, nbest in (("none", 0.0, 1), ("gnmt", 1.0, 1), ("normalize", 0.6, 2)):
        model = eos_prone(make_tiny_model(name))
        trace = [[] for _ in range(src.size(0))]
        plain = beam_search(model, src, mask, BOS, EOS, budget, beam=4, nbest=nbest, penalty=penalty, alpha=alpha)
        traced = beam_search(model, src, mask, BOS, EOS, budget, beam=4, nbest=nbest, penalty=penalty, alpha=alpha,
                             trace=trace)
        assert traced == plain
        for steps, found in zip(trace, traced):
            ended = [h for step in steps for h in step.ended]
            assert sorted(ended, key=lambda h: h.score, reverse=True)[:nbest] == found
            for step in steps:
                scores = [lp for _, lp in step.live]
                assert len(scores) <= 4 and scores == sorted(scores, reverse=True)
