"""Corpus BLEU and chrF with sacreBLEU, reported together with their signatures.

The signature records tokenisation, casing, smoothing and the sacreBLEU version, so figures
from different runs or papers are only compared when their signatures match.
"""
from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF


def score(hypotheses: list[str], references: list[str]) -> dict:
    """Score detokenised hypotheses against one reference each (cased BLEU with 13a, chrF2)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"cannot score {len(hypotheses)} hypotheses against {len(references)} references; "
                         "decode every sentence of the split")
    if not hypotheses:
        raise ValueError("nothing to score: the hypotheses and references are empty")
    bleu, chrf = BLEU(), CHRF()
    return {
        "bleu": round(bleu.corpus_score(hypotheses, [references]).score, 2),
        "chrf": round(chrf.corpus_score(hypotheses, [references]).score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }
