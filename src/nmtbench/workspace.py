"""Profiles: a folder holding the pipeline and params.yaml merged with one or more profiles' overrides.

A profile runs in a workspace of its own, a DVC project beside the user's, so `make smoke` never
touches the outputs of the user's own experiment. The workspace behaves like the project: the same
.gitignore, and a Makefile with the pipeline's make targets (tools/pipeline.mk), which use the project's .venv.
A refresh rewrites only what nmtbench workspace wrote there and nobody changed since.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from nmtbench.config import ConfigError, apply_profile, parse_params, read_yaml
from nmtbench.files import write_bytes, write_text
from nmtbench.models.registry import model_config

PIPELINE_TARGETS = Path("tools") / "pipeline.mk"
# what nmtbench workspace last wrote there: each file's sha256, so a refresh replaces only those files unchanged since
MANIFEST = ".nmtbench-workspace.json"


def read_profile(profile: Path) -> dict:
    """A profile's overrides, refused in one line when the file is missing or holds no params blocks."""
    if not profile.is_file():
        raise FileNotFoundError(f"{profile}: no such profile; see the profiles/ folder")
    overrides = read_yaml(profile) or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"{profile}: expected params blocks to override, such as `train:`, got a "
                          f"{type(overrides).__name__}; see profiles/smoke.yaml")
    return overrides


def merged_params(project: Path, profiles: list[Path]) -> dict:
    """project's params.yaml merged with the profiles, in order, every block and model validated: a bad override
    fails here, before any stage runs."""
    merged = apply_profile(read_yaml(Path(project) / "params.yaml"), *(read_profile(Path(p)) for p in profiles),
                           names=["params.yaml", *map(str, profiles)])
    for name, block in parse_params(merged).models.items():
        model_config(name, block)
    return merged


def make_workspace(project: Path, target: Path, profiles: list[Path], force: bool = False) -> Path:
    """Create or refresh target with project's pipeline and params.yaml merged with the profiles, in order. A file
    there that nmtbench workspace did not write, or that was edited since, is refused, or with force replaced and
    kept as <file>.bak-<time>."""
    project, target = Path(os.path.abspath(project)), Path(target)
    if target.resolve() == project.resolve():  # copying dvc.yaml onto itself fails, and the params would be lost
        raise ConfigError(f"{target}: is the project itself; make the workspace another folder, e.g. "
                          "nmtbench workspace runs/mine --profile profiles/smoke.yaml")
    files = workspace_files(project, profiles, merged_params(project, profiles))
    others = not_ours(target, files)
    if others and not force:
        raise ConfigError(f"{target}: {', '.join(others)} not written by nmtbench workspace, or edited since; keep "
                          "your changes in a profile, or rerun with --force to replace them, each kept as "
                          "<file>.bak-<time>")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in others:
        kept = target / f"{name}.bak-{stamp}"
        os.replace(target / name, kept)
        print(f"nmtbench workspace: replacing {target / name}; the old one is kept as {kept}", file=sys.stderr)
    for name, data in files.items():
        write_bytes(target / name, data)
    write_text(target / MANIFEST, json.dumps({name: digest(data) for name, data in files.items()}, indent=1) + "\n")
    if not (target / ".dvc").is_dir():  # a git repository too, so `dvc exp show` and `dvc exp run` work there
        git = ["git", "-c", "user.name=nmtbench", "-c", "user.email=nmtbench@localhost"]
        subprocess.run([*git, "init", "--quiet"], cwd=target, check=True)
        subprocess.run([sys.executable, "-m", "dvc", "init", "--quiet"], cwd=target, check=True)
        subprocess.run([sys.executable, "-m", "dvc", "config", "core.analytics", "false"], cwd=target, check=True)
        subprocess.run([*git, "add", "-A"], cwd=target, check=True)
        message = f"profile {' + '.join(Path(p).stem for p in profiles)}"
        subprocess.run([*git, "commit", "--quiet", "-m", message], cwd=target, check=True)
    return target


def workspace_files(project: Path, profiles: list[Path], merged: dict) -> dict[str, bytes]:
    """What nmtbench workspace writes, by path in the workspace: the pipeline, the plot templates and outside
    systems' translations it names, the project's .gitignore (W&B runs, models and the like are never committed
    there), the Makefile and the merged params."""
    files = {name: (project / name).read_bytes() for name in ("dvc.yaml", ".gitignore")}
    for folder in ("plots", "systems"):
        files.update({str(path.relative_to(project)): path.read_bytes()
                      for path in sorted((project / folder).rglob("*")) if path.is_file()})
    files["Makefile"] = makefile(project, profiles).encode()
    names = " + ".join(Path(p).name for p in profiles)
    header = f"# generated from params.yaml + {names}; edit those, not this file\n"
    files["params.yaml"] = (header + yaml.dump(merged, Dumper=PlainDumper, sort_keys=False)).encode()
    return files


class PlainDumper(yaml.SafeDumper):
    """Every block written out in full: the merge shares objects (one tuning space for every family), and an
    anchor and its aliases would make an edit of one family's block edit them all."""

    def ignore_aliases(self, data) -> bool:
        return True


def not_ours(target: Path, files: dict[str, bytes]) -> list[str]:
    """The files of target that this run would change and that are not as nmtbench workspace last wrote them
    (its manifest says): the user's own, or hand-edited."""
    manifest = target / MANIFEST
    written = json.loads(manifest.read_text()) if manifest.is_file() else {}
    return [name for name, data in files.items() if (target / name).exists()
            and digest((target / name).read_bytes()) not in (digest(data), written.get(name))]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def makefile(project: Path, profiles: list[Path]) -> str:
    """The workspace's Makefile: the project's pipeline targets, included by the project's absolute path, so the
    workspace may be copied or moved anywhere; where the project itself moved, one line says how to name it."""
    rerun = " ".join(f"--profile {shown(project, Path(p))}" for p in profiles)
    return ("# Written by nmtbench workspace: the project's pipeline targets (make help lists them), run in this\n"
            "# folder with the project's .venv. A project moved since: make NMTBENCH_PROJECT=<its folder>, or rerun\n"
            "# nmtbench workspace from it.\n"
            f"NMTBENCH_PROJECT ?= {project}\n"
            f"ifeq ($(wildcard $(NMTBENCH_PROJECT)/{PIPELINE_TARGETS}),)\n"
            "$(error no nmtbench project at $(NMTBENCH_PROJECT), which this workspace runs with; from the project's "
            f"folder run .venv/bin/nmtbench workspace $(CURDIR) {rerun}, or name it: make NMTBENCH_PROJECT=<folder>)\n"
            "endif\n"
            f"include $(NMTBENCH_PROJECT)/{PIPELINE_TARGETS}\n")


def shown(project: Path, profile: Path) -> str:
    """profile as the rerun from a moved project names it: relative to the project when inside it."""
    profile = Path(os.path.abspath(profile))
    return str(profile.relative_to(project)) if profile.is_relative_to(project) else str(profile)
