"""Published figures set beside ours: compare.published gives, per model, the BLEU its paper reports.

Papers report lowercased BLEU on Moses tokens (multi-bleu.perl), so the figure is set beside our BLEU lc tok of the
same test set: exactly their score in the papers' setting (data.preprocess moses_lowercase), an imitation of it on
detokenized output otherwise (docs/evaluation.md). The figures are quoted, not recomputed.
"""
from __future__ import annotations

from nmtbench.evaluation.scoring import PUBLISHED


def beside_published(models: dict, published: dict) -> dict:
    """{model: {split, published, source, ours (the spread over seeds of BLEU lc tok), difference (ours - theirs)}}."""
    rows = {}
    for name, figure in published.items():
        ours = models[name][figure.split].get(PUBLISHED)
        rows[name] = {"split": figure.split, "published": figure.bleu, "source": figure.source, "ours": ours,
                      "difference": None if ours is None else round(ours["mean"] - figure.bleu, 2)}
    return rows
