"""Profiles: a folder holding the pipeline and params.yaml merged with one or more profiles' overrides.

A profile runs in a workspace of its own, a DVC project beside the user's, so `make smoke` never
touches the outputs of the user's own experiment. The workspace behaves like the project: the same
.gitignore, and a Makefile with the pipeline's make targets (tools/pipeline.mk), which use the project's .venv.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from nmtbench.config import ConfigError, apply_profile, parse_params, read_yaml
from nmtbench.models.registry import model_config

PIPELINE_TARGETS = Path("tools") / "pipeline.mk"


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


def make_workspace(project: Path, target: Path, profiles: list[Path]) -> Path:
    """Create or refresh target with project's pipeline and params.yaml merged with the profiles, in order."""
    project, target = Path(project), Path(target)
    merged = merged_params(project, profiles)
    target.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", ".gitignore"):  # .gitignore: W&B runs, models and the like are never committed there
        shutil.copyfile(project / name, target / name)
    for folder in ("plots", "systems"):  # what dvc.yaml names: the plot templates, outside systems' translations
        shutil.copytree(project / folder, target / folder, dirs_exist_ok=True)
    (target / "Makefile").write_text(makefile(project, target))
    names = " + ".join(Path(p).name for p in profiles)
    header = f"# generated from params.yaml + {names}; edit those, not this file\n"
    (target / "params.yaml").write_text(header + yaml.safe_dump(merged, sort_keys=False))
    if not (target / ".dvc").is_dir():  # a git repository too, so `dvc exp show` and `dvc exp run` work there
        git = ["git", "-c", "user.name=nmtbench", "-c", "user.email=nmtbench@localhost"]
        subprocess.run([*git, "init", "--quiet"], cwd=target, check=True)
        subprocess.run([sys.executable, "-m", "dvc", "init", "--quiet"], cwd=target, check=True)
        subprocess.run([sys.executable, "-m", "dvc", "config", "core.analytics", "false"], cwd=target, check=True)
        subprocess.run([*git, "add", "-A"], cwd=target, check=True)
        message = f"profile {' + '.join(Path(p).stem for p in profiles)}"
        subprocess.run([*git, "commit", "--quiet", "-m", message], cwd=target, check=True)
    return target


def makefile(project: Path, target: Path) -> str:
    """The workspace's Makefile: the project's pipeline targets, included by a relative path, so a checkout
    moved together with its workspaces keeps working."""
    include = os.path.relpath((project / PIPELINE_TARGETS).resolve(), target.resolve())
    return ("# Written by nmtbench workspace: the project's pipeline targets (make help lists them), run in this\n"
            "# folder with the project's .venv.\n"
            f"include {include}\n")
