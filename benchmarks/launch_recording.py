"""Concurrent stages recorded two ways, in a scratch DVC project of N independent stages after one shared one:

    python benchmarks/launch_recording.py [--stages 14] [--seconds 5] [--retries 3] [--work-dir runs/launch-rec]

  repro    N `dvc repro --single-item work@<i>` processes started at once, each retried up to --retries times
           when it fails (DVC's documented way to run independent stages in parallel)
  launch   `nmtbench launch --jobs N`: each stage's command in a submitit job, recorded in dvc.lock by the
           launcher one stage at a time (what nmtbench launch does)

Each stage appends a line to runs/<i> every time its command starts (not a DVC output), so the table counts how
often commands ran; then it says whether `dvc status` is clean, and the wall time. A stage's command is
`sleep --seconds`, so the figures are DVC's and the launcher's own costs, not training's.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
LOCK_ERROR = "Unable to acquire lock"


def project(folder: Path, stages: int, seconds: float) -> None:
    """A git and DVC project with the shared stage done and committed, and N stages to run."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    items = ", ".join(f"s{i:02d}" for i in range(stages))
    (folder / "dvc.yaml").write_text(f"""stages:
  data:
    cmd: mkdir -p data && echo shared > data/x
    outs: [data]
  work:
    matrix:
      item: [{items}]
    cmd: mkdir -p runs out && echo run >> runs/${{item.item}} && sleep {seconds} && echo done > out/${{item.item}}
    deps: [data]
    params: [seeds]
    outs:
      - out/${{item.item}}
""")
    shutil.copyfile(ROOT / "params.yaml", folder / "params.yaml")
    for command in (["git", "init", "-q"], ["dvc", "init", "-q"], ["dvc", "config", "core.analytics", "false"],
                    ["dvc", "repro", "-q", "data"]):
        subprocess.run(command, cwd=folder, env=ENV, check=True, capture_output=True)


def repro(folder: Path, stages: int, retries: int) -> dict:
    """Every stage as its own `dvc repro --single-item`, all at once, each retried on failure."""
    def one(name: str) -> tuple[int, int]:
        lock_errors = 0
        for _ in range(retries + 1):
            done = subprocess.run(["dvc", "repro", "--single-item", name], cwd=folder, env=ENV,
                                  capture_output=True, text=True)
            if done.returncode == 0:
                return 0, lock_errors
            lock_errors += LOCK_ERROR in done.stdout + done.stderr
        return 1, lock_errors

    with ThreadPoolExecutor(stages) as pool:
        outcomes = list(pool.map(one, [f"work@s{i:02d}" for i in range(stages)]))
    return {"failed after retries": sum(failed for failed, _ in outcomes),
            "lock errors": sum(errors for _, errors in outcomes)}


def launch(folder: Path, stages: int, retries: int) -> dict:
    done = subprocess.run([sys.executable, "-m", "nmtbench", "launch", "--jobs", str(stages)], cwd=folder,
                          env=ENV, capture_output=True, text=True)
    output = done.stdout + done.stderr
    return {"failed after retries": output.count("FAILED: "), "lock errors": output.count(LOCK_ERROR)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=14)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--retries", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=ROOT / "runs/launch-recording")
    args = parser.parse_args()
    print("| way | stages | lock errors | failed after retries | commands run | dvc status clean | wall s |")
    print("|:---|---:|---:|---:|---:|:---|---:|")
    for name, way in (("repro", repro), ("launch", launch)):
        folder = args.work_dir / name
        project(folder, args.stages, args.seconds)
        start = time.monotonic()
        found = way(folder, args.stages, args.retries)
        wall = time.monotonic() - start
        runs = sum(len(path.read_text().splitlines()) for path in (folder / "runs").glob("*"))
        status = subprocess.run(["dvc", "status"], cwd=folder, env=ENV, capture_output=True, text=True).stdout
        clean = "Data and pipelines are up to date." in status
        print(f"| {name} | {args.stages} | {found['lock errors']} | {found['failed after retries']} | {runs} | "
              f"{'yes' if clean else 'no'} | {wall:.0f} |")


if __name__ == "__main__":
    main()
