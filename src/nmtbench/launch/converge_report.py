"""What `nmtbench converge` shows of a grid still training: what is left and for how long (--status), every run's
val BLEU so far (--curves), the finished runs' scores (--table), their val BLEU against training FLOPs (--plot), and
a results page's marked blocks rewritten with all of these (--page)."""
from __future__ import annotations

import heapq
import re
import statistics
from pathlib import Path

from nmtbench import figures
from nmtbench.config import ConfigError, Params
from nmtbench.evaluation.quality_vs_compute import ranking_flip, swap_text
from nmtbench.files import write_bytes, write_text
from nmtbench.launch.run_state import (
    RunProgress,
    curve_rows,
    exported_rows,
    finished_run,
    progress,
    recipe_difference,
    rows_of,
)
from nmtbench.run_paths import RAISABLE, RunPaths
from nmtbench.tables import Table, dash, spread, spread_cell
from nmtbench.training.curves import best_validation

# a block of a results page that --page rewrites: <!-- converge:status -->, curves, table, headline, or plot <png
# beside the page>, up to its end, <!-- /converge:<name> -->
BLOCKS = "status|curves|table|headline|plot"
PAGE_BLOCK = re.compile(rf"(<!-- converge:({BLOCKS})(?: (\S+))? -->\n)(.*?)(<!-- /converge:\2 -->)", re.S)
# a block's start marker, on a line of its own (prose may name one inline)
BLOCK_START = re.compile(rf"^<!-- converge:({BLOCKS})(?: \S+)? -->$", re.M)


# epochs a run is assumed to take until one in the workspace has stopped early: the 2 x 2 converged in 18 to 23
# (docs/results/2026-11-26-converged-2x2-cpu.md)
ASSUMED_EPOCHS = 21


def refresh_page(params: Params, page: Path, jobs: int, root: Path = Path("."), exported: Path | None = None,
                 here: Params | None = None, recipe: Params | None = None) -> list[str]:
    """Rewrite each block PAGE_BLOCK marks in a results page of runs still training, or the README's headline, with
    what --status, --curves, --table and --plot give now (the plot drawn beside the page, the block its families'
    flip); returns the blocks' names. The rest of the page, the prose about the runs, stays as written. params,
    exported, here: as for curves_table; the status reads this workspace's runs (here, or params without an export)
    and counts the export's (recipe) done."""
    if not page.is_file():
        raise ConfigError(f"--page {page}: no such file; give a Markdown page whose blocks are marked "
                          "(docs/training.md)")
    text = page.read_text()
    unclosed(page, text)
    refreshed = []

    def rewritten(block: re.Match) -> str:
        name, png = block[2], block[3]
        if name == "status":
            runs = progress(here or params, root, exported=exported, exported_params=recipe)
            body = f"```\n{status_table(runs, jobs)}\n```"
        elif name == "curves":
            body = curves_table(params, root, exported, here)
        elif name == "table":
            body = finished_table(params, root, exported)
        elif name == "headline":
            body = headline_table(params, root, exported)
        elif png:
            body = plot_curves(params, page.parent / png, root, exported, here)
        else:
            raise ConfigError(f"--page {page}: <!-- converge:plot --> names no picture; write <!-- converge:plot "
                              "<file>.png --> (a path beside the page)")
        refreshed.append(name)
        return f"{block[1]}{body}\n{block[5]}"

    text = PAGE_BLOCK.sub(rewritten, text)
    if not refreshed:
        raise ConfigError(f"--page {page}: no block to refresh; mark one with <!-- converge:status -->, <!-- "
                          "converge:curves -->, <!-- converge:table -->, <!-- converge:headline --> or <!-- "
                          "converge:plot <file>.png --> on a line of its own and end it with <!-- /converge:<name> -->")
    write_text(page, text)
    return refreshed


def unclosed(page: Path, text: str) -> None:
    """Refuse a block whose end marker is missing before the next block starts: PAGE_BLOCK would take its body up
    to a later block's end, and the prose and markers between would be lost."""
    starts = list(BLOCK_START.finditer(text))
    for start, following in zip(starts, [*starts[1:], None]):
        end = text.find(f"<!-- /converge:{start[1]} -->", start.end())
        if end < 0 or (following is not None and end > following.start()):
            raise ConfigError(f"--page {page}: {start[0]} has no <!-- /converge:{start[1]} --> before "
                              f"{'the next block' if following else 'the end of the page'}; add it on a line of "
                              "its own where the block ends")


def expected_epochs(run: RunProgress, expected: int) -> float:
    """The epochs this run should take: a recipe with an update limit (fairseq's --max-update) trains to it, once
    its updates an epoch are measured; any other, `expected`, but no fewer than its patience lets early stopping end
    it (a validation an epoch: its best so far, or the first, plus its patience) and at most its max_epochs."""
    epochs = max(expected, (run.best_epoch or 1) + run.patience) if run.patience else expected
    return run.epochs_to_update_limit or min(epochs, run.max_epochs or epochs)


def seconds_left(runs: list[RunProgress]) -> tuple[dict[tuple[str, int], float | None], int]:
    """Each unfinished run's training time left, and the epochs a run is expected to take: the median of the runs
    here that stopped early (RunProgress.stopped_early), else ASSUMED_EPOCHS (expected_epochs: a run with an update
    limit, to that limit). A
    run's time per epoch is its own, else the median of its family's measured runs, else of every measured run;
    None where nothing is measured yet."""
    stopped = [run.epochs for run in runs if run.stopped_early]
    expected = round(statistics.median(stopped)) if stopped else ASSUMED_EPOCHS
    measured = [run for run in runs if run.seconds_per_epoch]
    left = {}
    for run in runs:
        if run.training_done:
            continue
        pace = run.seconds_per_epoch
        if pace is None:
            kin = [other.seconds_per_epoch for other in measured if other.family == run.family] or [
                other.seconds_per_epoch for other in measured]
            pace = statistics.median(kin) if kin else None
        left[run.model, run.seed] = None if pace is None else max(expected_epochs(run, expected) - run.epochs, 1) * pace
    return left, expected


def wall_seconds(seconds: list[float], jobs: int) -> float:
    """How long runs of these lengths take at `jobs` at once, the longest started first, each on the first free
    slot: never less than the longest run, so one run left takes its own time however many slots wait."""
    slots = [0.0] * max(jobs, 1)
    for length in sorted(seconds, reverse=True):
        heapq.heapreplace(slots, slots[0] + length)
    return max(slots)


def status_table(runs: list[RunProgress], jobs: int) -> str:
    """What is left, a line per run, and the hours it should take at `jobs` at once."""
    left, expected = seconds_left(runs)
    width = max([26, *(len(run.model) for run in runs)])  # the model column fits the longest name
    lines = [f"{'model':<{width}} {'seed':>4}  {'state':<12} {'epochs':>6}  {'best val BLEU':>13}  {'s/epoch':>7}  "
             f"{'left':>7}  stopped by"]
    for run in runs:
        pace = run.seconds_per_epoch
        todo = left.get((run.model, run.seed))
        lines.append(
            f"{run.model:<{width}} {run.seed:>4}  {run.state:<12} {run.epochs:>6.1f}  "
            f"{'-' if run.best_val_bleu is None else f'{run.best_val_bleu:.2f}':>13}  "
            f"{'-' if pace is None else f'{pace:.0f}':>7}  "
            f"{'-' if run.training_done else '?' if todo is None else f'{todo / 3600:.1f} h':>7}  "
            f"{run.stopped_by or '-'}")
    counts = {state: sum(run.state == state for run in runs)
              for state in ("evaluated", "trained", "in progress", "interrupted", "not started", "exported")}
    if not counts["exported"]:
        del counts["exported"]  # said only where --from names an export
    known = [seconds for seconds in left.values() if seconds is not None]
    unknown = len(left) - len(known)
    estimate = (f"about {wall_seconds(known, jobs) / 3600:.1f} h of training left at {jobs} at once"
                + (f", {unknown} run(s) not yet estimable" if unknown else "")) if known else (
        f"{unknown} run(s) to train, not yet estimable: no epoch measured yet" if left else "no training left")
    basis = "" if not left else (f" ({expected} epochs a run, from the runs here that stopped early"
                                 if any(run.stopped_early for run in runs)
                                 else f" ({expected} epochs a run assumed until one stops early")
    limited = [run.model for run in runs if not run.training_done and run.epochs_to_update_limit]
    # a run whose patience outlasts the expected count: its own bound, not `expected`, sets its estimate
    patient = [f"{expected_epochs(run, expected):g} for {run.model}" for run in runs if not run.training_done
               and not run.epochs_to_update_limit and expected_epochs(run, expected) > expected]
    # and one whose max_epochs ends it first: its ceiling sets its estimate
    capped = [f"{run.max_epochs} for {run.model}" for run in runs if not run.training_done
              and not run.epochs_to_update_limit and expected_epochs(run, expected) < expected]
    if basis:
        basis += f"; {', '.join(limited)} to its update limit" if limited else ""
        basis += f"; at least {', '.join(patient)}: best epoch so far plus patience" if patient else ""
        basis += f"; at most {', '.join(capped)}: its max_epochs" if capped else ""
        basis += ")"
    lines.append(", ".join(f"{count} {state}" for state, count in counts.items()) + f"; {estimate}{basis}")
    for why, key in RAISABLE.items():
        stopped = [run.model for run in runs if run.stopped_by == why]
        if stopped:
            lines.append(f"reached {why} before early stopping (not converged): {', '.join(stopped)}; raise "
                         f"models.<model>.train.{key} in params.yaml and run again to continue them")
    return "\n".join(lines)


def finished_table(params: Params, root: Path = Path("."), exported: Path | None = None) -> str:
    """Every evaluated run, the highest BLEU on the first test set first: its size, where its best checkpoint was
    (epoch, updates, training FLOPs), why it stopped, BLEU (cased, and lc tok where scored) and chrF on every test
    set and its decoding speed. The converged answer as the README and the results page show it (make headline);
    the intervals and p-values against the baseline come with the compare stage. A run from before train.json kept
    where its best checkpoint was has it read off its curve, by its recipe's early-stopping metric."""
    splits = params.data.eval_splits
    header = ["Model", "Parameters", "Epochs (best)", "Updates to best", "FLOPs to best", "Stopped by"]
    for split in splits:
        header += [f"{split} BLEU", "BLEU lc tok", "chrF"]
    header.append("Decoding sentences/s")
    rows = []
    for model in params.models:
        for seed in params.seeds:
            found = finished_run(model, seed, root, exported)
            if found is None:
                continue
            train, scores, curve = found
            kept = best_validation(curve, params.for_model(model).train.early_stopping_metric) if curve else {}
            best = {key: train.get(f"best_{key}", kept.get(key) and float(kept[key]))  # a CSV's text
                    for key in ("epoch", "step", "train_flops")}
            name = model if len(params.seeds) == 1 else f"{model} (seed {seed})"
            cells = [name, f"{train['params']:,}", f"{train['epochs']:g} ({dash(best['epoch'], 'g')})",
                     dash(best["step"], ",.0f"), dash(best["train_flops"], ".2e"), train["stopped_by"]]
            for split in splits:
                score = scores.get(split, {})
                cells += [dash(score.get(key), ".2f") for key in ("bleu", "bleu_lc_tok", "chrf")]
            cells.append(dash(scores.get(splits[0], {}).get("sentences_per_s"), ".1f"))  # beam search's
            rows.append((-scores.get(splits[0], {}).get("bleu", float("-inf")), cells))
    align = "lrrrrl" + "r" * (len(header) - 6)
    return Table(header, [cells for _, cells in sorted(rows, key=lambda row: row[0])], align).markdown()


def headline_table(params: Params, root: Path = Path("."), exported: Path | None = None) -> str:
    """What a reader compares, one row a model over its finished seeds, the highest BLEU on the first test set
    first: its size, and cased BLEU and chrF on every test set, mean ± sd where more than one seed has finished (the
    README's table, make headline). finished_table has every run's own row, with where it stopped and its speed."""
    splits = params.data.eval_splits
    header = ["Model", "Parameters", "Seeds", *(f"{split} {metric}" for split in splits for metric in ("BLEU", "chrF"))]
    rows = []
    for model in params.models:
        runs = {seed: found for seed in params.seeds if (found := finished_run(model, seed, root, exported))}
        if not runs:
            continue
        scores = {(split, key): spread([found[1].get(split, {}).get(key) for found in runs.values()], list(runs))
                  for split in splits for key in ("bleu", "chrf")}
        size = next(iter(runs.values()))[0]["params"]
        first = scores[splits[0], "bleu"]
        rows.append((-first["mean"] if first else float("inf"),
                     [model, f"{size:,}", str(len(runs)), *map(spread_cell, scores.values())]))
    align = "lrr" + "r" * (len(header) - 3)
    return Table(header, [cells for _, cells in sorted(rows, key=lambda row: row[0])], align).markdown()


def joined_curves(params: Params, root: Path, exported: Path | None,
                  here: Params | None = None) -> list[tuple[str, int, dict, list[dict] | None]]:
    """(model, seed, block, curve so far) of every run of params, from the workspace at root or the export. With
    here, this workspace's params (--curves and --plot with --from), the export's runs and, for a run the export
    lacks, this workspace's, where it trains that run as the export's params do: a grid converging on several
    machines, seen whole (a checkout's own runs, on another recipe, stay out of its headline)."""
    if exported is None or here is None:
        return [(model, seed, block, rows_of(model, seed, root, exported))
                for model, block in params.models.items() for seed in params.seeds]
    joined = []
    for model in [*here.models, *(model for model in params.models if model not in here.models)]:
        source = here if model in here.models else params
        # the export's seeds and this workspace's: a checkout's params.yaml has fewer than a grid's seeds
        for seed in dict.fromkeys([*(params.seeds if model in params.models else ()), *source.seeds]):
            rows = exported_rows(exported, model, seed)
            if rows is None and model in here.models and model in params.models and (
                    recipe_difference(here, params, model, seed) is None):
                rows = curve_rows(RunPaths(model, seed, root))
            joined.append((model, seed, source.models[model], rows))
    return joined


def curves_table(params: Params, root: Path = Path("."), exported: Path | None = None,
                 here: Params | None = None) -> str:
    """Every run's greedy val BLEU at each validation so far, a markdown table of a row per run, for a results page
    of runs still training: finished runs from their learning curve, unfinished ones from it or their checkpoint;
    with exported, the runs copied there (and with here, joined with this workspace's: joined_curves)."""
    lines = ["| model | seed | epochs | best val BLEU (epoch) | val BLEU at each epoch |", "|:---|---:|---:|---:|:---|"]
    for model, seed, _, curve in joined_curves(params, root, exported, here):
        rows = [row for row in curve or [] if row["val_bleu"] not in ("", None)]
        if not rows:
            lines.append(f"| {model} | {seed} | 0 | - | not started |")
            continue
        best = max(rows, key=lambda row: float(row["val_bleu"]))
        lines.append(f"| {model} | {seed} | {float(rows[-1]['epoch']):g} | {float(best['val_bleu']):.2f} "
                     f"({float(best['epoch']):g}) | {', '.join(str(row['val_bleu']) for row in rows)} |")
    return "\n".join(lines)


def plot_curves(params: Params, path: Path, root: Path = Path("."), exported: Path | None = None,
                here: Params | None = None) -> str:
    """Every run's val BLEU against training FLOPs so far on one plot (finished runs and unfinished ones alike), the
    FLOPs at which the top two families swap places for good marked (evaluation/quality_vs_compute.py), and the
    FLOP budget of this workspace's params where it has one (a checkout's: make repro's equal budget), written to
    path as PNG; returns the swap's sentence. exported: the runs copied there instead of the workspace's (with here,
    joined with them: joined_curves)."""
    if Path(path).suffix != ".png":  # the picture would overwrite a page or another file given by mistake
        raise ConfigError(f"--plot {path}: the plot is a PNG picture; give a path ending in .png")
    curves, by_family = {}, {}
    joined = joined_curves(params, root, exported, here)
    several_seeds = len({seed for _, seed, _, _ in joined}) > 1
    for model, seed, block, curve in joined:
        rows = [{"train_flops": float(row["train_flops"]), "val_bleu": float(row["val_bleu"])} for row in curve or []
                if row.get("train_flops") not in ("", None) and row["val_bleu"] not in ("", None)]
        if rows:
            curves[f"{model}/seed{seed}" if several_seeds else model] = rows
            by_family.setdefault(str(block.get("family")), []).extend(
                (row["train_flops"], row["val_bleu"]) for row in rows)
    if not curves:
        raise ValueError("nmtbench converge --plot: no run has validated yet; plot once the first epoch has ended")
    flip = ranking_flip(by_family)
    budget = (here or params).train.budget  # in a checkout, make repro's equal budget: where the curves are read there
    write_bytes(path, figures.flops_curves(curves, flip["flops"], budget.value if budget.kind == "flops" else None))
    return swap_text(flip)
