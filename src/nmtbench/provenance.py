"""What produced a result: the code's git commit, the package versions, the machine, and the stage's wall time.

Every stage that writes figures stamps them with `stamp(started)` (train.json, eval.json, comparison.json,
beam_sweep.json and the W&B runs' config), so two results can be compared knowing what ran them.
The commit is that of the checkout holding this package's source (an editable install, as `make setup`
makes), not of the folder a stage runs in: a workspace under runs/ is a git repository of its own, but
its code is the project's. Where the code travels to another machine (a GPU machine without network), the
file named by NMTBENCH_COMMIT_FILE holds the checkout's state as git_state gave it before it left
(tools/gpu_bundle.py writes it), and stands in for git: when the variable is set it wins, since a copied tree
may carry a .git of an older commit (the first GPU run's did, and recorded that commit as "with changes").
"""
from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

SOURCE = Path(__file__).resolve().parent
# the distributions whose versions can move a score or a speed; Python's own version is recorded beside them
PACKAGES = ("nmtbench", "torch", "lightning", "sacrebleu", "sentencepiece", "datasets", "numpy", "dvc", "wandb")
# written by the pipeline itself while it runs, so a change there says nothing about the code or the params
PIPELINE_RECORDS = ":(top,exclude,glob)**/dvc.lock"
# the x86 instruction sets that decide which of torch's CPU kernels run (fp32 and bf16 matrix products)
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
# the environment variable naming the recorded state of code that runs outside its checkout
COMMIT_FILE = "NMTBENCH_COMMIT_FILE"


def stamp(started: float) -> dict:
    """The provenance of a stage that began at time.perf_counter() == started and ends now."""
    return {**describe(), "wall_seconds": round(time.perf_counter() - started, 2),
            "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def describe() -> dict:
    """The provenance known before a stage ends: code, software and machine (what a W&B run starts with)."""
    return {"git": git_state(SOURCE), "python": platform.python_version(), "packages": versions(), "device": device()}


def git_state(folder: Path) -> dict:
    """{"commit": full hash, "dirty": tracked files changed since it} of the git checkout holding folder.

    Where NMTBENCH_COMMIT_FILE is set, the state recorded there (recorded_state) instead; outside a checkout, in a
    repository without commits, or without git, both None. Like `git describe --dirty`, untracked files do not
    count; neither does dvc.lock, which `dvc repro` itself rewrites.
    """
    if os.environ.get(COMMIT_FILE):
        return recorded_state()
    commit = _git(folder, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    changes = _git(folder, "status", "--porcelain", "--untracked-files=no", "--", ":/", PIPELINE_RECORDS)
    return {"commit": commit, "dirty": None if changes is None else changes != ""}


def recorded_state() -> dict:
    """git_state as written to the file NMTBENCH_COMMIT_FILE names before the code left its checkout; both
    None when the variable is unset. A file named but unreadable is refused: results must not lose their commit."""
    path = os.environ.get(COMMIT_FILE)
    if not path:
        return {"commit": None, "dirty": None}
    try:
        found = json.loads(Path(path).read_text())
        if not re.fullmatch(r"[0-9a-f]{40}", found["commit"]) or found["dirty"] not in (True, False, None):
            raise ValueError(f"expected a full commit hash and dirty true, false or null, got {found}")
        return {"commit": found["commit"], "dirty": found["dirty"]}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{COMMIT_FILE}={path}: not a record of the commit ({error}); write it in the checkout "
                         "(make gpu-commit) or unset the variable") from None


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):  # no git on this machine, or a hung file system
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """The installed version of each distribution (None when it is not installed)."""
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def device() -> dict:
    """The CPU model, its cores available to this process, memory, and in a stage that runs torch the GPUs torch
    sees and torch's thread count. A stage that never imports torch (compare) records those as None: importing it
    to ask would cost the stage seconds, for a runtime it does not use."""
    torch = sys.modules.get("torch")
    gpus = None if torch is None else [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu_model(), "cpu_features": cpu_features(), "cores": cores, "memory_gib": memory_gib(),
            "gpus": gpus, "torch_threads": None if torch is None else torch.get_num_threads(),
            "platform": platform.platform()}


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """The instruction sets among CPU_FEATURES that the CPU has: two CPUs of one model name can differ in them
    (an AMD EPYC with or without AVX-512), and with them torch's kernels, its speed and, for some models, its fp32
    arithmetic to the last bit. Empty where /proc/cpuinfo does not list them."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return []
    flags = next((set(value.split()) for key, _, value in (line.partition(":") for line in text.splitlines())
                  if key.strip() == "flags"), set())
    return [feature for feature in CPU_FEATURES if feature in flags]


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name: Linux names it in /proc/cpuinfo; elsewhere platform's less precise name."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, ValueError, OSError):  # not a POSIX system that reports it
        return None


def version_line() -> str:
    """`nmtbench --version`: the package version and the commit of the code."""
    return f"nmtbench {versions(['nmtbench'])['nmtbench'] or 'unknown'} ({code_text(git_state(SOURCE))})"


def code_text(git: dict) -> str:
    if git["commit"] is None:
        return "commit unknown (not in a git checkout with a commit)"
    return f"commit {git['commit'][:10]}" + {True: ", with uncommitted changes", False: "", None: ""}[git["dirty"]]
