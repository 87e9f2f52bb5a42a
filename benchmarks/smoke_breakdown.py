"""Where `make smoke`'s time goes: each stage kind's processes, their training and decoding, and what DVC takes
around them.

    python benchmarks/smoke_breakdown.py [--workspace runs/bench-smoke] [--checkout DIR] [--json out.json]

It runs the whole smoke pipeline from nothing as `make smoke` does (nmtbench workspace with profiles/smoke.yaml,
then nmtbench check and dvc repro there, under nmtbench warm where the checkout has it) in a workspace of its own
(deleted first; default runs/bench-smoke, so runs/smoke is left alone), timed end to end, with NMTBENCH_STAGE_TIMES
set so that every `nmtbench` process records its seconds from process start to exit (nmtbench/stage_times.py).
--checkout runs another checkout's code, params and profiles with this environment's packages (a git worktree of an
earlier commit: before and after, side by side; code from before stage_times.py records no stage, so only its wall
time shows). It then reads each run's train.json (training seconds) and eval.json (decoding seconds) and prints,
per stage kind, the processes, their seconds, the training or decoding inside them and the rest (imports, loading,
writing), and the time outside every nmtbench process: DVC's and the workspace's set-up (hashing, locks, the lock
file, the checks between stages). Run it on a quiet machine: every figure is this machine's, and its first line
names the CPU, the cores and the load.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from nmtbench.provenance import cpu_model
from nmtbench.stage_times import ENV
from nmtbench.tables import Table

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = "DVC and the rest"


def breakdown(lines: list[dict], work: dict[str, float], wall: float) -> list[dict]:
    """One row a stage kind: processes, their seconds, the work inside them (work: stage kind -> seconds of
    training or decoding) and the rest; then every nmtbench process together, the time outside them (wall less
    their seconds) and the whole wall. Shares are of the wall."""
    kinds = defaultdict(lambda: {"processes": 0, "warm": 0, "seconds": 0.0})
    lines = [line for line in lines if line["command"] != "warm"]  # it holds dvc repro: its time is the wall's
    for line in lines:
        kind = kinds[line["command"]]
        kind["processes"] += 1
        kind["warm"] += bool(line.get("warm"))  # a copy forked from nmtbench warm's interpreter
        kind["seconds"] += line["seconds"] or 0.0
    rows = [{"kind": name, **found, "work": work.get(name, 0.0), "rest": found["seconds"] - work.get(name, 0.0)}
            for name, found in sorted(kinds.items(), key=lambda item: -item[1]["seconds"])]
    inside = sum(row["seconds"] for row in rows)
    done = sum(row["work"] for row in rows)
    rows += [{"kind": "every nmtbench process", "processes": len(lines), "warm": sum(row["warm"] for row in rows),
              "seconds": inside, "work": done, "rest": inside - done},
             {"kind": OUTSIDE, "processes": None, "warm": None, "seconds": wall - inside, "work": 0.0,
              "rest": wall - inside},
             {"kind": "the smoke pipeline", "processes": None, "warm": None, "seconds": wall, "work": done,
              "rest": wall - done}]
    for row in rows:
        row["share"] = row["seconds"] / wall if wall else None
    return rows


def work_seconds(workspace: Path) -> dict[str, float]:
    """The training seconds of every train.json and the decoding seconds of every eval.json in the workspace."""
    work = {"train": 0.0, "evaluate": 0.0}
    for found in sorted((workspace / "metrics").glob("*/seed*/train.json")):
        work["train"] += json.loads(found.read_text()).get("train_seconds", 0.0)
    for found in sorted((workspace / "metrics").glob("*/seed*/eval.json")):
        scores = json.loads(found.read_text())
        work["evaluate"] += sum(split.get("decode_seconds", 0.0) for name, split in scores.items()
                                if name != "provenance")
    return work


def table(rows: list[dict]) -> str:
    def figure(value, spec):
        return "-" if value is None else format(value, spec)
    return Table(["stage kind", "processes", "of them warm copies", "seconds", "training or decoding", "the rest",
                  "share of the wall"],
                 [[row["kind"], figure(row["processes"], "d"), figure(row["warm"], "d"), f"{row['seconds']:.1f}",
                   f"{row['work']:.1f}", f"{row['rest']:.1f}", figure(row["share"], ".1%")] for row in rows],
                 "lrrrrrr").text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, default=Path("runs/bench-smoke"))
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose code, params and profiles "
                        "run (default: this one)")
    parser.add_argument("--json", type=Path, help="also write the rows there")
    args = parser.parse_args()
    print(f"# {cpu_model()}, {len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.2f}, "
          f"Python {platform.python_version()}, the code of {args.checkout.resolve()}")
    checkout = args.checkout.resolve()
    workspace = (checkout / args.workspace).resolve()
    shutil.rmtree(workspace, ignore_errors=True)
    bin_dir = Path(sys.executable).parent  # this environment's nmtbench and dvc, running the checkout's code
    with tempfile.TemporaryDirectory() as scratch:
        times = Path(scratch) / "stage_times.jsonl"
        env = {**os.environ, ENV: str(times), "PYTHONPATH": str(checkout / "src"),
               "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        warm = ["nmtbench", "warm", "--"] if (checkout / "src/nmtbench/warm.py").is_file() else []  # make repro's
        steps = [(checkout, ["nmtbench", "workspace", str(workspace), "--force", "--profile", "profiles/smoke.yaml"]),
                 (workspace, ["nmtbench", "check"]), (workspace, [*warm, "dvc", "repro"])]
        started = time.perf_counter()
        for folder, command in steps:
            subprocess.run(command, cwd=folder, check=True, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        lines = [json.loads(line) for line in times.read_text().splitlines()] if times.is_file() else []
    rows = breakdown(lines, work_seconds(workspace), wall)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"checkout": str(checkout), "steps": [command for _, command in steps],
                                         "wall_seconds": wall, "rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
