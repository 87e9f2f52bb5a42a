"""Profiles: a folder holding the pipeline and params.yaml merged with a profile's overrides.

A profile runs in a workspace of its own, a DVC project beside the user's, so `make smoke` never
touches the outputs of the user's own experiment.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from nmtbench.config import ConfigError, apply_profile, parse_params, read_yaml


def make_workspace(project: Path, target: Path, profile: Path) -> Path:
    """Create or refresh target with project's dvc.yaml and params.yaml merged with profile."""
    project, target = Path(project), Path(target)
    if not profile.is_file():
        raise FileNotFoundError(f"{profile}: no such profile; see the profiles/ folder")
    base = read_yaml(project / "params.yaml")
    overrides = read_yaml(profile) or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"{profile}: expected params blocks to override, such as `train:`, got a "
                          f"{type(overrides).__name__}; see profiles/smoke.yaml")
    merged = apply_profile(base, overrides)
    parse_params(merged)  # a bad override fails here, before any stage runs
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(project / "dvc.yaml", target / "dvc.yaml")
    for folder in ("plots", "systems"):  # what dvc.yaml names: the plot templates, outside systems' translations
        shutil.copytree(project / folder, target / folder, dirs_exist_ok=True)
    header = f"# generated from params.yaml + {profile.name}; edit those, not this file\n"
    (target / "params.yaml").write_text(header + yaml.safe_dump(merged, sort_keys=False))
    if not (target / ".dvc").is_dir():  # a git repository too, so `dvc exp show` and `dvc exp run` work there
        git = ["git", "-c", "user.name=nmtbench", "-c", "user.email=nmtbench@localhost"]
        subprocess.run([*git, "init", "--quiet"], cwd=target, check=True)
        subprocess.run([sys.executable, "-m", "dvc", "init", "--quiet"], cwd=target, check=True)
        subprocess.run([sys.executable, "-m", "dvc", "config", "core.analytics", "false"], cwd=target, check=True)
        subprocess.run([*git, "add", "-A"], cwd=target, check=True)
        subprocess.run([*git, "commit", "--quiet", "-m", f"profile {profile.stem}"], cwd=target, check=True)
    return target
