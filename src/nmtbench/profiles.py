"""params.yaml merged with profiles, and the workspace folders that run them.

A profile overrides params.yaml's blocks (apply_profile): merged in order, a later one winning, each naming the
blocks it gives whole. A profile runs in a workspace of its own, a DVC project beside the user's, so `make smoke`
never touches the outputs of the user's own experiment. The workspace behaves like the project: the same
.gitignore, and a Makefile with the pipeline's make targets (tools/pipeline.mk), which use the project's .venv.
A refresh rewrites only what nmtbench workspace wrote there and nobody changed since.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from nmtbench.config import parse_params
from nmtbench.files import read_yaml, write_bytes, write_text
from nmtbench.models.registry import model_config
from nmtbench.param_blocks import ConfigError

PIPELINE_TARGETS = Path("tools") / "pipeline.mk"
# what nmtbench workspace last wrote there: each file's sha256, so a refresh replaces only those files unchanged since
MANIFEST = ".nmtbench-workspace.json"
SETTINGS = "the command's settings"  # blocks a command merges after the profiles, as a conflict and a header name them


def merge(base: dict, override: dict) -> dict:
    """Deep-merge override onto base (dicts merge key by key; any other value replaces)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def apply_profile(base: dict, *profiles: dict, names: Sequence[str] = (), known: frozenset[str] | None = None) -> dict:
    """params.yaml with the profiles merged on in order, so a later one wins where two set the same key (your
    corpus, then the smoke sizes). The blocks a profile names in its list `replace` are taken from that profile
    whole instead of merged: a recipe's own grid of models (models: ...) rather than the defaults plus it.
    names: the files, params.yaml's first, which a conflict names. known: the models the project's own files name
    (over_models); None, without a project, takes no name for misspelt."""
    names = list(names) or ["params.yaml", *(f"profile {i}" for i in range(1, len(profiles) + 1))]
    merged, given_by = base, {}  # given_by: model (or model.encoder, .decoder) -> the file its family came from
    for name, profile in zip(names[1:], profiles):
        profile = dict(profile)
        replaced = profile.pop("replace", [])
        if not isinstance(replaced, list) or not set(replaced) <= set(merged):
            raise ConfigError(f"replace: expected a list of params blocks the profile gives whole, e.g. [models], "
                              f"got {replaced!r}")
        merged = {key: value for key, value in merged.items() if key not in replaced}
        if isinstance(profile.get("models"), dict):
            grid = merged["models"] if isinstance(merged.get("models"), dict) else None  # None: replaced
            profile["models"] = over_models(grid, profile["models"], given_by, names[0], name, known)
        merged = merge(merged, profile)
    return merged


def over_models(models: dict | None, blocks: dict, given_by: dict, first: str, name: str,
                known: frozenset[str] | None = None) -> dict:
    """The model blocks of profile `name` that apply to the models merged so far (None: the profile gives the grid
    whole). A block without a family sizes a model: one for a model there is none of (a profile before replaced
    the grid) sizes nothing and is left out, so the smoke sizes go with every recipe; but one for a name close to a
    model there, and not a model of the project's own files (known), is a misspelt name, refused. A block that gives
    a model, or a hybrid's half, another family conflicts with the file that gave the first: merged, the new family
    would be refused the keys of the old one that the first file set."""
    if models is None:
        given_by.update({f"{model}{half}": name for model, block in blocks.items() for half in families(block)})
        return blocks
    kept = {}
    for model, block in blocks.items():
        named, earlier = families(block), families(models.get(model))
        if isinstance(block, dict) and "" not in named and model not in models:
            typo = [] if known is None or model in known else difflib.get_close_matches(model, models, n=1, cutoff=0.8)
            if typo:
                raise ConfigError(f"models.{model}: {name} sizes a model the grid does not have; did you mean "
                                  f"{typo[0]}? (the grid: {', '.join(models)}); fix the name, or give the block a "
                                  "family to add a model")
            continue
        for half, family in named.items():  # the model's own family first, then its halves'
            key = f"{model}{half}"
            if earlier.get(half, family) != family:
                raise ConfigError(f"models.{key}: {name} makes it a {family}, {given_by.get(key, first)} a "
                                  f"{earlier[half]}; rename the model in one file, or replace the grid in {name} with "
                                  "`replace: [models]`")
            given_by[key] = name
        kept[model] = block
    return kept


def families(block: Any) -> dict[str, str]:
    """The families a model block names: its own under "", a hybrid's halves' under ".encoder" and ".decoder"."""
    if not isinstance(block, dict):
        return {}
    found = {"": block.get("family"), **{f".{half}": block[half].get("family") for half in ("encoder", "decoder")
                                        if isinstance(block.get(half), dict)}}
    return {half: family for half, family in found.items() if family is not None}


def read_profile(profile: Path) -> dict:
    """A profile's overrides, refused in one line when the file is missing or holds no params blocks."""
    if not profile.is_file():
        raise FileNotFoundError(f"{profile}: no such profile; see the profiles/ folder")
    overrides = read_yaml(profile) or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"{profile}: expected params blocks to override, such as `train:`, got a "
                          f"{type(overrides).__name__}; see profiles/smoke.yaml")
    return overrides


def merged_params(project: Path, profiles: list[Path], extra: Sequence[dict] = ()) -> dict:
    """project's params.yaml merged with the profiles, in order, then the extra blocks a command sets (nmtbench
    gpu timed-grid's --set), every block and model validated: a bad override fails here, before any stage runs."""
    merged = apply_profile(read_yaml(Path(project) / "params.yaml"), *(read_profile(Path(p)) for p in profiles),
                           *extra, names=["params.yaml", *map(str, profiles), *[SETTINGS] * len(extra)],
                           known=shipped_models(project))
    for name, block in parse_params(merged).models.items():
        model_config(name, block)
    return merged


def shipped_models(project: Path) -> frozenset[str]:
    """Every model the project's own params.yaml and profiles name: a size for one of them (smoke.yaml sizes the
    models of every recipe) is no misspelt name, whatever grid it meets."""
    names = set()
    for path in [Path(project) / "params.yaml", *sorted((Path(project) / "profiles").glob("*.yaml"))]:
        models = (read_yaml(path) or {}).get("models")
        names.update(models if isinstance(models, dict) else ())
    return frozenset(names)


def make_workspace(project: Path, target: Path, profiles: list[Path], force: bool = False,
                   extra: Sequence[dict] = (), with_dvc: bool = True) -> Path:
    """Create or refresh target with project's pipeline and params.yaml merged with the profiles, in order, then
    extra. A file there that nmtbench workspace did not write, or that was edited since, is refused, or with force
    replaced and kept as <file>.bak-<time>. without dvc (with_dvc False: nmtbench launch --without-dvc runs it),
    no git repository and no DVC project are made."""
    project, target = Path(os.path.abspath(project)), Path(target)
    if target.resolve() == project.resolve():  # copying dvc.yaml onto itself fails, and the params would be lost
        raise ConfigError(f"{target}: is the project itself; make the workspace another folder, e.g. "
                          "nmtbench workspace runs/mine --profile profiles/smoke.yaml")
    files = workspace_files(project, profiles, merged_params(project, profiles, extra), bool(extra))
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
    # a git repository too, so `dvc exp show` and `dvc exp run` work there
    if with_dvc and not (target / ".dvc").is_dir():
        git = ["git", "-c", "user.name=nmtbench", "-c", "user.email=nmtbench@localhost"]
        subprocess.run([*git, "init", "--quiet"], cwd=target, check=True)
        subprocess.run([sys.executable, "-m", "dvc", "init", "--quiet"], cwd=target, check=True)
        subprocess.run([sys.executable, "-m", "dvc", "config", "core.analytics", "false"], cwd=target, check=True)
        subprocess.run([*git, "add", "-A"], cwd=target, check=True)
        message = f"profile {' + '.join(Path(p).stem for p in profiles)}"
        subprocess.run([*git, "commit", "--quiet", "-m", message], cwd=target, check=True)
    return target


def workspace_files(project: Path, profiles: list[Path], merged: dict, settings: bool = False) -> dict[str, bytes]:
    """What nmtbench workspace writes, by path in the workspace: the pipeline, the plot templates and outside
    systems' translations it names, the project's .gitignore (W&B runs, models and the like are never committed
    there), the Makefile and the merged params."""
    files = {name: (project / name).read_bytes() for name in ("dvc.yaml", ".gitignore")}
    for folder in ("plots", "systems"):
        files.update({str(path.relative_to(project)): path.read_bytes()
                      for path in sorted((project / folder).rglob("*")) if path.is_file()})
    files["Makefile"] = makefile(project, profiles).encode()
    names = " + ".join([*(Path(p).name for p in profiles), *([SETTINGS] if settings else [])])
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
