"""Search written once against the Seq2Seq interface, so every model decodes the same way."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from nmtbench.models.interface import Seq2Seq


def max_lengths(src_mask: torch.Tensor, a: float, b: int) -> torch.Tensor:
    """Per-sentence output budget a * source length + b, in target tokens (end-of-sentence excluded)."""
    return (src_mask.sum(1).float() * a + b).long()  # (B,)


@torch.no_grad()
def greedy(model: Seq2Seq, src: torch.Tensor, src_mask: torch.Tensor, bos: int, eos: int,
           max_len: torch.Tensor, attention: list[list[torch.Tensor]] | None = None) -> list[list[int]]:
    """Pick the most probable token at each step; a sentence stops at eos or at its own max_len.

    Finished sentences leave the batch (their rows are dropped from the cache), so a sentence's
    output never depends on which other sentences share its batch. Given a list of B empty lists,
    `attention` receives each sentence's `state.attention` row of every step (the step that chose
    eos included), for models that have one.
    """
    B = src.size(0)
    state = model.init_state(model.encode(src, src_mask), src_mask)
    alive = torch.arange(B, device=src.device)  # original row of each cache row
    y = torch.full((B,), bos, dtype=torch.long, device=src.device)
    outputs: list[list[int]] = [[] for _ in range(B)]
    step = 0
    while alive.numel():
        keep = max_len[alive] > step
        if not keep.all():
            alive, y, state = alive[keep], y[keep], state.reorder(keep.nonzero().squeeze(1))
            if not alive.numel():
                break
        log_probs, state = model.decode_step(state, y)  # (B_alive, V)
        y = log_probs.argmax(-1)
        if attention is not None and state.attention is not None:
            for row, weights in zip(alive.tolist(), state.attention):  # weights (S,) or (S + step + 1,)
                attention[row].append(weights)
        for row, token in zip(alive.tolist(), y.tolist()):
            if token != eos:
                outputs[row].append(token)
        running = y != eos
        if not running.all():
            alive, y, state = alive[running], y[running], state.reorder(running.nonzero().squeeze(1))
        step += 1
    return outputs


PENALTIES = ("none", "normalize", "gnmt")


def length_penalty(kind: str, alpha: float, length: int) -> float:
    """Divisor of a hypothesis' log-probability: 1, length^alpha, or GNMT's ((5 + length) / 6)^alpha."""
    if kind == "normalize":
        return length ** alpha
    if kind == "gnmt":
        return ((5 + length) / 6) ** alpha
    return 1.0


@dataclass
class Hypothesis:
    tokens: list[int]  # without bos and eos
    log_prob: float  # summed log-probability of the tokens, and of eos when ended
    score: float  # log_prob / length penalty (length counts eos): what ranks the n best
    ended: bool  # False: stopped by the length budget before eos


@dataclass
class BeamStep:
    """One step of one sentence's beam search, as beam_search's trace records it."""
    live: list[tuple[list[int], float]]  # the beams that go on, best first: tokens, summed log-probability
    ended: list[Hypothesis]  # those that ended at this step: eos chosen (best candidate first), or the budget reached


def _banned_ngram_tokens(history: list[int], n: int) -> set[int]:
    """Tokens that would repeat an n-gram already in history (history without bos)."""
    if len(history) < n - 1 or n < 1:
        return set()
    prefix = tuple(history[len(history) - n + 1 :]) if n > 1 else ()
    return {history[i + n - 1] for i in range(len(history) - n + 1) if tuple(history[i : i + n - 1]) == prefix}


def _settled(ended: list[Hypothesis], beam: int, nbest: int, best_possible: float) -> bool:
    """K hypotheses have ended, or no live beam can displace the nbest-th ended one (ties keep the earlier)."""
    if len(ended) >= beam:
        return True
    return len(ended) >= nbest and best_possible <= sorted(h.score for h in ended)[-nbest]


@torch.no_grad()
def beam_search(model: Seq2Seq, src: torch.Tensor, src_mask: torch.Tensor, bos: int, eos: int,
                max_len: torch.Tensor, beam: int = 5, nbest: int = 1, alpha: float = 1.0,
                penalty: str = "gnmt", min_len: int = 0, no_repeat_ngram: int = 0,
                trace: list[list[BeamStep]] | None = None) -> list[list[Hypothesis]]:
    """Batched beam search; returns the nbest hypotheses of each sentence, best first.

    Each step extends every live beam by every token and keeps, per sentence, the 2K best candidates:
    an eos among the first K ends a hypothesis (set aside with its penalised score), the best K others
    go on. A sentence leaves the batch once it has K ended hypotheses or reaches its length budget
    (then its live beams count as hypotheses), so its output never depends on the rest of the batch.
    It also leaves as soon as no live beam can still beat its nbest-th ended hypothesis: log-probabilities
    only fall as a hypothesis grows and the penalty is largest at the length budget, so a live beam can
    score at most its log-probability over the penalty at that budget. That exit skips work without
    changing the result. With K = 1 this is greedy decoding exactly.

    Given a list of B empty lists, `trace` receives each sentence's BeamStep of every step it searched: a decoding
    step's live beams and the hypotheses that chose eos there, and, where the length budget stops it, a last step
    with no live beam whose ended hypotheses are the beams it stopped. Without it nothing else is done.
    """
    if nbest > beam:
        raise ValueError(f"nbest ({nbest}) cannot exceed the beam size ({beam})")
    B, K, device = src.size(0), beam, src.device
    state = model.init_state(model.encode(src, src_mask), src_mask)
    state = state.reorder(torch.arange(B, device=device).repeat_interleave(K))  # (B*K) rows
    sentence = torch.arange(B, device=device)  # original index of each sentence still searching
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # one live beam to start; the others fill from its candidates
    tokens = torch.full((B * K, 1), bos, dtype=torch.long, device=device)  # histories, bos first
    ended: list[list[Hypothesis]] = [[] for _ in range(B)]
    ceiling = torch.tensor([length_penalty(penalty, alpha, max(n, 1)) for n in max_len.tolist()], device=device)
    step = 0

    def keep_sentences(keep: torch.Tensor):
        nonlocal sentence, scores, tokens, state
        rows = (keep.nonzero().squeeze(1)[:, None] * K + torch.arange(K, device=device)).view(-1)
        sentence, scores, tokens, state = sentence[keep], scores[keep], tokens[rows], state.reorder(rows)

    while sentence.numel():
        out_of_budget = max_len[sentence] <= step
        for i in out_of_budget.nonzero().squeeze(1).tolist():
            stopped = [Hypothesis(history, lp, lp / length_penalty(penalty, alpha, max(step, 1)), False)
                       for history, lp in _live(tokens, scores, i, K)]
            ended[sentence[i]] += stopped
            if trace is not None:
                trace[sentence[i]].append(BeamStep([], stopped))
        if out_of_budget.any():
            keep_sentences(~out_of_budget)
            if not sentence.numel():
                break
        n = sentence.numel()
        log_probs, state = model.decode_step(state, tokens[:, -1])  # (n*K, V)
        V = log_probs.size(-1)
        if step < min_len:
            log_probs[:, eos] = float("-inf")
        if no_repeat_ngram:
            for row, history in enumerate(tokens[:, 1:].tolist()):
                for token in _banned_ngram_tokens(history, no_repeat_ngram):
                    log_probs[row, token] = float("-inf")
        candidates = (scores.unsqueeze(-1) + log_probs.view(n, K, V)).view(n, K * V)
        top_scores, top = candidates.topk(min(2 * K, K * V), dim=1)  # (n, 2K), best first
        from_beam, token = top // V, top % V
        is_eos = token == eos
        ends = is_eos & (torch.arange(top.size(1), device=device) < K) & (top_scores > float("-inf"))
        this_step: dict[int, list[Hypothesis]] = {}  # sentence row -> what ended at this step
        for i, j in ends.nonzero().tolist():
            lp = float(top_scores[i, j])
            history = tokens[i * K + from_beam[i, j], 1:].tolist()
            score = lp / length_penalty(penalty, alpha, len(history) + 1)
            hypothesis = Hypothesis(history, lp, score, True)
            ended[sentence[i]].append(hypothesis)
            this_step.setdefault(i, []).append(hypothesis)
        scores, pick = top_scores.masked_fill(is_eos, float("-inf")).topk(K, dim=1)  # the K best that go on
        rows = (torch.arange(n, device=device)[:, None] * K + from_beam.gather(1, pick)).view(-1)
        tokens = torch.cat([tokens[rows], token.gather(1, pick).view(-1, 1)], dim=1)
        state = state.reorder(rows)
        if trace is not None:
            for i, s in enumerate(sentence.tolist()):
                trace[s].append(BeamStep(_live(tokens, scores, i, K), this_step.get(i, [])))
        step += 1
        best_possible = scores.max(1).values / ceiling[sentence]  # (n,) the most a live beam can still score
        complete = torch.tensor([_settled(ended[s], K, nbest, bound)
                                 for s, bound in zip(sentence.tolist(), best_possible.tolist())], device=device)
        if complete.any():
            keep_sentences(~complete)
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest] for hyps in ended]


def _live(tokens: torch.Tensor, scores: torch.Tensor, i: int, K: int) -> list[tuple[list[int], float]]:
    """Sentence row i's live beams, best first: (tokens without bos, summed log-probability); an empty beam slot
    (-inf, before the beam has filled) is left out."""
    return [(tokens[i * K + k, 1:].tolist(), float(scores[i, k])) for k in range(K) if scores[i, k] > float("-inf")]
