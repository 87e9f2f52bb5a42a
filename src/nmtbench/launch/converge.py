"""`nmtbench converge` (make converge): train every run of a workspace to its own stopping and evaluate it, N at once,
across as many sittings as it takes. Each call first says what is left, with the time it should take estimated
from the epochs measured so far, then starts what has not finished and resumes what was interrupted (each
training from its last checkpoint: docs/training.md, "Resuming"); every run is evaluated as soon as it has
trained, so its translations land before the next model starts."""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from nmtbench.config import ConfigError, LaunchConfig, Params, load_params
from nmtbench.files import lock_owner, read_json, running
from nmtbench.launch.converge_report import curves_table, finished_table, plot_curves, refresh_page, status_table
from nmtbench.launch.run_state import RunProgress, finished_run, progress, recipe_difference, run_files
from nmtbench.launch.scheduler import FOLDER
from nmtbench.run_paths import RESULTS, RunPaths


def export_finished(runs: list[RunProgress], folder: Path, root: Path = Path(".")) -> list[str]:
    """Copy each evaluated run's small outputs (train.json, learning_curve.csv, eval.json and its translations of every
    test set) into folder/<model>/seed<seed>/, to be committed as they land, and the workspace's params.yaml, the
    recipe they trained with, into folder (what --from reads back); returns the runs copied. An export there already
    is merged into: refused unless these params train every run its params.yaml describes as that does."""
    copied = []
    Path(folder).mkdir(parents=True, exist_ok=True)
    if (Path(root) / "params.yaml").is_file():
        covers_export(load_params(Path(root) / "params.yaml"), Path(folder))
        shutil.copyfile(Path(root) / "params.yaml", Path(folder) / "params.yaml")
    for run in runs:
        if run.state != "evaluated":
            continue
        finished_run(run.model, run.seed, root, None)  # a damaged train.json or eval.json is refused, not copied
        target = Path(folder) / run.model / f"seed{run.seed}"
        target.mkdir(parents=True, exist_ok=True)
        for file in [file for files in run_files(run.model, run.seed, root, None) for file in files]:
            shutil.copyfile(file, target / file.name)
        copied.append(f"{run.model}-{run.seed}")
    return copied


def covers_export(params: Params, folder: Path) -> None:
    """Refuse, in one line, to replace an export's params.yaml with params that would not train one of the runs it
    describes as it does: --from would then read (or retrain) the runs exported before with another recipe."""
    there = folder / "params.yaml"
    if not there.is_file():
        return
    recipe, fix = load_params(there), "export to a folder of its own, or from a workspace of that recipe"
    for part, lacking in (("seeds", [str(seed) for seed in recipe.seeds if seed not in params.seeds]),
                          ("models", [model for model in recipe.models if model not in params.models])):
        if lacking:
            raise ConfigError(f"--export {folder}: its params.yaml has {part} {', '.join(lacking)}, which this "
                              f"workspace's lacks; {fix}")
    for model in recipe.models:
        for seed in recipe.seeds:
            differ = recipe_difference(params, recipe, model, seed)
            if differ:
                part, keys = differ
                raise ConfigError(f"--export {folder}: its params.yaml trains {model} seed {seed} with other {part} "
                                  f"params than this workspace's ({', '.join(keys) or 'the whole block'}); {fix}")


def compare_finished(params: Params, folder: Path, baseline: str | None = None, root: Path = Path("."),
                     exported: Path | None = None, tokenized_dir: Path = Path("data/tokenized")) -> dict:
    """The compare stage over the models whose every run is evaluated so far (the workspace's, or an export's),
    written into folder (comparison.json and .md, flops_curves.csv, bleu.json): each model's 95% interval and p
    against the baseline, the verdicts and the swaps while the grid still trains. The runs are gathered in a
    scratch folder laid out as the compare stage reads them, so the workspace's results/ stays dvc's."""
    from nmtbench.data.tokenized import TokenizedSplits
    from nmtbench.evaluation.compare import compare

    names = [model for model in params.models
             if all(finished_run(model, seed, root, exported) for seed in params.seeds)]
    if not names:
        raise ConfigError("nmtbench converge --compare: no model has been evaluated yet; compare once the first "
                          "run has finished")
    baseline = baseline or params.compare.baseline or next(iter(params.models))
    if baseline not in params.models:  # a typo, not a model still training
        raise ConfigError(f"nmtbench converge --compare: the baseline {baseline} is not a model of the params; name "
                          f"one with --baseline: {', '.join(params.models)}")
    if baseline not in names:
        raise ConfigError(f"nmtbench converge --compare: the baseline {baseline} has not finished; name a finished "
                          f"model with --baseline: {', '.join(names)}")
    test_sets = TokenizedSplits(Path(root) / tokenized_dir)
    published = {name: row for name, row in params.compare.published.items() if name in names}
    cfg = params.compare.model_copy(update={"baseline": baseline, "published": published})
    with tempfile.TemporaryDirectory() as scratch:
        for model in names:
            for seed in params.seeds:
                paths = RunPaths(model, seed, Path(scratch))
                metrics, translations = run_files(model, seed, root, exported)
                same_test_sets(metrics[2], test_sets)
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


def same_test_sets(scores: Path, test_sets) -> None:
    """Refuse, in one line, a run scored on other test sets than this workspace's data/tokenized holds (a smoke
    workspace comparing the grid's export): the compare stage would name the scratch copy of its translation and a
    stage to rerun. Runs whose eval.json predates recording the count are left to the compare stage's checks."""
    found = read_json(scores) if scores.is_file() else {}
    for split, row in found.items():
        sentences = row.get("sentences") if isinstance(row, dict) and split in test_sets else None
        if sentences is not None and sentences != len(test_sets[split]):
            raise ConfigError(f"{scores}: scored {sentences:,} sentences of {split}, where this workspace's test set "
                              f"has {len(test_sets[split]):,}; compare the runs in a workspace of the data block "
                              "they were evaluated on")


def refuse_orphans(runs: list[RunProgress]) -> None:
    """Refuse, in one line, to launch while a training of the grid runs on from a launcher killed alone (its lock
    would fail that run, and the next model would start beside it: two trainings under one job). While the launcher
    itself runs, its lock refuses the launch."""
    launcher = lock_owner(FOLDER / "launch.lock")
    orphans = [run for run in runs if run.training_pid and not (launcher and running(launcher))]
    if orphans:
        pids = " ".join(str(run.training_pid) for run in orphans)
        raise ConfigError(f"nmtbench converge: {', '.join(f'{run.model} seed {run.seed}' for run in orphans)} still "
                          f"training (pid {pids}) from a launch that was stopped; wait for it or stop it (kill "
                          f"{pids}), then rerun")


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


def existing_export(exported: Path | None) -> Path | None:
    """The folder --from names, refused in one line where there is none."""
    if exported is not None and not Path(exported).is_dir():
        raise ConfigError(f"--from {exported}: no such folder; give the folder nmtbench converge --export wrote")
    return exported


# The actions of nmtbench converge besides training, each chosen by its own flag (one at a time). exported: the runs
# an export copied there, read instead of the workspace's; here: this workspace's params, whose runs the export lacks
# join the curves and the plot.

def print_curves(params: Params, exported: Path | None = None, here: Params | None = None, out=None) -> int:
    """--curves: every run's val BLEU at each epoch so far."""
    print(curves_table(params, exported=existing_export(exported), here=here), file=out or sys.stdout)
    return 0


def print_table(params: Params, exported: Path | None = None, out=None) -> int:
    """--table: every evaluated run's size, best checkpoint, stopping and scores."""
    print(finished_table(params, exported=existing_export(exported)), file=out or sys.stdout)
    return 0


def write_page(params: Params, page: Path, jobs: int | None = None, exported: Path | None = None,
               here: Params | None = None, recipe: Params | None = None, out=None) -> int:
    """--page: a results page's marked blocks rewritten (refresh_page); recipe, the export's params."""
    cfg = params.launch.model_copy(update={"jobs": jobs} if jobs else {})
    blocks = refresh_page(params, Path(page), cfg.jobs, exported=existing_export(exported), here=here, recipe=recipe)
    print(f"nmtbench converge: refreshed {page}: {', '.join(blocks)}", file=out or sys.stdout)
    return 0


def draw_plot(params: Params, plot: Path, exported: Path | None = None, here: Params | None = None, out=None) -> int:
    """--plot: every run's val BLEU against training FLOPs so far, the families' swap marked."""
    families = plot_curves(params, plot, exported=existing_export(exported), here=here)
    print(f"nmtbench converge: wrote {plot}. Families: {families}", file=out or sys.stdout)
    return 0


def compare_so_far(params: Params, folder: Path, baseline: str | None = None, exported: Path | None = None,
                   out=None) -> int:
    """--compare: the compare stage over the models finished so far (compare_finished)."""
    comparison = compare_finished(params, folder, baseline, exported=existing_export(exported))
    print(f"nmtbench converge: compared {len(comparison['models'])} finished model(s) against "
          f"{comparison['baseline']} in {folder}/comparison.md", file=out or sys.stdout)
    return 0


def export(params: Params, folder: Path, out=None) -> int:
    """--export: this workspace's evaluated runs' small outputs copied to folder, to be committed."""
    copied = export_finished(progress(params), folder)
    print(f"nmtbench converge: copied {len(copied)} evaluated run(s) to {folder}: {', '.join(copied) or 'none'}",
          file=out or sys.stdout)
    return 0


def converge(params: Params, jobs: int | None = None, first: list[str] = (), threads: int | None = None,
             status_only: bool = False, exported: Path | None = None, recipe: Params | None = None, out=None) -> int:
    """Say what is left and how long it should take, then (unless status_only) train and evaluate what has not
    finished, N at once. first: models to start before the others, in this order. jobs, threads: launch.jobs and
    launch.threads_per_job for this call. The runs an export at `exported` holds, trained with recipe (its
    params.yaml), count as done and are not trained here (progress)."""
    from nmtbench.launch import launch

    out = out or sys.stdout  # read at the call, where a test may have replaced it
    for model in first:
        params.model_block(model)  # an unknown name is refused in one line
    overrides = {key: value for key, value in (("jobs", jobs), ("threads_per_job", threads)) if value}
    cfg: LaunchConfig = params.launch.model_copy(update=overrides)
    runs = progress(params, exported=existing_export(exported), exported_params=recipe)
    print(status_table(runs, cfg.jobs), file=out)
    if status_only:
        return 0
    refuse_orphans(runs)
    order = stage_order(runs, first)
    if "compare" not in order:
        print(f"nmtbench converge: the runs exported to {exported} are not trained here, so the compare stage does "
              f"not run; compare every finished run with nmtbench converge --compare <folder> --from <export>, once "
              f"this workspace's have been exported there", file=out)
    return launch(cfg, targets=order, out=out, train=params.train, prefer=order)
