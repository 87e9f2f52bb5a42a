"""Every figure of the results, drawn with matplotlib and returned as PNG bytes by one saver, in one style.

The report embeds the bytes in its page; the beam_sweep and analyze stages write them to results/.
Inputs are plain dicts and lists read from the stage outputs, so every plot can be drawn from tiny
hand-made figures in a test.
"""
from __future__ import annotations

import io
import math

from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter

from nmtbench.tables import visible

# matplotlib's default cycle repeats its colours after ten lines, so the eleventh run would look like
# the first: a run's style is a colour of the cycle with a line style and marker per round of it.
COLOURS = [f"C{i}" for i in range(10)]
LINES, MARKERS = ["-", "--", ":", "-."], ["o", "s", "^", "D"]


def run_styles(labels: list[str]) -> dict[str, dict]:
    """A distinct {"color", "linestyle", "marker"} per label, by position: plots that list the runs in the
    same order draw each run alike."""
    return {label: {"color": COLOURS[i % len(COLOURS)], "linestyle": LINES[i // len(COLOURS) % len(LINES)],
                    "marker": MARKERS[i // len(COLOURS) % len(MARKERS)]}
            for i, label in enumerate(labels)}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    """The one way a figure leaves this module: laid out, as PNG at one resolution, and closed."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")  # "tight" keeps a legend beside the axes
    _pyplot().close(fig)
    return buffer.getvalue()


def _legend_beside(axes) -> None:
    """The legend to the right of the axes: a dozen runs would hide the points or lines it names."""
    axes.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))


def _log_x(axes) -> None:
    """A log x axis whose labels cannot overlap: short engineering labels (20k, 5M) on 1-2-5 ticks, or on every
    integer multiple when the data spans less than a decade, and none on the minor ticks (matplotlib labels
    those in full, 6x10^3 7x10^3, once a decade holds no major tick)."""
    axes.set_xscale("log")
    low, high = axes.get_xlim()
    subs = range(1, 10) if high / low < 10 else (1, 2, 5) if high / low < 1000 else (1,)
    axes.xaxis.set_major_locator(LogLocator(subs=tuple(map(float, subs))))
    axes.xaxis.set_major_formatter(EngFormatter(sep=""))
    axes.xaxis.set_minor_formatter(NullFormatter())


def frontier(points: list[dict], split: str) -> bytes:
    """Quality against cost: BLEU against parameter count, training time and decoding speed, one point per run.

    points: [{"label", "params", "train_seconds" (None: not recorded), "sentences_per_s", "bleu"}, ...]
    """
    fig, (size, time, speed) = _pyplot().subplots(1, 3, figsize=(14, 4))
    styles = run_styles([point["label"] for point in points])
    # sizes and speeds span orders of magnitude; training times under one budget sit close together
    for axes, key, scale in ((size, "params", "log"), (time, "train_seconds", "linear"),
                             (speed, "sentences_per_s", "log")):
        for point in points:
            if point[key] is None:
                continue
            style = styles[point["label"]]
            x = point[key] / 60 if key == "train_seconds" else point[key]
            axes.scatter(x, point["bleu"], color=style["color"], marker=style["marker"], label=point["label"])
        if scale == "log":
            _log_x(axes)
    _legend_beside(speed)
    size.set(xlabel="parameters", ylabel=f"BLEU ({split})", title="BLEU against model size")
    time.set(xlabel="training time (minutes)", ylabel=f"BLEU ({split})", title="BLEU against training time")
    speed.set(xlabel="sentences / s (decoding)", ylabel=f"BLEU ({split})", title="BLEU against decoding speed")
    return _png(fig)


def learning_curves(curves: dict[str, list[dict]]) -> bytes:
    """Validation BLEU against wall-clock training time and against target tokens seen (the equal-cost views).

    curves: {label: [{"wall_seconds", "target_tokens", "val_bleu"}, ...]}
    """
    fig, (time_axes, tokens_axes) = _pyplot().subplots(1, 2, figsize=(10, 4))
    styles = run_styles(list(curves))
    for label, rows in curves.items():
        bleu = [row["val_bleu"] for row in rows]
        time_axes.plot([row["wall_seconds"] / 60 for row in rows], bleu, label=label, markersize=4, **styles[label])
        tokens_axes.plot([row["target_tokens"] for row in rows], bleu, label=label, markersize=4, **styles[label])
    time_axes.set(xlabel="training time (minutes)", ylabel="validation BLEU", title="BLEU against wall-clock time")
    tokens_axes.set(xlabel="target tokens seen", ylabel="validation BLEU", title="BLEU against tokens seen")
    _legend_beside(tokens_axes)
    return _png(fig)


def flops_curves(curves: dict[str, list[dict]], flip: float | None = None, budget: float | None = None) -> bytes:
    """Validation BLEU against training FLOPs, every run on one plot: the ranking at every budget up to the run's.

    curves: {label: [{"train_flops", "val_bleu"}, ...]}; flip: the FLOPs at which the ranking flips, a dashed line;
    budget: a FLOP budget to mark (a dotted line), such as the equal one `make repro` trains every model to
    """
    fig, axes = _pyplot().subplots(figsize=(8, 4))
    styles = run_styles(list(curves))
    for label, rows in curves.items():
        axes.plot([row["train_flops"] for row in rows], [row["val_bleu"] for row in rows], label=label, markersize=4,
                  **styles[label])
    if flip is not None:
        axes.axvline(flip, color="grey", linestyle="--", linewidth=1, label=f"ranking flips ({flip:.3g})")
    if budget is not None:
        axes.axvline(budget, color="black", linestyle=":", linewidth=1, label=f"train.budget ({budget:.3g} FLOPs)")
    _log_x(axes)  # the runs of one budget differ in FLOPs per step by orders of magnitude
    axes.set(xlabel="training FLOPs", ylabel="validation BLEU", title="BLEU against training compute")
    _legend_beside(axes)
    return _png(fig)


def length_buckets(buckets: list[str], bleu: dict[str, list[float]], split: str) -> bytes:
    """BLEU per source-length bucket, one line per model: where attention-free encoders fall off."""
    fig, axes = _pyplot().subplots(figsize=(7, 4))
    styles = run_styles(list(bleu))
    for label, scores in bleu.items():
        axes.plot(range(len(buckets)), scores, label=label, **styles[label])
    axes.set_xticks(range(len(buckets)), buckets)
    axes.set(xlabel="source length (words)", ylabel="BLEU", title=f"BLEU by source length ({split})")
    _legend_beside(axes)
    return _png(fig)


def attention_grid(examples: dict[str, dict], columns: int = 3) -> bytes:
    """Small multiples: each run's source attention of one sentence in a panel of one grid, rows output pieces and
    columns source pieces, so a dozen models are compared at a glance rather than a page each."""
    rows = math.ceil(len(examples) / columns)
    longest = max(max(len(example["source_pieces"]), len(example["target_pieces"])) for example in examples.values())
    side = 0.12 * longest + 1.2  # inches per panel: a 7-point label per piece, the grid about a page wide at 30
    fig, grid = _pyplot().subplots(rows, columns, figsize=(columns * side, rows * side), squeeze=False)
    for axes, (label, example) in zip(grid.flat, examples.items()):
        source, target = ([visible(piece) for piece in example[key]] for key in ("source_pieces", "target_pieces"))
        # darkest at the map's own largest weight, so near-uniform attention of a weak model stays visible
        axes.imshow(example["weights"], cmap="Greys", vmin=0, aspect="auto")
        axes.set_xticks(range(len(source)), source, rotation=90, fontsize=7)
        axes.set_yticks(range(len(target)), target, fontsize=7)
        axes.set_title(label, fontsize=9)
    for axes in grid.flat[len(examples):]:
        axes.axis("off")
    return _png(fig)


def beam_sweep(result: dict) -> bytes:
    """BLEU and decoding speed against beam size, one line per length-penalty alpha."""
    fig, (quality, speed) = _pyplot().subplots(1, 2, figsize=(9, 3.5))
    for alpha in dict.fromkeys(r["alpha"] for r in result["rows"]):
        rows = [r for r in result["rows"] if r["alpha"] == alpha]
        quality.plot([r["beam"] for r in rows], [r["bleu"] for r in rows], marker="o", label=f"alpha {alpha:g}")
        speed.plot([r["beam"] for r in rows], [r["sentences_per_s"] for r in rows], marker="o",
                   label=f"alpha {alpha:g}")
    quality.set(xlabel="beam size", ylabel="BLEU", title=f"{result['model']}: quality")
    speed.set(xlabel="beam size", ylabel="sentences / s", title="decoding speed")
    quality.legend()
    return _png(fig)


# The claims' plots (results/claims/): measured figures against the textbook's predicted scaling.

def _predicted(ax, lengths: list[int], first: float, power: int, label: str) -> None:
    """A dashed T^power line through the first measured point."""
    ax.plot(lengths, [first * (n / lengths[0]) ** power for n in lengths], "k--" if power == 1 else "k:",
            linewidth=1, label=label)


COSTS = (("forward_flops", "forward FLOPs"), ("activation_bytes", "activation bytes kept for backward"),
         ("step_seconds", "forward + backward seconds"))


def _against_length(ax, sweep: dict, key: str, title: str, width: int) -> None:
    """One measured figure of every model against T, log-log, with O(T) and O(T^2) through the lowest point."""
    for name, result in sweep.items():
        points = [(r["length"], r[key]) for r in result["rows"] if r[key] is not None]
        if points:
            ax.plot(*zip(*points), marker="o", markersize=3, label=name)
    lengths = [r["length"] for r in next(iter(sweep.values()))["rows"]]
    lowest = min(r[key] for result in sweep.values() for r in result["rows"] if r[key])
    _predicted(ax, lengths, lowest, 1, "O(T)")
    _predicted(ax, lengths, lowest, 2, "O(T^2)")
    ax.axvline(width, color="grey", linewidth=0.5)
    ax.set(xscale="log", yscale="log", xlabel="T (vertical line: T = d)", title=title)


def complexity(sweep: dict, width: int) -> bytes:
    panels = (*COSTS, ("sequential_steps", "sequential steps"), ("path_length", "path length, first to last position"))
    fig, axes = _pyplot().subplots(2, 3, figsize=(15, 8))
    for ax, (key, title) in zip(axes.flat, panels):
        _against_length(ax, sweep, key, title, width)
    axes.flat[0].legend(fontsize=7)
    params = axes.flat[-1]
    for name, result in sweep.items():
        widths = [int(d) for d in result["layer_params_by_width"]]
        params.plot(widths, list(result["layer_params_by_width"].values()), marker="o", label=name)
    first = min(min(r["layer_params_by_width"].values()) for r in sweep.values())
    _predicted(params, widths, first, 2, "O(d^2)")
    params.set(xscale="log", yscale="log", xlabel="d", title="parameters against width")
    return _png(fig)


def long_attention(long: dict, width: int) -> bytes:
    """The long sweep: full, Linformer and sparse encoder self-attention, a source of T tokens, one target token."""
    fig, axes = _pyplot().subplots(1, 3, figsize=(15, 4.5))
    for ax, (key, title) in zip(axes, COSTS):
        _against_length(ax, long, key, f"{title}, one-token target", width)
    axes[0].legend(fontsize=7)
    return _png(fig)


def gradients(probe: dict) -> bytes:
    fig, (curves, norms) = _pyplot().subplots(1, 2, figsize=(12, 4.5))
    for (name, runs), color in zip(probe.items(), COLOURS):
        for run, style in (("init", ":"), ("clipped", "-"), ("unclipped", "--")):
            curves.plot(runs[run]["curve"], style, color=color, label=f"{name} {run}")
        for run, style in (("clipped", "-"), ("unclipped", "--")):
            norms.plot(runs[run]["gradient_norms"], style, color=color, linewidth=0.8, label=f"{name} {run}")
    curves.set(yscale="log", xlabel="distance t - j", ylabel="|| d loss_t / d x_j ||",
               title="gradient against distance (Multi30k val)")
    norms.set(yscale="log", xlabel="training step", ylabel="gradient norm before clipping", title="training")
    curves.legend(fontsize=6, ncol=2)
    return _png(fig)


def synthetic(results: dict, train_length: int) -> bytes:
    fig, axes = _pyplot().subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, (task, models) in zip(axes[0], results.items()):
        for name, result in models.items():
            lengths = sorted(int(n) for n in result["accuracy"])
            ax.plot(lengths, [result["accuracy"][n] for n in lengths], marker=".", label=name)
        ax.axvline(train_length, color="grey", linewidth=0.5)
        ax.set(xlabel="length (vertical line: longest trained)", ylabel="exact match", title=task, ylim=(-0.05, 1.05))
    axes[0][0].legend(fontsize=7)
    return _png(fig)
