"""The trainings of tools/gpu_check.sh: the pipeline's stage commands run directly, several at once.

The GPU machine has neither dvc nor submitit (tools/gpu_bundle.py says why), so `dvc repro` and `nmtbench launch`
are out. Each run here is a workspace folder (params.yaml merged with profiles, the carried data/tokenized) in
which the stage commands of dvc.yaml run as `dvc repro` would run them, read from dvc.yaml itself and writing the
same files: for every model `nmtbench tune` (no trials: it writes tuned/<model>.yaml), `train` and `evaluate`, as
one chain per model, up to `--jobs` chains at once, each job's output in logs/<stage>.log; then `compare` and
`report` over the models whose every run finished (params.finished.yaml, when some did not). W&B is disabled.
    python tools/gpu_runs.py grid runs/gpu-check/grid --profile profiles/gpu.yaml --profile profiles/gpu_converge.yaml
        --tokenized .gpu-bundle/corpora/default/tokenized --seconds 300 --jobs 8
    python tools/gpu_runs.py probe runs/gpu-check/probe --profile ... --levels 1 4 8 --train-seconds 20
Time: `--seconds` is the whole run's, which no stage outlasts; each training's time budget is what it leaves after
the allowances for starting and evaluating, split over the waves of jobs (training_seconds). A training that
overruns its budget eats into what compare has left, never into its own evaluation. The GPU's memory is sampled
with nvidia-smi while the trainings run, where it exists.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from nmtbench.config import apply_profile, merge, parse_params, read_yaml

ROOT = Path(__file__).resolve().parent.parent
# the allowances of a GPU machine of 16 cores (--startup-seconds, --evaluate-seconds): starting Python, torch and
# CUDA and loading the data for tune@ and train@ of a run, then evaluate@'s two test sets at beam 5; guesses
# until the first GPU run measures them (its logs give each stage's time)
STARTUP_SECONDS, EVALUATE_SECONDS = 25, 35
# compare (bootstrap over every model) and report after the last evaluation
FINISH_SECONDS = 40


def assignment(text: str) -> tuple[list[str], object]:
    """`train.budget.value=150` -> (["train", "budget", "value"], 150): a dotted key and a YAML value."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--set {text}: expected key=value, e.g. train.lr=0.005")
    return key.split("."), yaml.safe_load(value)


def with_settings(raw: dict, settings: list[tuple[list[str], object]]) -> dict:
    """raw with each dotted key set (the blocks along the way created), as dvc exp run -S sets params."""
    raw = json.loads(json.dumps(raw))  # a deep copy: the caller's dict stays as it was
    for keys, value in settings:
        block = raw
        for key in keys[:-1]:
            block = block.setdefault(key, {})
        block[keys[-1]] = value
    return raw


def shrunk(merged: dict, tiny: dict) -> dict:
    """merged with each of its models shrunk by the block of the same name in tiny's models (the smoke sizes);
    a model tiny does not name stays as it is, and none is added."""
    sizes = tiny.get("models", {})
    return {**merged, "models": {name: merge(block, sizes.get(name, {})) for name, block in merged["models"].items()}}


def merged_params(profiles: list[Path], settings: list, tiny_models: Path | None = None) -> dict:
    """params.yaml with the profiles merged on in order, then the settings, then the tiny sizes if given;
    refused at once if invalid."""
    merged = with_settings(apply_profile(read_yaml(ROOT / "params.yaml"), *(read_yaml(p) for p in profiles)),
                           settings)
    if tiny_models:
        merged = shrunk(merged, read_yaml(tiny_models))
    parse_params(merged)  # a bad override fails here, before any training
    return merged


def only_models(merged: dict, names: list[str]) -> dict:
    """merged with these models alone, so compare and report cover just them; refused at once when one is not
    there or compare.baseline (or beam_sweep.model) is not among them."""
    unknown = [name for name in names if name not in merged["models"]]
    if unknown:
        sys.exit(f"gpu_runs: --models: {', '.join(unknown)} not in the merged params' models")
    kept = {**merged, "models": {name: merged["models"][name] for name in names}}
    parse_params(kept)
    return kept


def make_workspace(folder: Path, merged: dict, tokenized: Path) -> None:
    """folder as `nmtbench workspace` makes it, but without git and dvc: the merged params.yaml, the outside
    systems compare reads, and the carried tokenized corpus."""
    refuse_other_data(merged, tokenized.parent / "params.json")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.yaml").write_text("# params.yaml merged with profiles, written by tools/gpu_runs.py\n"
                                        + yaml.safe_dump(merged, sort_keys=False))
    shutil.copytree(ROOT / "systems", folder / "systems", dirs_exist_ok=True)
    (folder / "data").mkdir(exist_ok=True)
    if not (folder / "data" / "tokenized").exists():
        (folder / "data" / "tokenized").symlink_to(tokenized.resolve())


def refuse_other_data(merged: dict, recorded: Path) -> None:
    """The carried corpus was tokenized with the data and tokenize blocks recorded beside it; other ones would
    train on data the params do not describe."""
    if not recorded.is_file():
        return
    made_with = json.loads(recorded.read_text())
    for block in ("data", "tokenize"):
        if merged.get(block) != made_with.get(block):
            sys.exit(f"gpu_runs: the carried data/tokenized was made with other {block} params than this run's; "
                     "rebuild the carried folder (make gpu-bundle) or leave the block as params.yaml has it")


def training_seconds(seconds: float, runs: int, jobs: int, startup: float = STARTUP_SECONDS,
                     evaluate: float = EVALUATE_SECONDS) -> int:
    """Each training's time budget when `runs` chains share `seconds` in waves of `jobs` at once."""
    waves = math.ceil(runs / jobs)
    per_wave = (seconds - FINISH_SECONDS) / waves - startup - evaluate
    return max(int(per_wave), 5)


def choose_jobs(probe: dict[int, dict]) -> int:
    """The number of trainings at once that moved the most target tokens per second through the GPU."""
    return max(probe, key=lambda jobs: (probe[jobs]["total_tokens_per_s"], -jobs))


def stage(folder: Path, name: str, command: list[str], env: dict, deadline: float) -> bool:
    """One stage command in folder, its output in logs/<name>.log; False when it fails or the deadline passes."""
    (folder / "logs").mkdir(exist_ok=True)
    with open(folder / "logs" / f"{name}.log", "w") as log:
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-m", "nmtbench", *command], cwd=folder, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=max(deadline - time.monotonic(), 1))
            ok = done.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        print(f"  {'done' if ok else 'FAILED'}: {name} ({time.monotonic() - started:.0f} s)", flush=True)
        return ok


def job_env(threads: int) -> dict:
    """A stage's environment: W&B off, and the cores shared between the jobs, within any cap the caller set."""
    threads = min(threads, int(os.environ.get("OMP_NUM_THREADS") or threads))
    return {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}


def stage_command(stage_name: str, **item) -> list[str]:
    """The arguments of nmtbench in the cmd of a stage of the checkout's dvc.yaml, its ${item.<key>} filled in
    from item: stage_command("train", model="gru", seed=7) -> ["train", "gru", "--seed", "7"]."""
    command = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][stage_name]["cmd"]
    for key, value in item.items():
        command = command.replace(f"${{item.{key}}}", str(value))
    words = shlex.split(command)
    if words[:1] != ["nmtbench"] or any(sign in command for sign in "$&|;<>`"):  # unfilled ${...}, a shell's
        sys.exit(f"gpu_runs: dvc.yaml's {stage_name} stage runs `{command}`; this lane runs one nmtbench command "
                 f"per stage, its ${{item.*}} from {sorted(item) or 'nothing'}: make the cmd one such command")
    return words[1:]


def chain(folder: Path, model: str, seed: int, env: dict, deadline: float, full: bool) -> bool:
    """train@ of one model and seed; in full, as dvc.yaml orders them, tune@ before it (no trials: it writes the
    tuned/<model>.yaml compare reads) and evaluate@ after it. Stops at the first failure."""
    names = {"tune": f"tune@{model}", "train": f"train@{model}-{seed}", "evaluate": f"evaluate@{model}-{seed}"}
    stages = ("tune", "train", "evaluate") if full else ("train",)
    return all(stage(folder, names[s], stage_command(s, model=model, seed=seed), env, deadline) for s in stages)


class GpuMemory:
    """nvidia-smi sampling the GPU's used memory twice a second while the block runs; peak_mib afterwards."""

    def __init__(self, folder: Path):
        self.path, self.process = folder / "logs" / "gpu_memory.csv", None

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


def run_chains(folder: Path, runs: list[tuple[str, int]], jobs: int, deadline: float, full: bool) -> list[bool]:
    env = job_env(max(1, (os.cpu_count() or 1) // jobs))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda run: chain(folder, *run, env, deadline, full), runs))


def train_row(folder: Path, model: str, seed: int) -> dict:
    path = folder / "metrics" / model / f"seed{seed}" / "train.json"
    found = json.loads(path.read_text()) if path.is_file() else {}
    row = {"model": model, "seed": seed, **{key: found.get(key) for key in
           ("steps", "epochs", "train_seconds", "train_tokens_per_s", "best_val_bleu", "precision")}}
    path = folder / "metrics" / model / f"seed{seed}" / "eval.json"
    scores = json.loads(path.read_text()) if path.is_file() else {}
    for split, found in scores.items():
        if isinstance(found, dict) and "bleu" in found:
            row[split] = {key: found.get(key) for key in ("bleu", "bleu_lc_tok", "sentences_per_s")}
    return row


def summary_table(summary: dict) -> str:
    """The runs one line each (BLEU and BLEU lc tok per test set), then how they ran: what summary.txt shows."""
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


def finished_only(merged: dict, finished: list[str]) -> dict:
    """merged with only the models whose every run finished, for compare and report: the baseline and beam_sweep's
    model move to the first of them where theirs did not finish, and the papers' figures of the others go."""
    compare, sweep = merged.get("compare", {}), merged.get("beam_sweep", {})
    published = {name: figure for name, figure in compare.get("published", {}).items() if name in finished}
    moved = {**merged, "compare": {**compare, "published": published}}
    if compare.get("baseline") not in (None, *finished):
        moved["compare"]["baseline"] = finished[0]
    if sweep.get("model") not in (None, *finished):
        moved["beam_sweep"] = {**sweep, "model": finished[0]}
    return only_models(moved, finished)


def compare_and_report(folder: Path, merged: dict, finished: list[str], deadline: float) -> bool:
    """dvc.yaml's compare, then report, over the finished models: on params.yaml when every model finished, else on
    params.finished.yaml, the params cut to them, so one failed run still leaves a comparison of the others.
    True when compare succeeded."""
    cut = []
    if finished != list(merged["models"]):
        (folder / "params.finished.yaml").write_text(
            "# params.yaml cut to the models whose every run finished, written by tools/gpu_runs.py\n"
            + yaml.safe_dump(finished_only(merged, finished), sort_keys=False))
        cut = ["--params", "params.finished.yaml"]
        print(f"compare and report on the models whose every run finished: {', '.join(finished)}", flush=True)
    env = job_env(os.cpu_count() or 1)
    if not stage(folder, "compare", stage_command("compare") + cut, env, deadline):
        return False
    stage(folder, "report", stage_command("report") + cut, env, deadline)
    return True


def grid(args) -> int:
    started = time.monotonic()
    params = merged_params(args.profile, args.set, args.tiny_models)
    if args.models:
        params = only_models(params, args.models)
    models = list(params["models"])
    runs = [(model, seed) for model in models for seed in params.get("seeds", [42])]
    jobs = min(args.jobs or len(runs), len(runs))
    budget = training_seconds(args.seconds, len(runs), jobs, args.startup_seconds, args.evaluate_seconds)
    params = with_settings(params, [(["train", "budget"], {"kind": "time", "value": budget})])
    make_workspace(args.folder, params, args.tokenized)
    print(f"{args.folder}: {len(runs)} runs, {jobs} at once, {budget} s of training each", flush=True)
    deadline = started + args.seconds
    with GpuMemory(args.folder) as memory:
        ok = run_chains(args.folder, runs, jobs, deadline, True)
    finished = [model for model in models if all(done for (name, _), done in zip(runs, ok) if name == model)]
    compared = bool(finished) and not args.no_compare and compare_and_report(args.folder, params, finished, deadline)
    rows = [train_row(args.folder, *run) for run in runs]
    summary = {"runs": rows, "jobs": jobs, "train_budget_seconds": budget, "gpu_peak_memory_mib": memory.peak_mib,
               "wall_seconds": round(time.monotonic() - started, 1), "all_ok": all(ok),
               "compared": finished if compared else []}
    (args.folder / "gpu_runs.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(summary_table(summary))
    if compared:
        print((args.folder / "results" / "comparison.md").read_text().split("\n\n")[0])
    return 0 if all(ok) else 1


def probe(args) -> int:
    """--levels trainings of one model at once, each level in its own workspace, for --train-seconds each:
    target tokens/s per job and for the GPU, and the GPU's peak memory, then the number of jobs to pack.
    probe.json is rewritten after each level, so a probe cut short still tells the grid what it measured."""
    found = {"model": args.model, "train_seconds": args.train_seconds, "levels": {}}
    for jobs in args.levels:
        folder = args.folder / f"jobs{jobs}"
        settings = [*args.set, (["seeds"], list(range(1, jobs + 1))), (["beam_sweep", "seed"], 1),
                    (["train", "budget"], {"kind": "time", "value": args.train_seconds})]
        make_workspace(folder, merged_params(args.profile, settings, args.tiny_models), args.tokenized)
        runs = [(args.model, seed) for seed in range(1, jobs + 1)]
        started = time.monotonic()
        with GpuMemory(folder) as memory:  # a training's start, its budget and the validation that ends it
            ok = run_chains(folder, runs, jobs, started + args.train_seconds + 2 * args.startup_seconds, False)
        rates = [train_row(folder, *run)["train_tokens_per_s"] or 0 for run in runs]
        found["levels"][jobs] = {"per_job_tokens_per_s": rates, "total_tokens_per_s": round(sum(rates), 1),
                                 "gpu_peak_memory_mib": memory.peak_mib, "all_ok": all(ok),
                                 "wall_seconds": round(time.monotonic() - started, 1)}
        found["chosen_jobs"] = choose_jobs(found["levels"])
        (args.folder / "probe.json").write_text(json.dumps(found, indent=1) + "\n")
        print(f"  {jobs} at once: {sum(rates):,.0f} target tokens/s in all, peak GPU memory "
              f"{memory.peak_mib} MiB", flush=True)
    print(f"jobs per GPU chosen: {found['chosen_jobs']}")
    return 0 if all(level["all_ok"] for level in found["levels"].values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("grid", "probe"):
        command = commands.add_parser(name)
        command.add_argument("folder", type=Path, help="the workspace to write (created when missing)")
        command.add_argument("--profile", type=Path, action="append", default=[], help="merged in order")
        command.add_argument("--set", type=assignment, action="append", default=[], help="key=value, after them")
        command.add_argument("--tokenized", type=Path, required=True, help="the carried data/tokenized")
        command.add_argument("--startup-seconds", type=float, default=STARTUP_SECONDS,
                             help="a run's allowance to start tune@ and train@")
        command.add_argument("--tiny-models", type=Path, help="a profile whose models block shrinks the models "
                             "(the CPU rehearsal: profiles/smoke.yaml)")
    grid_command, probe_command = commands.choices["grid"], commands.choices["probe"]
    grid_command.add_argument("--seconds", type=float, required=True, help="the whole run's wall time")
    grid_command.add_argument("--models", nargs="*", help="only these models of the merged params (default: all)")
    grid_command.add_argument("--jobs", type=int, help="trainings at once (default: every run at once; the "
                              "probe's chosen_jobs measures one)")
    grid_command.add_argument("--evaluate-seconds", type=float, default=EVALUATE_SECONDS,
                              help="a run's allowance for evaluate@")
    grid_command.add_argument("--no-compare", action="store_true", help="train and evaluate only")
    probe_command.add_argument("--levels", type=int, nargs="+", default=[1, 4, 8])
    probe_command.add_argument("--train-seconds", type=int, default=20)
    probe_command.add_argument("--model", default="transformer")
    args = parser.parse_args(argv)
    return grid(args) if args.command == "grid" else probe(args)


if __name__ == "__main__":
    sys.exit(main())
