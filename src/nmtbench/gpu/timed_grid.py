"""`nmtbench gpu timed-grid` and `timed-grid-more`: a grid of runs in a fixed wall time, and more time for the runs
its budget stopped, on a machine that may lack dvc (a GPU machine lent for minutes: docs/gpu.md).

The grid is a workspace (params.yaml merged with profiles, with the carried data/tokenized) in which `nmtbench launch
--without-dvc` runs dvc.yaml's tune, train and evaluate stages of every run, N at once; then compare and report over
the models whose every run finished (params.yaml cut to them, the whole grid kept as params.grid.yaml). W&B is off.
    nmtbench gpu timed-grid runs/gpu-check/grid --profile profiles/gpu.yaml --profile profiles/gpu_converge.yaml \
        --tokenized .gpu-bundle/corpora/default/tokenized --seconds 300 --jobs 8
Time: `--seconds` is the whole run's; each training's time budget is what it leaves after the allowances for
starting and evaluating, split over the waves of jobs (training_seconds), and the launcher cuts whatever runs past
it. The GPU's memory is sampled with nvidia-smi while the trainings run, where it exists.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import yaml

from nmtbench.config import LaunchConfig, parse_params
from nmtbench.files import read_json, read_yaml, write_text
from nmtbench.launch.jobs import importable
from nmtbench.launch.scheduler import launch
from nmtbench.param_blocks import ConfigError
from nmtbench.profiles import PlainDumper, make_workspace, merged_params

# the allowances of a GPU machine of 16 cores (--startup-seconds, --evaluate-seconds): starting Python, torch and
# CUDA and loading the data for tune@ and train@ of a run, then evaluate@'s two test sets at beam 5 (the first GPU
# run's logs: docs/results/2026-11-27-gpu-h100.md)
STARTUP_SECONDS, EVALUATE_SECONDS = 25, 35
# compare (bootstrap over every model) and report after the last evaluation
FINISH_SECONDS = 40
SUMMARY = "timed_grid.json"


def setting(text: str) -> dict:
    """`train.budget.value=150` -> {"train": {"budget": {"value": 150}}}: a dotted key and a YAML value, as a
    profile holding that one value."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {text}: expected key=value, e.g. train.lr=0.005")
    block = yaml.safe_load(value)
    for name in reversed(key.split(".")):
        block = {name: block}
    return block


def overrides(settings: list[dict], tiny_models: Path | None) -> list[dict]:
    """What goes on top of the profiles, in order: the settings, then the models block of tiny_models (the CPU
    rehearsal's smoke sizes, which size only the models the grid has)."""
    return [*settings, *([{"models": read_yaml(tiny_models).get("models", {})}] if tiny_models else [])]


def training_seconds(seconds: float, runs: int, jobs: int, startup: float = STARTUP_SECONDS,
                     evaluate: float = EVALUATE_SECONDS) -> int:
    """Each training's time budget when `runs` chains share `seconds` in waves of `jobs` at once."""
    waves = math.ceil(runs / jobs)
    per_wave = (seconds - FINISH_SECONDS) / waves - startup - evaluate
    return max(int(per_wave), 5)


def prepare_workspace(folder: Path, project: Path, profiles: list[Path], extra: list[dict], tokenized: Path) -> dict:
    """folder as nmtbench workspace makes it, without git and dvc, on the carried tokenized corpus; its params."""
    params = merged_params(project, profiles, extra)
    refuse_other_data(params, tokenized.parent / "params.json")
    make_workspace(project, folder, profiles, extra=extra, with_dvc=False)
    (folder / "data").mkdir(exist_ok=True)
    if not (folder / "data" / "tokenized").exists():
        (folder / "data" / "tokenized").symlink_to(tokenized.resolve())
    return params


def refuse_other_data(params: dict, recorded: Path) -> None:
    """The carried corpus was tokenized with the data and tokenize blocks recorded beside it; other ones would
    train on data the params do not describe."""
    if not recorded.is_file():
        return
    made_with = json.loads(recorded.read_text())
    for block in ("data", "tokenize"):
        if params.get(block) != made_with.get(block):
            raise ConfigError(f"{recorded.parent}: the carried data/tokenized was made with other {block} params than "
                              "this run's; rebuild the carried folder (make gpu-bundle) or leave the block as "
                              "params.yaml has it")


def only_models(params: dict, names: list[str]) -> dict:
    """params with these models alone; refused in one line when one is not there or compare.baseline (or
    beam_sweep.model) is not among them."""
    unknown = [name for name in names if name not in params["models"]]
    if unknown:
        raise ConfigError(f"--models: {', '.join(unknown)} not in the merged params' models; drop them or add a "
                          "profile that defines them")
    kept = {**params, "models": {name: params["models"][name] for name in names}}
    parse_params(kept)
    return kept


def finished_only(params: dict, finished: list[str]) -> dict:
    """params with only the models whose every run finished, for compare and report: the baseline and beam_sweep's
    model move to the first of them where theirs did not finish, and the papers' figures of the others go."""
    compare, sweep = params.get("compare", {}), params.get("beam_sweep", {})
    published = {name: figure for name, figure in compare.get("published", {}).items() if name in finished}
    moved = {**params, "compare": {**compare, "published": published}}
    if compare.get("baseline") not in (None, *finished):
        moved["compare"]["baseline"] = finished[0]
    if sweep.get("model") not in (None, *finished):
        moved["beam_sweep"] = {**sweep, "model": finished[0]}
    return only_models(moved, finished)


class GpuMemory:
    """nvidia-smi sampling the GPU's used memory twice a second while the block runs; peak_mib afterwards."""

    def __init__(self, folder: Path):
        self.path, self.process = folder / "launch" / "gpu_memory.csv", None

    def __enter__(self):
        if shutil.which("nvidia-smi"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.process = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,memory.used,utilization.gpu",
                                             "--format=csv,noheader,nounits", "-lms", "500"],
                                            stdout=open(self.path, "w"), stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        if self.process:
            self.process.terminate()
            self.process.wait()

    @property
    def peak_mib(self) -> int | None:
        if not self.path.is_file():
            return None
        used = [int(line.split(",")[1]) for line in self.path.read_text().splitlines() if line.count(",") == 2]
        return max(used, default=None)


def launched(folder: Path, targets: list[str], jobs: int, seconds: float) -> int:
    """dvc.yaml's stages named, alone, run in folder without dvc, `jobs` at once on this machine (never as SLURM
    jobs: the time limit is this machine's), cut after `seconds`."""
    cfg = LaunchConfig(jobs=jobs, executor="local" if importable("submitit") else "process")
    with contextlib.chdir(folder):
        return launch(cfg, targets, prefer=targets, without_dvc=True, single_item=True,
                      time_limit=max(seconds, 1.0))


def run_stages(model: str, seed: int, first_of_model: bool) -> list[str]:
    """A run's stages in dvc.yaml's order: tune@ once per model (no trials: it writes the tuned/<model>.yaml
    compare reads), then train@ and evaluate@."""
    return [*([f"tune@{model}"] if first_of_model else []), f"train@{model}-{seed}", f"evaluate@{model}-{seed}"]


def train_row(folder: Path, model: str, seed: int) -> dict:
    path = folder / "metrics" / model / f"seed{seed}" / "train.json"
    found = read_json(path) if path.is_file() else {}
    row = {"model": model, "seed": seed, **{key: found.get(key) for key in
           ("steps", "epochs", "train_seconds", "train_tokens_per_s", "best_val_bleu", "precision")}}
    path = folder / "metrics" / model / f"seed{seed}" / "eval.json"
    scores = read_json(path) if path.is_file() else {}
    for split, found in scores.items():
        if isinstance(found, dict) and "bleu" in found:
            row[split] = {key: found.get(key) for key in ("bleu", "bleu_lc_tok", "sentences_per_s")}
    return row


def summary_table(summary: dict) -> str:
    """The runs one line each (BLEU and BLEU lc tok per test set), then how they ran."""
    lines = ["model seed: steps epochs train_s target_tok/s best_val_bleu | per test set: BLEU / BLEU lc tok"]
    for row in summary["runs"]:
        scores = [f"{split} {found['bleu']} / {found['bleu_lc_tok']}" for split, found in row.items()
                  if isinstance(found, dict)]
        lines.append(f"{row['model']} {row['seed']}: {row['steps']} {row['epochs']} {row['train_seconds']} "
                     f"{row['train_tokens_per_s']} {row['best_val_bleu']} | {'; '.join(scores) or 'not evaluated'}")
    lines.append(f"{summary['jobs']} at once, {summary['train_budget_seconds']} s of training each, GPU peak "
                 f"{summary['gpu_peak_memory_mib']} MiB, {summary['wall_seconds']} s, all ok: {summary['all_ok']}, "
                 f"compared: {', '.join(summary['compared']) or 'none'}")
    return "\n".join(lines)


def compare_and_report(folder: Path, params: dict, finished: list[str], seconds: float) -> bool:
    """compare, then report, over the finished models: where some run did not finish, params.yaml is cut to the
    others first (the whole grid kept as params.grid.yaml), so one failed run still leaves a comparison of the rest.
    True when compare succeeded."""
    if finished != list(params["models"]):
        os.replace(folder / "params.yaml", folder / "params.grid.yaml")
        write_text(folder / "params.yaml", "# the grid's params.yaml (params.grid.yaml) cut to the models whose every "
                   "run finished, by nmtbench gpu timed-grid\n"
                   + yaml.dump(finished_only(params, finished), Dumper=PlainDumper, sort_keys=False))
        print(f"compare and report on the models whose every run finished: {', '.join(finished)}", flush=True)
    # afresh: the launcher runs a stage whose output is missing, and the evaluations it follows ran in another launch
    # (a later call's, for nmtbench gpu timed-grid-more), which it cannot see
    (folder / "results" / "comparison.json").unlink(missing_ok=True)
    launched(folder, ["compare", "report"], 1, seconds)
    return (folder / "results" / "comparison.json").is_file()


def timed_grid(project: Path, folder: Path, profiles: list[Path], settings: list[dict], tokenized: Path,
               seconds: float, jobs: int | None = None, models: list[str] | None = None,
               tiny_models: Path | None = None, startup: float = STARTUP_SECONDS, evaluate: float = EVALUATE_SECONDS,
               compare: bool = True) -> int:
    """0 when every run trained and was evaluated."""
    started = time.monotonic()
    extra = overrides(settings, tiny_models)
    params = merged_params(project, profiles, extra)
    grid = list(only_models(params, models)["models"] if models else params["models"])  # refused before writing
    runs = [(model, seed) for model in grid for seed in params.get("seeds", [42])]
    jobs = min(jobs or len(runs), len(runs))
    budget = training_seconds(seconds, len(runs), jobs, startup, evaluate)
    extra += [{"train": {"budget": {"kind": "time", "value": budget}}}]
    params = prepare_workspace(folder, project, profiles, extra, tokenized)
    if models:  # a profile adds or changes models but drops none: the cut is written over the merge
        params = only_models(params, models)
        write_text(folder / "params.yaml", "# params.yaml merged with profiles, cut to --models by nmtbench gpu "
                   "timed-grid\n" + yaml.dump(params, Dumper=PlainDumper, sort_keys=False))
    print(f"{folder}: {len(runs)} runs, {jobs} at once, {budget} s of training each", flush=True)
    os.environ.update(WANDB_MODE="disabled", PYTHONUNBUFFERED="1")
    order, tuned = [], set()
    for model, seed in runs:
        order += run_stages(model, seed, model not in tuned)
        tuned.add(model)
    return run_and_compare(folder, params, runs, order, jobs, budget, seconds, started, compare)


def more_grid(folder: Path, seconds: float, jobs: int | None = None, startup: float = STARTUP_SECONDS,
              evaluate: float = EVALUATE_SECONDS) -> int:
    """A grid timed_grid trained in folder before, given `seconds` more on the same machine: every run that its time
    budget ended before early stopping (train.json's stopped_by: budget, its unfinished/last.ckpt kept), or that has
    no train.json, trains on from its last checkpoint for its share of them, then is evaluated again; compare and
    report as timed_grid's. The runs' budget is raised by that share: train.budget is not part of a run's
    fingerprint, and a time budget counts a run's earlier training too. 0 when every run trained and was
    evaluated."""
    started = time.monotonic()
    if (folder / "params.grid.yaml").is_file():  # compare_and_report cut params.yaml to the models that finished
        os.replace(folder / "params.grid.yaml", folder / "params.yaml")
    params = read_yaml(folder / "params.yaml")
    runs = [(model, seed) for model in params["models"] for seed in params.get("seeds", [42])]
    todo = [run for run in runs if unfinished(folder, *run)]
    if not todo:
        print(f"{folder}: every run stopped by itself; nothing to give more time", flush=True)
        return 0
    if params["train"]["budget"]["kind"] != "time":
        raise ConfigError(f"{folder}/params.yaml: train.budget.kind is {params['train']['budget']['kind']}; "
                          "nmtbench gpu timed-grid-more raises a time budget, the one nmtbench gpu timed-grid sets")
    jobs = min(jobs or len(todo), len(todo))
    share = training_seconds(seconds, len(todo), jobs, startup, evaluate)
    budget = params["train"]["budget"]["value"] + share
    params["train"]["budget"]["value"] = budget
    write_text(folder / "params.yaml", f"# train.budget raised by {share} s by nmtbench gpu timed-grid-more\n"
               + yaml.dump(params, Dumper=PlainDumper, sort_keys=False))
    for model, seed in todo:  # the launcher runs a stage whose outputs are missing: train, then evaluate
        for name in ("train.json", "eval.json"):
            (folder / "metrics" / model / f"seed{seed}" / name).unlink(missing_ok=True)
    print(f"{folder}: {len(todo)} of {len(runs)} runs go on, {jobs} at once, {share} s more training each", flush=True)
    os.environ.update(WANDB_MODE="disabled", PYTHONUNBUFFERED="1")
    order = [stage for run in todo for stage in run_stages(*run, first_of_model=False)]
    return run_and_compare(folder, params, runs, order, jobs, budget, seconds, started, compare=True)


def unfinished(folder: Path, model: str, seed: int) -> bool:
    """The run has no train.json, or its budget ended it before early stopping and left its last checkpoint."""
    path = folder / "metrics" / model / f"seed{seed}" / "train.json"
    if not path.is_file():
        return True
    last = folder / "models" / model / f"seed{seed}" / "unfinished" / "last.ckpt"
    return read_json(path).get("stopped_by") == "budget" and last.is_file()


def run_and_compare(folder: Path, params: dict, runs: list[tuple[str, int]], order: list[str], jobs: int,
                    budget: float, seconds: float, started: float, compare: bool) -> int:
    """The stages in order, `jobs` at once, within what is left of `seconds`; then compare and report over the
    models whose every run was evaluated, and timed_grid.json with every run's figures."""
    with GpuMemory(folder) as memory:
        launched(folder, order, jobs, seconds - FINISH_SECONDS - (time.monotonic() - started))
    evaluated = {run: (folder / "metrics" / run[0] / f"seed{run[1]}" / "eval.json").is_file() for run in runs}
    grid = list(dict.fromkeys(model for model, _ in runs))
    finished = [model for model in grid if all(done for (name, _), done in evaluated.items() if name == model)]
    left = seconds - (time.monotonic() - started)
    compared = bool(finished) and compare and compare_and_report(folder, params, finished, left)
    summary = {"runs": [train_row(folder, *run) for run in runs], "jobs": jobs, "train_budget_seconds": budget,
               "gpu_peak_memory_mib": memory.peak_mib, "wall_seconds": round(time.monotonic() - started, 1),
               "all_ok": all(evaluated.values()), "compared": finished if compared else []}
    write_text(folder / SUMMARY, json.dumps(summary, indent=1) + "\n")
    print(summary_table(summary))
    if compared:
        print((folder / "results" / "comparison.md").read_text().split("\n\n")[0])
    return 0 if summary["all_ok"] else 1
