"""`nmtbench converge` (make converge): train every run of a workspace to its own stopping and evaluate it, N at once,
across as many sittings as it takes. Each call first says what is left, with the time it should take estimated
from the epochs measured so far, then starts what has not finished and resumes what was interrupted (each
training from its last checkpoint: docs/training.md, "Resuming"); every run is evaluated as soon as it has
trained, so its translations land before the next model starts."""
from __future__ import annotations

import csv
import heapq
import json
import re
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from nmtbench import figures
from nmtbench.config import ConfigError, LaunchConfig, Params
from nmtbench.data.tokenizer import vocab_id
from nmtbench.evaluation.compute import ranking_flip, swap_text
from nmtbench.files import lock_owner, write_bytes, write_text
from nmtbench.launch.scheduler import FOLDER, alive
from nmtbench.loading import read_vocab, run_description
from nmtbench.runs import RAISABLE, RESULTS, RunPaths
from nmtbench.tables import Table, dash
from nmtbench.training.curves import best_validation

# a block of a results page that --page rewrites: <!-- converge:status -->, curves, table, or plot <png beside the
# page>, up to its end, <!-- /converge:<name> -->
PAGE_BLOCK = re.compile(r"(<!-- converge:(status|curves|table|plot)(?: (\S+))? -->\n)(.*?)(<!-- /converge:\2 -->)",
                        re.S)
# epochs a run is assumed to take until one in the workspace has stopped early: the 2 x 2 converged in 18 to 23
# (docs/results/2026-11-26-converged-2x2-cpu.md)
ASSUMED_EPOCHS = 21


@dataclass
class RunProgress:
    model: str
    seed: int
    family: str
    state: str  # evaluated, trained, in progress (a launcher is running here), interrupted, not started, or exported
                # (finished elsewhere and copied to the folder `--from` names: not trained here)
    epochs: float = 0.0
    seconds: float = 0.0  # training wall time so far, validations included
    best_val_bleu: float | None = None
    stopped_by: str | None = None
    steps: int = 0  # optimizer updates so far
    max_epochs: int | None = None  # its recipe's limits (train.max_epochs, train.max_steps; None: unlimited)
    max_steps: int | None = None
    patience: int = 0  # train.early_stopping_patience: the validations without a better one that stop it

    @property
    def seconds_per_epoch(self) -> float | None:
        return self.seconds / self.epochs if self.epochs >= 1 else None

    @property
    def epochs_to_update_limit(self) -> float | None:
        """The epochs its max_steps come to at the updates an epoch measured so far; None without either."""
        return self.max_steps * self.epochs / self.steps if self.max_steps and self.steps and self.epochs >= 1 else None

    @property
    def stopped_early(self) -> bool:
        """Ended by early stopping before any update limit: one that early stopping ended at its limit (fairseq's
        recipe does) tells nothing of when early stopping comes."""
        return self.stopped_by == "early_stopping" and not (self.max_steps and self.steps >= self.max_steps)

    @property
    def training_done(self) -> bool:
        return self.state in ("evaluated", "trained", "exported")


def progress(params: Params, root: Path = Path("."), exported: Path | None = None,
             exported_params: Params | None = None) -> list[RunProgress]:
    """Where every run of the models x seeds grid stands, from the files training and evaluation write. exported:
    a folder --export wrote elsewhere (a machine since lost, say), whose finished runs count as done where this
    workspace has not started them; exported_params: the params.yaml it copied, which must train them as these
    params do."""
    launcher = lock_owner(root / FOLDER / "launch.lock")
    unfinished = "in progress" if launcher and alive(launcher) else "interrupted"
    found = []
    for model, block in params.models.items():
        for seed in params.seeds:
            paths = RunPaths(model, seed, root)
            recipe = params.for_model(model).train
            run = RunProgress(model, seed, str(block.get("family")), "not started", max_epochs=recipe.max_epochs,
                              max_steps=recipe.max_steps if recipe.max_steps > 0 else None,
                              patience=recipe.early_stopping_patience or 0)
            if paths.train_metrics.is_file():
                state = "evaluated" if paths.eval_metrics.is_file() else "trained"
                trained(run, state, json.loads(paths.train_metrics.read_text()))
            else:
                rows = curve_rows(paths)
                if rows is not None:
                    run.state = unfinished
                if rows:
                    run.epochs, run.seconds = float(rows[-1]["epoch"]), float(rows[-1]["wall_seconds"])
                    run.steps = int(float(rows[-1]["step"]))
                    bleus = [float(row["val_bleu"]) for row in rows if row["val_bleu"] not in ("", None)]
                    run.best_val_bleu = max(bleus) if bleus else None
            elsewhere = finished_run(model, seed, root, exported) if exported and run.state == "not started" else None
            if elsewhere:
                same_recipe(params, exported_params or params, model, seed, exported)
                same_subwords(elsewhere[0], root / "data" / "tokenized", model, seed, exported)
                trained(run, "exported", elsewhere[0])
            found.append(run)
    return found


def trained(run: RunProgress, state: str, metrics: dict) -> None:
    """run as its train.json (metrics) says it ended."""
    run.state, run.epochs, run.seconds = state, metrics["epochs"], metrics["train_seconds"]
    run.best_val_bleu, run.stopped_by = metrics.get("best_val_bleu"), metrics.get("stopped_by")
    run.steps = metrics.get("steps", 0)


def same_recipe(params: Params, recipe: Params, model: str, seed: int, exported: Path) -> None:
    """Refuse, in one line, an exported run whose recipe is not what these params would train it with."""
    differ = recipe_difference(params, recipe, model, seed)
    if differ:
        part, keys = differ
        raise ConfigError(f"--from {exported}: {model} seed {seed} was trained there with other {part} params "
                          f"({', '.join(keys) or 'the whole block'}: not as in this workspace's params.yaml); "
                          f"train it here (leave --from out) or make the params agree")


def same_subwords(metrics: dict, tokenized_dir: Path, model: str, seed: int, exported: Path) -> None:
    """Refuse, in one line, an exported run trained on other subwords than this workspace's: the same params and data
    make the same subwords, so a difference means the tokenizer or its library changed. Runs whose train.json predates
    recording its subwords, or a workspace not tokenized yet, are not checked."""
    record = tokenized_dir / "vocab.json"
    if "vocab" not in metrics or not record.is_file():
        return
    here = vocab_id(read_vocab(tokenized_dir))
    if metrics["vocab"] != here:
        raise ConfigError(f"--from {exported}: {model} seed {seed} was trained on other subwords (vocab "
                          f"{metrics['vocab'][:12]} there, {here[:12]} in {record}); train it here (leave --from "
                          "out), or tokenize with the sentencepiece version and settings it was trained with")


def recipe_difference(params: Params, recipe: Params, model: str, seed: int) -> tuple[str, list[str]] | None:
    """Where the two train the run differently: the part (model, train, data, tokenize) and its keys that differ
    (none named where one has no such model), the training keys as the run's fingerprint reads them; None where
    they train it alike."""
    def described(source: Params) -> dict:
        if model not in source.models:
            return {"model": None}
        return {**run_description(source.model_block(model), source.for_model(model).train.model_dump(), "", seed),
                "data": source.data.model_dump(), "tokenize": source.tokenize.model_dump()}

    here, there = described(params), described(recipe)
    for part in here:
        if here[part] != there.get(part):
            both = isinstance(here[part], dict) and isinstance(there.get(part), dict)
            return part, sorted(key for key in {**here[part], **there[part]}
                                if here[part].get(key) != there[part].get(key)) if both else []
    return None


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
        elif png:
            body = plot_curves(params, page.parent / png, root, exported, here)
        else:
            raise ConfigError(f"--page {page}: <!-- converge:plot --> names no picture; write <!-- converge:plot "
                              "<file>.png --> (a path beside the page)")
        refreshed.append(name)
        return f"{block[1]}{body}\n{block[5]}"

    text = PAGE_BLOCK.sub(rewritten, page.read_text())
    if not refreshed:
        raise ConfigError(f"--page {page}: no block to refresh; mark one with <!-- converge:status -->, <!-- "
                          "converge:curves -->, <!-- converge:table --> or <!-- converge:plot <file>.png --> on a "
                          "line of its own and end it with <!-- /converge:<name> -->")
    write_text(page, text)
    return refreshed


def curve_rows(paths: RunPaths) -> list[dict] | None:
    """The learning curve of an unfinished run so far; None when it has not started. dvc deletes the curve file
    when it reruns a training, so until the resumed run's first validation the rows are read from the checkpoint
    it resumes, which carries them."""
    if paths.learning_curve.is_file():
        with paths.learning_curve.open() as f:
            return list(csv.DictReader(f))
    last = paths.model_dir / "unfinished" / "last.ckpt"
    if not last.is_file():
        return None
    try:
        checkpoint = torch.load(last, map_location="cpu", weights_only=False)
        return list(checkpoint["callbacks"]["LearningCurve"]["rows"])
    except Exception:  # torch raises many kinds for a damaged file; training sets it aside, here it is just unread
        return []


def expected_epochs(run: RunProgress, expected: int) -> float:
    """The epochs this run should take: a recipe with an update limit (fairseq's --max-update) trains to it, once
    its updates an epoch are measured; any other, `expected`, but no fewer than its patience lets early stopping end
    it (a validation an epoch) and at most its max_epochs."""
    epochs = max(expected, run.patience + 1) if run.patience else expected
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
                + (f", {unknown} run(s) not yet estimable" if unknown else "")) if left else "no training left"
    basis = "" if not left else (f" ({expected} epochs a run, from the runs here that stopped early"
                                 if any(run.stopped_early for run in runs)
                                 else f" ({expected} epochs a run assumed until one stops early")
    limited = [run.model for run in runs if not run.training_done and run.epochs_to_update_limit]
    basis += f"; {', '.join(limited)} to its update limit)" if limited and basis else (")" if basis else "")
    lines.append(", ".join(f"{count} {state}" for state, count in counts.items()) + f"; {estimate}{basis}")
    for why, key in RAISABLE.items():
        stopped = [run.model for run in runs if run.stopped_by == why]
        if stopped:
            lines.append(f"reached {why} before early stopping (not converged): {', '.join(stopped)}; raise "
                         f"models.<model>.train.{key} in params.yaml and run again to continue them")
    return "\n".join(lines)


def exported_rows(folder: Path, model: str, seed: int) -> list[dict] | None:
    """The learning curve export_finished copied to folder; None for a run not there."""
    file = Path(folder) / model / f"seed{seed}" / "learning_curve.csv"
    if not file.is_file():
        return None
    with file.open() as f:
        return list(csv.DictReader(f))


def finished_run(model: str, seed: int, root: Path, exported: Path | None) -> tuple[dict, dict, list[dict]] | None:
    """An evaluated run's train.json, eval.json and learning curve, from the workspace at root or the folder its
    export went to; None for a run not evaluated (not exported)."""
    if exported is not None:
        folder = Path(exported) / model / f"seed{seed}"
        train, scores = folder / "train.json", folder / "eval.json"
    else:
        paths = RunPaths(model, seed, root)
        train, scores = paths.train_metrics, paths.eval_metrics
    if not (train.is_file() and scores.is_file()):
        return None
    return json.loads(train.read_text()), json.loads(scores.read_text()), rows_of(model, seed, root, exported) or []


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


def rows_of(model: str, seed: int, root: Path, exported: Path | None) -> list[dict] | None:
    """A run's curve so far, from the workspace at root, or from the folder its export went to."""
    return exported_rows(exported, model, seed) if exported is not None else curve_rows(RunPaths(model, seed, root))


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
        for seed in source.seeds:
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
    FLOPs at which the top two families swap places for good marked (evaluation/compute.py), written to path as
    PNG; returns the swap's sentence. exported: the runs copied there instead of the workspace's (with here, joined
    with them: joined_curves)."""
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
    write_bytes(path, figures.flops_curves(curves, flip["flops"]))
    return swap_text(flip)


def export_finished(runs: list[RunProgress], folder: Path, root: Path = Path(".")) -> list[str]:
    """Copy each evaluated run's small outputs (train.json, learning_curve.csv, eval.json and its translations of every
    test set) into folder/<model>/seed<seed>/, to be committed as they land, and the workspace's params.yaml, the
    recipe they trained with, into folder (what --from reads back); returns the runs copied."""
    copied = []
    Path(folder).mkdir(parents=True, exist_ok=True)
    if (Path(root) / "params.yaml").is_file():
        shutil.copyfile(Path(root) / "params.yaml", Path(folder) / "params.yaml")
    for run in runs:
        if run.state != "evaluated":
            continue
        target = Path(folder) / run.model / f"seed{run.seed}"
        target.mkdir(parents=True, exist_ok=True)
        for file in [file for files in run_files(run.model, run.seed, root, None) for file in files]:
            shutil.copyfile(file, target / file.name)
        copied.append(f"{run.model}-{run.seed}")
    return copied


def run_files(model: str, seed: int, root: Path, exported: Path | None) -> tuple[list[Path], list[Path]]:
    """A run's metrics files (train.json, learning_curve.csv, eval.json) and test translations, in the workspace at
    root or in the folder its export went to."""
    if exported is not None:
        folder = Path(exported) / model / f"seed{seed}"
        metrics = [folder / name for name in ("train.json", "learning_curve.csv", "eval.json")]
        return metrics, sorted(folder.glob("*.txt"))
    paths = RunPaths(model, seed, root)
    return [paths.train_metrics, paths.learning_curve, paths.eval_metrics], sorted(paths.results_dir.glob("*.txt"))


def compare_finished(params: Params, folder: Path, baseline: str | None = None, root: Path = Path("."),
                     exported: Path | None = None, tokenized_dir: Path = Path("data/tokenized")) -> dict:
    """The compare stage over the models whose every run is evaluated so far (the workspace's, or an export's),
    written into folder (comparison.json and .md, flops_curves.csv, bleu.json): each model's 95% interval and p
    against the baseline, the verdicts and the swaps while the grid still trains. The runs are gathered in a
    scratch folder laid out as the compare stage reads them, so the workspace's results/ stays dvc's."""
    from nmtbench.data.tokenizer import load_tokenized
    from nmtbench.evaluation.compare import compare

    names = [model for model in params.models
             if all(finished_run(model, seed, root, exported) for seed in params.seeds)]
    if not names:
        raise ConfigError("nmtbench converge --compare: no model has been evaluated yet; compare once the first "
                          "run has finished")
    baseline = baseline or params.compare.baseline or next(iter(params.models))
    if baseline not in names:
        raise ConfigError(f"nmtbench converge --compare: the baseline {baseline} has not finished; name a finished "
                          f"model with --baseline: {', '.join(names)}")
    test_sets = load_tokenized(Path(root) / tokenized_dir)
    published = {name: row for name, row in params.compare.published.items() if name in names}
    cfg = params.compare.model_copy(update={"baseline": baseline, "published": published})
    with tempfile.TemporaryDirectory() as scratch:
        for model in names:
            for seed in params.seeds:
                paths = RunPaths(model, seed, Path(scratch))
                metrics, translations = run_files(model, seed, root, exported)
                for target_dir, files in ((paths.metrics_dir, metrics), (paths.results_dir, translations)):
                    target_dir.mkdir(parents=True, exist_ok=True)
                    for file in files:
                        if file.is_file():  # one missing: the compare stage names it and the stage to rerun
                            shutil.copyfile(file, target_dir / file.name)
        comparison = compare(names, params.seeds, cfg, test_sets, root=Path(scratch),
                             blocks={name: params.models[name] for name in names}, budget=params.train.budget,
                             lang=params.data.tgt_lang, tokenized=params.data.tokenized)
        Path(folder).mkdir(parents=True, exist_ok=True)
        for file in (Path(scratch) / RESULTS).iterdir():  # the comparison's files, not the runs gathered beside them
            if file.is_file():
                shutil.copyfile(file, Path(folder) / file.name)
    return comparison


def stage_order(runs: list[RunProgress], first: list[str] = ()) -> list[str]:
    """Each run's training, then its evaluation, run by run (the models `first` first, in that order, then the rest
    in params.yaml's), then the comparison: the launcher starts the first ready stage of this list, so a run is
    evaluated before the next model starts. Exported runs are not trained here, and without them the compare stage
    cannot run (it reads every run's files here): nmtbench converge --compare --from compares them."""
    position = {model: index for index, model in enumerate(first)}
    order = []
    for run in sorted(runs, key=lambda run: position.get(run.model, len(position))):
        if run.state != "exported":
            order += [f"train@{run.model}-{run.seed}", f"evaluate@{run.model}-{run.seed}"]
    return order + ([] if any(run.state == "exported" for run in runs) else ["compare"])


def converge(params: Params, jobs: int | None = None, first: list[str] = (), status_only: bool = False,
             curves: bool = False, export: Path | None = None, plot: Path | None = None, threads: int | None = None,
             exported: Path | None = None, table: bool = False, compared: Path | None = None,
             baseline: str | None = None, recipe: Params | None = None, here: Params | None = None,
             page: Path | None = None, out=None) -> int:
    """first: models to start before the others, in this order. jobs, threads: launch.jobs and
    launch.threads_per_job for this call. curves: only print every run's val BLEU so far.
    export: only copy the evaluated runs' small outputs there. plot: only draw every run's val BLEU against
    training FLOPs so far there. table: only print the evaluated runs' scores. compared: only compare the finished
    models there, against baseline (default compare.baseline). page: only rewrite that results page's marked blocks
    (refresh_page). exported: curves, plot, table, compared and page read the
    runs an export copied there (curves and plot joined with the runs of this workspace, whose params are here, that
    it lacks); otherwise its finished runs, trained with recipe (its params.yaml), count as done and are not trained
    here (progress)."""
    out = out or sys.stdout  # read at the call, where a test may have replaced it
    if exported is not None and not Path(exported).is_dir():
        raise ConfigError(f"--from {exported}: no such folder; give the folder nmtbench converge --export wrote")
    if curves:
        print(curves_table(params, exported=exported, here=here), file=out)
        return 0
    if page is not None:
        cfg = params.launch.model_copy(update={"jobs": jobs} if jobs else {})
        blocks = refresh_page(params, Path(page), cfg.jobs, exported=exported, here=here, recipe=recipe)
        print(f"nmtbench converge: refreshed {page}: {', '.join(blocks)}", file=out)
        return 0
    if table:
        print(finished_table(params, exported=exported), file=out)
        return 0
    if plot is not None:
        families = plot_curves(params, plot, exported=exported, here=here)
        print(f"nmtbench converge: wrote {plot}. Families: {families}", file=out)
        return 0
    if compared is not None:
        comparison = compare_finished(params, compared, baseline, exported=exported)
        print(f"nmtbench converge: compared {len(comparison['models'])} finished model(s) against "
              f"{comparison['baseline']} in {compared}/comparison.md", file=out)
        return 0
    if export is not None:
        copied = export_finished(progress(params), export)
        print(f"nmtbench converge: copied {len(copied)} evaluated run(s) to {export}: {', '.join(copied) or 'none'}",
              file=out)
        return 0
    from nmtbench.launch import launch

    for model in first:
        params.model_block(model)  # an unknown name is refused in one line
    overrides = {key: value for key, value in (("jobs", jobs), ("threads_per_job", threads)) if value}
    cfg: LaunchConfig = params.launch.model_copy(update=overrides)
    runs = progress(params, exported=exported, exported_params=recipe)
    print(status_table(runs, cfg.jobs), file=out)
    if status_only:
        return 0
    order = stage_order(runs, first)
    if "compare" not in order:
        print(f"nmtbench converge: the runs exported to {exported} are not trained here, so the compare stage does "
              f"not run; compare every finished run with nmtbench converge --compare <folder> --from <export>, once "
              f"this workspace's have been exported there", file=out)
    return launch(cfg, targets=order, out=out, train=params.train, prefer=order)
