"""The report's plots, each drawn with matplotlib and returned as PNG bytes, ready to embed in a page.

Inputs are plain dicts and lists, read from the stage outputs by `report.py`, so every plot can be
drawn from tiny hand-made figures in a test.
"""
from __future__ import annotations

import io


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=90)
    _pyplot().close(fig)
    return buffer.getvalue()


def frontier(points: list[dict], split: str) -> bytes:
    """Quality against cost: BLEU against parameter count and against decoding speed, one labelled point per run.

    points: [{"label", "params", "sentences_per_s", "bleu"}, ...]
    """
    fig, (size, speed) = _pyplot().subplots(1, 2, figsize=(10, 4))
    for axes, key in ((size, "params"), (speed, "sentences_per_s")):
        for point in points:
            axes.scatter(point[key], point["bleu"])
            axes.annotate(point["label"], (point[key], point["bleu"]), fontsize=7, xytext=(3, 3),
                          textcoords="offset points")
        axes.set_xscale("log")
    size.set(xlabel="parameters", ylabel=f"BLEU ({split})", title="BLEU against model size")
    speed.set(xlabel="sentences / s (decoding)", ylabel=f"BLEU ({split})", title="BLEU against decoding speed")
    return _png(fig)


def learning_curves(curves: dict[str, list[dict]]) -> bytes:
    """Validation BLEU against wall-clock training time and against target tokens seen (the equal-cost views).

    curves: {label: [{"wall_seconds", "target_tokens", "val_bleu"}, ...]}
    """
    fig, (time_axes, tokens_axes) = _pyplot().subplots(1, 2, figsize=(10, 4))
    for label, rows in curves.items():
        bleu = [row["val_bleu"] for row in rows]
        time_axes.plot([row["wall_seconds"] / 60 for row in rows], bleu, marker=".", label=label)
        tokens_axes.plot([row["target_tokens"] for row in rows], bleu, marker=".", label=label)
    time_axes.set(xlabel="training time (minutes)", ylabel="validation BLEU", title="BLEU against wall-clock time")
    tokens_axes.set(xlabel="target tokens seen", ylabel="validation BLEU", title="BLEU against tokens seen")
    tokens_axes.legend(fontsize=7)
    return _png(fig)


def length_buckets(buckets: list[str], bleu: dict[str, list[float]], split: str) -> bytes:
    """BLEU per source-length bucket, one line per model: where attention-free encoders fall off."""
    fig, axes = _pyplot().subplots(figsize=(7, 4))
    for label, scores in bleu.items():
        axes.plot(range(len(buckets)), scores, marker="o", label=label)
    axes.set_xticks(range(len(buckets)), buckets)
    axes.set(xlabel="source length (words)", ylabel="BLEU", title=f"BLEU by source length ({split})")
    axes.legend(fontsize=7)
    return _png(fig)


def attention_heatmap(example: dict, label: str) -> bytes:
    """Source attention of every output step of one sentence: rows are output pieces, columns source pieces."""
    source, target = example["source_pieces"], example["target_pieces"]
    fig, axes = _pyplot().subplots(figsize=(0.35 * len(source) + 2, 0.3 * len(target) + 1.5))
    # darkest at the map's own largest weight, so near-uniform attention of a weak model stays visible
    image = axes.imshow(example["weights"], cmap="Greys", vmin=0, aspect="auto")
    fig.colorbar(image, ax=axes, fraction=0.05)
    axes.set_xticks(range(len(source)), source, rotation=90, fontsize=8)
    axes.set_yticks(range(len(target)), target, fontsize=8)
    axes.set_title(label, fontsize=9)
    return _png(fig)
