"""Published figures set beside ours: compare.published gives, per model, the BLEU its paper reports.

Papers report lowercased BLEU on Moses tokens (multi-bleu.perl), so the figure is set beside our BLEU lc tok of the
same test set: exactly their score in the papers' setting (data.preprocess moses_lowercase), an imitation of it on
detokenized output otherwise (docs/evaluation.md). The figures are quoted, not recomputed.
"""
from __future__ import annotations

from nmtbench.evaluation.scoring import PUBLISHED
from nmtbench.evaluation.tables import Table


def beside_published(models: dict, published: dict) -> dict:
    """{model: {split, published, source, ours (the spread over seeds of BLEU lc tok), difference (ours - theirs)}}."""
    rows = {}
    for name, figure in published.items():
        ours = models[name][figure.split].get(PUBLISHED)
        rows[name] = {"split": figure.split, "published": figure.bleu, "source": figure.source, "ours": ours,
                      "difference": None if ours is None else round(ours["mean"] - figure.bleu, 2)}
    return rows


def published_table(rows: dict, cell) -> Table:
    """One row per model with a published figure; cell renders a spread (mean, or mean ± sd over seeds)."""
    return Table(["Model", "Test set", "Ours, BLEU lc tok", "Published", "Ours - published", "Published by"],
                 [[name, row["split"], cell(row["ours"]), f"{row['published']:.2f}",
                   "-" if row["difference"] is None else f"{row['difference']:+.2f}", row["source"]]
                  for name, row in rows.items()], "llrrrl")
