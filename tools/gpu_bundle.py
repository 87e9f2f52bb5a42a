"""The carried folder (make gpu-bundle): what tools/gpu_check.sh needs on a GPU machine without network.

That machine has Python 3.12 with its own torch, lightning and most of the scientific stack
(tools/gpu_machine_packages.txt), but not the packages below. The folder holds
  wheels/        cp312 manylinux wheels of what the stages import and the machine lacks, with their dependencies
                 the machine lacks, pure-Python wheels of dependencies it has (small; pip takes one only where a
                 carried package needs a newer version than the machine's), and the project's own wheel
  requirements.txt  the packages tools/gpu_check.sh installs from wheels/
  corpora/<name>/tokenized    the tokenized corpora the runs train on: default, this checkout's data/tokenized
                              (make gpu-bundle runs dvc repro tokenize first); published, the papers' setting
                              (profiles/published.yaml), made by the prepare and tokenize stages' commands
  corpora/<name>/params.json  the data and tokenize blocks each was made with: the runs refuse other ones
  MANIFEST.txt      every file with its size, the total, and what was left out and why
  COMMIT            the checkout's commit and whether tracked files changed since, which every result there records
                    (there is no .git on that machine: nmtbench.provenance reads it through NMTBENCH_COMMIT_FILE)
The wheels are pinned to the versions of this checkout's .venv, the ones the tests pass with here.
    python tools/gpu_bundle.py [--out .gpu-bundle]
    python tools/gpu_bundle.py --commit-only    COMMIT alone, before each call: the code travels with the working
                                                tree, so a commit since the folder was built needs no other change
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib
import yaml

from nmtbench.files import read_yaml
from nmtbench.profiles import apply_profile
from nmtbench.provenance import code_text, git_state

ROOT = Path(__file__).resolve().parent.parent
MACHINE_LIST = ROOT / "tools" / "gpu_machine_packages.txt"

# pyproject's dependencies the runs on the GPU machine import, which that machine lacks
CARRIED = ("pydantic", "sacremoses", "datasets", "optuna")
# the rest of what the machine lacks, and why the runs do without it (sizes measured 2026-11-26 as cp312 wheels,
# with the dependencies the machine lacks): the folder, the working tree and all travel in 64 MiB
LEFT_OUT = {
    "dvc": "18.4 MiB; needs antlr4-python3-runtime 4.9, which PyPI has only as source, and git: the stages' "
           "commands run directly (nmtbench launch --without-dvc), writing the files dvc repro writes",
    "wandb": "23.2 MiB: runs log with W&B disabled (WANDB_MODE=disabled)",
    "wandb-workspaces": "W&B reports (nmtbench dashboard), not run there",
    "submitit": "nmtbench launch's local and SLURM executors: without it the launcher runs the stages as processes "
                "of its own (launch.executor: process)",
    "psycopg": "PostgreSQL studies of nmtbench tune, not run there",
}
# corpora besides the default one: name -> the profile whose data and tokenize blocks make it
PROFILE_CORPORA = {"published": ROOT / "profiles" / "published.yaml"}
# where pip looks for cp312 wheels the machine can install (its glibc is 2.28 or later)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def normalized(name: str) -> str:
    """A distribution's name as pip compares them: case and runs of -_. do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def machine_packages(path: Path = MACHINE_LIST) -> set[str]:
    """The names of the GPU machine's packages, from the list kept in tools/ (versions dropped)."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return {normalized(re.split(r"[=<>!~ ]", line)[0]) for line in lines if line and not line.startswith("#")}


def requirement_name(requirement: str) -> str:
    return normalized(re.split(r"[\[=<>!~; ]", requirement, maxsplit=1)[0])


def project_requirements(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """pyproject.toml's dependencies by normalized name, each with its pin as written."""
    found = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return {requirement_name(requirement): requirement for requirement in found}


def unplaced(requirements: dict[str, str], machine: set[str]) -> list[str]:
    """Dependencies neither on the machine, nor carried, nor left out with a reason: a new one must be placed."""
    decided = machine | set(CARRIED) | set(LEFT_OUT)
    return sorted(name for name in requirements if name not in decided)


def wheel_name(wheel: Path) -> str:
    return normalized(wheel.name.split("-")[0])


def pure_python(wheel: Path) -> bool:
    return wheel.name.endswith("-none-any.whl")


def chosen_wheels(wheels: list[Path], machine: set[str]) -> list[Path]:
    """Of the downloaded closure: what the machine lacks, and the pure-Python wheels of what it has."""
    return sorted((w for w in wheels if wheel_name(w) not in machine or pure_python(w)), key=lambda w: w.name)


def venv_pins() -> list[str]:
    """name==version of every package of the running environment (this checkout's .venv), torch's family left
    out: the machine keeps its own torch, and nothing carried depends on it."""
    frozen = subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze", "--exclude-editable"],
                            capture_output=True, text=True, check=True).stdout.split()
    return [line for line in frozen if not requirement_name(line).startswith(("torch", "nvidia-", "triton"))]


def download(requirements: list[str], folder: Path) -> list[Path]:
    """cp312 manylinux wheels of requirements and all their dependencies, at this .venv's versions."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as pins:
        pins.write("\n".join(venv_pins()) + "\n")
        pins.flush()
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                   "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
                   *(f"--platform={p}" for p in PLATFORMS), "--platform=any", "-c", pins.name,
                   "-d", str(folder), *requirements]
        subprocess.run(command, check=True)
    return sorted(folder.glob("*.whl"))


def project_wheel(folder: Path) -> Path:
    """The project's own wheel (no dependencies: the machine's torch must stay as it is), built from a copy of
    what it packages, so setuptools' build/ folder never lands in the checkout."""
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, Path(scratch) / name)
        shutil.copytree(ROOT / "src", Path(scratch) / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(folder), scratch],
                       check=True)
    return next(folder.glob("nmtbench-*.whl"))


def data_blocks(params: dict) -> dict:
    """The params blocks a tokenized corpus depends on (dvc.yaml: prepare's data, tokenize's tokenize)."""
    return {"data": params.get("data"), "tokenize": params.get("tokenize")}


def tokenized_with(profile: Path, folder: Path) -> Path:
    """The corpus of params.yaml merged with profile, made in folder by the commands of dvc.yaml's prepare and
    tokenize stages (the raw files from NMTBENCH_DATA_MIRROR, as make sets it)."""
    params = apply_profile(read_yaml(ROOT / "params.yaml"), read_yaml(profile))
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for stage in ("prepare", "tokenize"):
        subprocess.run([sys.executable, "-m", "nmtbench", stage], cwd=folder, check=True,
                       env={**os.environ, "WANDB_MODE": "disabled"})
    return folder / "data" / "tokenized"


def add_corpus(out: Path, name: str, tokenized: Path, params: dict) -> None:
    shutil.copytree(tokenized, out / "corpora" / name / "tokenized")
    (out / "corpora" / name / "params.json").write_text(json.dumps(data_blocks(params), indent=1) + "\n")


def manifest(out: Path, left_out: dict[str, str]) -> str:
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != "MANIFEST.txt")
    total = sum(p.stat().st_size for p in files)
    lines = [f"{p.stat().st_size:>12,}  {p.relative_to(out)}" for p in files]
    lines += [f"{total:>12,}  in all ({total / 2**20:.1f} MiB; the working tree travels beside it, 64 MiB together)",
              "", "Left out (pyproject.toml's dependencies the GPU machine lacks):"]
    lines += [f"  {name}: {why}" for name, why in left_out.items()]
    return "\n".join(lines) + "\n"


def write_commit(out: Path) -> dict:
    """out/COMMIT: the checkout's git_state, refused outside a checkout with a commit (results must name one)."""
    state = git_state(ROOT)
    if state["commit"] is None:
        sys.exit(f"gpu_bundle: {ROOT} is not a git checkout with a commit; build the carried folder from one")
    out.mkdir(parents=True, exist_ok=True)
    (out / "COMMIT").write_text(json.dumps(state) + "\n")
    return state


def build(out: Path, tokenized: Path = ROOT / "data" / "tokenized") -> Path:
    requirements = project_requirements()
    machine = machine_packages()
    if missing := unplaced(requirements, machine):
        sys.exit(f"gpu_bundle: {', '.join(missing)}: neither on the GPU machine's list nor carried nor left out; "
                 "add each to CARRIED or LEFT_OUT in tools/gpu_bundle.py")
    if not (tokenized / "vocab.json").is_file():
        sys.exit(f"gpu_bundle: {tokenized} is missing or incomplete; run `dvc repro tokenize` first")
    shutil.rmtree(out, ignore_errors=True)
    (out / "wheels").mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        carried = [requirements[name] for name in CARRIED]
        for wheel in chosen_wheels(download(carried, Path(scratch)), machine):
            shutil.copy2(wheel, out / "wheels" / wheel.name)
        project_wheel(out / "wheels")
    (out / "requirements.txt").write_text("\n".join(carried) + "\n")
    add_corpus(out, "default", tokenized, read_yaml(ROOT / "params.yaml"))
    for name, profile in PROFILE_CORPORA.items():
        with tempfile.TemporaryDirectory() as scratch:
            add_corpus(out, name, tokenized_with(profile, Path(scratch)),
                       apply_profile(read_yaml(ROOT / "params.yaml"), read_yaml(profile)))
    write_commit(out)
    (out / "MANIFEST.txt").write_text(manifest(out, LEFT_OUT))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu-bundle", help="the folder to (re)write")
    parser.add_argument("--commit-only", action="store_true", help="rewrite only its COMMIT")
    args = parser.parse_args()
    if args.commit_only:
        state = write_commit(args.out)
        print(f"{args.out / 'COMMIT'}: {code_text(state)}")
        return
    out = build(args.out)
    print((out / "MANIFEST.txt").read_text().split("\n\n")[0].splitlines()[-1].strip())


if __name__ == "__main__":
    main()
