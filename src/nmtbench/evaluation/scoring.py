"""Corpus BLEU, lowercased BLEU, chrF and TER with sacreBLEU, reported together with their signatures.

The signature records tokenisation, casing, smoothing and the sacreBLEU version, so figures
from different runs or papers are only compared when their signatures match.
"""
from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF, TER

SCORES = ("bleu", "bleu_lc", "chrf", "ter")


def score(hypotheses: list[str], references: list[str]) -> dict:
    """Score detokenised hypotheses against one untouched reference each, as the sacrebleu command line does.

    bleu: cased BLEU with the 13a tokenizer, the headline; bleu_lc: the same lowercased, closer to
    published figures computed on lowercased tokenized text; chrf: chrF2; ter: TER (lower is better).
    """
    _check(hypotheses, references)
    metrics = {"bleu": BLEU(), "bleu_lc": BLEU(lowercase=True), "chrf": CHRF(), "ter": TER()}
    result = {key: round(metric.corpus_score(hypotheses, [references]).score, 2) for key, metric in metrics.items()}
    return {**result, **{f"{key}_signature": str(metric.get_signature()) for key, metric in metrics.items()}}


def bleu(hypotheses: list[str], references: list[str]) -> float:
    """Cased 13a BLEU alone, e.g. of the sentences of one length bucket."""
    _check(hypotheses, references)
    return round(BLEU().corpus_score(hypotheses, [references]).score, 2)


def _check(hypotheses: list[str], references: list[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"cannot score {len(hypotheses)} hypotheses against {len(references)} references; "
                         "decode every sentence of the split")
    if not hypotheses:
        raise ValueError("nothing to score: the hypotheses and references are empty")
