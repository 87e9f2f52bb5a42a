"""Each stage's start: the seconds from a fresh process to the stage's first real work, and what it loads for it.

    python benchmarks/stage_overhead.py [--runs 10] [--stages compare report]

Every pipeline stage is a process of its own (`nmtbench <stage>`), and before it reads a file it imports what its
command imports (its handler in src/nmtbench/commands/). For each stage kind this starts --runs fresh interpreters
that import exactly that, timed from before the process starts to its exit, and prints their median and fastest,
whether torch, Lightning and torch._dynamo were loaded, and the three packages that took longest to import (one more run
under `python -X importtime`). Rows for a bare interpreter and for torch and Lightning alone give the floor and
the cost a stage that loads them pays.

The figures are this machine's and only mean something on a quiet one: other work on its cores slows every
import. The table's first line names the CPU, the cores this process may use and the load average when it started.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from nmtbench.provenance import cpu_model

# what each stage's command imports before its first real work (commands/: the imports of its handler);
# tune with tune.trials 0, the default, imports no training
STAGES = {
    "python": [],
    "nmtbench --version": ["nmtbench.cli"],
    "check": ["nmtbench.cli", "nmtbench.analysis.sizing", "nmtbench.models.registry", "nmtbench.models.vocabulary"],
    "prepare": ["nmtbench.cli", "nmtbench.data.prepare", "nmtbench.data.sources"],
    "tokenize": ["nmtbench.cli", "nmtbench.data.tokenizer"],
    "tune (trials 0)": ["nmtbench.cli", "nmtbench.training.tuning"],
    "train": ["nmtbench.cli", "nmtbench.training.train", "nmtbench.training.tuning"],
    "evaluate": ["nmtbench.cli", "nmtbench.evaluation.evaluate", "nmtbench.training.tuning"],
    "translate": ["nmtbench.cli", "nmtbench.decoding.translator", "nmtbench.loading", "nmtbench.progress"],
    "compare": ["nmtbench.cli", "nmtbench.data.tokenized", "nmtbench.evaluation.compare",
                "nmtbench.evaluation.headline"],
    "analyze": ["nmtbench.cli", "nmtbench.analysis.analyze"],
    "beam_sweep": ["nmtbench.cli", "nmtbench.evaluation.beam_sweep"],
    "report": ["nmtbench.cli", "nmtbench.evaluation.report"],
    "torch alone": ["torch"],
    "torch and Lightning": ["torch", "lightning"],
}
WATCHED = {"torch": "torch", "Lightning": "lightning", "_dynamo": "torch._dynamo", "datasets": "datasets"}
CHILD = "import importlib, json, sys\n{imports}print(json.dumps([m in sys.modules for m in {watched!r}]))"


def child_code(modules: list[str]) -> str:
    return CHILD.format(imports="".join(f"importlib.import_module({name!r})\n" for name in modules),
                        watched=list(WATCHED.values()))


def timed_run(modules: list[str]) -> tuple[float, list[bool]]:
    """Seconds from starting the interpreter to its exit, and which of WATCHED it had loaded."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", child_code(modules)], capture_output=True, text=True, check=True)
    return time.perf_counter() - started, json.loads(done.stdout.splitlines()[-1])


def slowest_packages(modules: list[str], most: int = 3) -> list[tuple[str, float]]:
    """The packages other than nmtbench (and torch._dynamo) whose import took longest, in cumulative seconds, from
    python -X importtime; a package imported inside another counts in both."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", child_code(modules)], capture_output=True,
                          text=True, check=True)
    found = {}
    for line in done.stderr.splitlines():  # "import time: self [us] | cumulative | imported package"
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2].strip()
            if ("." not in name or name == "torch._dynamo") and name != "nmtbench":
                found[name] = int(parts[1]) / 1e6
    return sorted(found.items(), key=lambda item: -item[1])[:most]


def machine_line() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " / ".join(f"{value:.2f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
    return (f"{cpu_model()}, {cores} cores for this process ({os.cpu_count()} in all); load average {load} "
            f"(1 / 5 / 15 min); Python {platform.python_version()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per stage (default 10)")
    parser.add_argument("--stages", nargs="+", choices=list(STAGES), metavar="STAGE",
                        help=f"only these rows (default: all of {', '.join(STAGES)})")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs: must be at least 1, got {args.runs}")

    print(machine_line())
    print(f"{args.runs} fresh processes per row; seconds from start to exit of an interpreter importing what the "
          "stage imports before its first real work\n")
    print(f"| {'stage':20s} | {'median s':>8s} | {'fastest s':>9s} | "
          + " | ".join(f"{label:>9s}" for label in WATCHED) + " | slowest imports (s) |")
    print(f"|{'-' * 22}|{'-' * 9}:|{'-' * 10}:|" + "|".join("-" * 10 + ":" for _ in WATCHED) + "|---|")
    for stage in args.stages or STAGES:
        modules = STAGES[stage]
        runs = [timed_run(modules) for _ in range(args.runs)]
        seconds, loaded = [wall for wall, _ in runs], runs[-1][1]
        slowest = ", ".join(f"{name} {took:.2f}" for name, took in slowest_packages(modules)) or "-"
        print(f"| {stage:20s} | {statistics.median(seconds):8.2f} | {min(seconds):9.2f} | "
              + " | ".join(f"{'loaded' if found else '-':>9s}" for found in loaded) + f" | {slowest} |", flush=True)


if __name__ == "__main__":
    main()
