"""The plots of results/claims/: measured figures against the textbook's predicted scaling."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402


def predicted(ax, lengths: list[int], first: float, power: int, label: str) -> None:
    """A dashed T^power line through the first measured point."""
    ax.plot(lengths, [first * (n / lengths[0]) ** power for n in lengths], "k--" if power == 1 else "k:",
            linewidth=1, label=label)


def complexity(sweep: dict, width: int, path: Path) -> None:
    panels = (("forward_flops", "forward FLOPs"), ("activation_bytes", "activation bytes kept for backward"),
              ("step_seconds", "forward + backward seconds"), ("sequential_steps", "sequential steps"),
              ("path_length", "path length, first to last position"))
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, (key, title) in zip(axes.flat, panels):
        for name, result in sweep.items():
            points = [(r["length"], r[key]) for r in result["rows"] if r[key] is not None]
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, label=name)
        lengths = [r["length"] for r in next(iter(sweep.values()))["rows"]]
        lowest = min(r[key] for result in sweep.values() for r in result["rows"] if r[key])
        predicted(ax, lengths, lowest, 1, "O(T)")
        predicted(ax, lengths, lowest, 2, "O(T^2)")
        ax.axvline(width, color="grey", linewidth=0.5)
        ax.set(xscale="log", yscale="log", xlabel="T (vertical line: T = d)", title=title)
    axes.flat[0].legend(fontsize=7)
    params = axes.flat[-1]
    for name, result in sweep.items():
        widths = [int(d) for d in result["layer_params_by_width"]]
        params.plot(widths, list(result["layer_params_by_width"].values()), marker="o", label=name)
    first = min(min(r["layer_params_by_width"].values()) for r in sweep.values())
    predicted(params, widths, first, 2, "O(d^2)")
    params.set(xscale="log", yscale="log", xlabel="d", title="parameters against width")
    save(fig, path)


def gradients(probe: dict, path: Path) -> None:
    fig, (curves, norms) = plt.subplots(1, 2, figsize=(12, 4.5))
    for (name, runs), color in zip(probe.items(), plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        for run, style in (("init", ":"), ("clipped", "-"), ("unclipped", "--")):
            curves.plot(runs[run]["curve"], style, color=color, label=f"{name} {run}")
        for run, style in (("clipped", "-"), ("unclipped", "--")):
            norms.plot(runs[run]["gradient_norms"], style, color=color, linewidth=0.8, label=f"{name} {run}")
    curves.set(yscale="log", xlabel="distance t - j", ylabel="|| d loss_t / d x_j ||",
               title="gradient against distance (Multi30k val)")
    norms.set(yscale="log", xlabel="training step", ylabel="gradient norm before clipping", title="training")
    curves.legend(fontsize=6, ncol=2)
    save(fig, path)


def synthetic(results: dict, train_length: int, path: Path) -> None:
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, (task, models) in zip(axes[0], results.items()):
        for name, result in models.items():
            lengths = sorted(int(n) for n in result["accuracy"])
            ax.plot(lengths, [result["accuracy"][n] for n in lengths], marker=".", label=name)
        ax.axvline(train_length, color="grey", linewidth=0.5)
        ax.set(xlabel="length (vertical line: longest trained)", ylabel="exact match", title=task, ylim=(-0.05, 1.05))
    axes[0][0].legend(fontsize=7)
    save(fig, path)


def save(fig, path: Path) -> None:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
