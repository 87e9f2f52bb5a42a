"""Quality against compute, read off the learning curves: each run's val BLEU against the training FLOPs it had
spent, the best within a fraction of the budget, and the FLOPs at which two models (or two families) swap places
for good. compare writes them into comparison.json, the report and the GPU page show them."""
from __future__ import annotations

from itertools import combinations
from pathlib import Path

from nmtbench.files import read_csv, write_text

Curve = list[tuple[float, float]]  # (training FLOPs, val BLEU) at each validation
# the two families the project's question sets against each other
QUESTION = ("rnn", "transformer")

FLIP_DEFINITION = ("The flip, defined: a model's (or family's) standing at F training FLOPs is the best val BLEU any "
                   "of its runs reached at a validation within F FLOPs (what a run stopped at F keeps as its best "
                   "checkpoint). At every validation of either of two, from the first FLOPs at which both have "
                   "validated, the leader is the one standing higher (none on a tie). They swap places at the first "
                   "of those points from which the final leader leads at every later one, where the other led at a "
                   "point before it.")


def flops_curve(path: Path) -> Curve:
    """(training FLOPs, val BLEU) at each validation of a learning_curve.csv that has both; [] otherwise."""
    rows = read_csv(path) if path.is_file() else []
    if not rows or "train_flops" not in rows[0]:
        return []
    return [(float(row["train_flops"]), float(row["val_bleu"])) for row in rows if row["val_bleu"]]


def write_flops_curves(curves: dict[str, Curve], path: Path) -> None:
    """Every run's curve in one long CSV, a row per validation and the run in a column: the one file DVC's top-level
    plot (dvc.yaml) draws as a line per run, whatever the models and seeds."""
    lines = ["run,train_flops,val_bleu", *(f"{run},{flops:g},{bleu:g}" for run, curve in curves.items()
                                           for flops, bleu in curve)]
    write_text(path, "\n".join(lines) + "\n")


def standing(curve: Curve, flops: float) -> float | None:
    """The best val BLEU of a validation within `flops`: what a run stopped there keeps as its best checkpoint."""
    found = [bleu for at, bleu in curve if at <= flops]
    return max(found) if found else None


def swap(first: str, second: str, curves: dict[str, Curve]) -> dict:
    """Where `first` and `second` swap places for good (FLIP_DEFINITION). Returns {"pair", "leader", "flops",
    "standing"}: leader None when the two end level, flops None when the final leader led throughout; standing is
    each one's best val BLEU at the swap (or at the end)."""
    pair = [first, second]
    start = max(min(at for at, _ in curves[name]) for name in pair)
    points = sorted({at for name in pair for at, _ in curves[name] if at >= start})
    leaders = []
    for flops in points:
        found = {name: standing(curves[name], flops) for name in pair}
        leaders.append(None if found[first] == found[second] else max(found, key=found.get))
    final = leaders[-1]
    other_led = final is not None and any(leader not in (None, final) for leader in leaders)
    last_other = max((i for i, leader in enumerate(leaders) if leader != final), default=None)
    flops = points[last_other + 1] if other_led else None
    at = flops or points[-1]
    return {"pair": pair, "leader": final, "flops": flops, "standing": {name: standing(curves[name], at)
                                                                           for name in pair}}


def ranking_flip(curves: dict[str, Curve]) -> dict:
    """swap() of the recurrent and the Transformer families where both have curves: the project's question, even where
    another family (decoder_only) ends between them; else of the two standing highest at the end (families, or
    models). Fewer than two curves: no pair."""
    ends = {name: max(bleu for _, bleu in curve) for name, curve in curves.items() if curve}
    asked = [name for name in QUESTION if name in ends]
    top = sorted(asked if len(asked) == 2 else ends, key=lambda name: -ends[name])[:2]
    if len(top) < 2:
        return {"pair": top, "leader": None, "flops": None, "standing": ends}
    return swap(*top, curves)


def swaps(curves: dict[str, Curve]) -> list[dict]:
    """Every pair of curves that swaps places for good, in the order of the FLOPs where it does: the equal-budget
    winners that lose with more compute, and the reverse."""
    found = [swap(a, b, curves) for a, b in combinations([name for name, curve in curves.items() if curve], 2)]
    return sorted((pair for pair in found if pair["flops"] is not None), key=lambda pair: pair["flops"])


def swap_text(flip: dict) -> str:
    """One sentence for a page: which family leads from which FLOPs on, with both standings there. Families are
    named as such: two of them share their name with a model (rnn, transformer)."""
    pair, leader, flops, found = flip["pair"], flip["leader"], flip["flops"], flip["standing"]
    if len(pair) < 2:
        return "Fewer than two learning curves with training FLOPs: no ranking to flip."
    scores = ", ".join(f"{name} family {found[name]:.2f}" for name in pair)
    if leader is None:
        return f"The {' and '.join(pair)} families end level ({scores}): no leader, no flip."
    other = next(name for name in pair if name != leader)
    if flops is None:
        return (f"No flip: the {leader} family leads the {other} family at every validation where both have validated "
                f"(at the end: {scores}).")
    return (f"**The ranking flips at {flops:.3g} training FLOPs**: the {other} family leads at some validation before "
            f"it, the {leader} family at every validation from there on (best val BLEU within {flops:.3g} FLOPs: "
            f"{scores}).")
