"""dvc.yaml read without dvc, for `nmtbench launch --without-dvc`: a machine that lacks dvc (a lent GPU machine, a
cluster node) runs the same stage commands, writing the same files. Each stage of dvc.yaml is expanded over
params.yaml as dvc expands it (`matrix:`, `${item.*}`, `${block.key}`); a stage waits for the stages whose outputs
its deps lie in or hold.

Without dvc nothing knows whether an output that exists is current (no hashes, no dvc.lock): a stage runs when one
of its outputs is missing, or when a stage it waits for ran in this launch (or in one where this stage then failed).
Before it runs, its outputs but the persistent ones are moved aside, as dvc deletes them, so a killed training
resumes; with no cache to bring them back, they are deleted once the stage has succeeded, and put back if it fails."""
from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from itertools import product
from pathlib import Path

from nmtbench.files import read_yaml, remove, temp_prefix, write_text
from nmtbench.param_blocks import ConfigError

REFERENCE = re.compile(r"\$\{\s*([\w.-]+)\s*\}")
# the stages whose old outputs were put back after they failed on the new outputs of a stage they wait for: out of
# date, though every output is there (in the launcher's folder, scheduler.FOLDER)
STALE = Path("launch") / "stale-stages"


@dataclass(frozen=True)
class Stage:
    name: str  # dvc.yaml's address, e.g. train@transformer-42
    cmd: str
    needs: frozenset[str]  # the stages of the plan it waits for


@dataclass(frozen=True)
class Expanded:
    name: str
    cmd: str
    deps: tuple[str, ...]
    outs: tuple[str, ...]
    persistent: tuple[str, ...]  # the outs dvc keeps when the stage reruns


def expand(dvc_yaml: dict, params: dict) -> list[Expanded]:
    """Every stage of dvc_yaml, a matrix stage once per combination of its values (named as dvc names them:
    train@gru-42), in dvc.yaml's order."""
    found = []
    for name, block in (dvc_yaml.get("stages") or {}).items():
        if "foreach" in block:
            raise ConfigError(f"dvc.yaml: stage {name} uses foreach, which nmtbench launch --without-dvc does not "
                              "expand; write it as a matrix, or run with dvc")
        matrix = block.get("matrix") or {}
        axes = {key: keys_or_items(resolve(values, params, name)) for key, values in matrix.items()}
        for values in product(*axes.values()):
            item = dict(zip(axes, values))
            address = f"{name}@{'-'.join(map(str, values))}" if axes else name
            scope = {**params, "item": item}
            outs = [entry for key in ("outs", "metrics", "plots") for entry in block.get(key) or []]
            found.append(Expanded(
                address, command(resolve(block["cmd"], scope, address)),
                tuple(resolve(dep, scope, address) for dep in block.get("deps") or []),
                tuple(resolve(path_of(out), scope, address) for out in outs),
                tuple(resolve(path_of(out), scope, address) for out in outs if persistent(out))))
    return found


def keys_or_items(values) -> list:
    """A matrix axis: a list's items, or a dict's keys (`model: ${models}` runs over the model names)."""
    return list(values) if isinstance(values, (list, dict)) else [values]


def path_of(entry) -> str:
    return next(iter(entry)) if isinstance(entry, dict) else entry


def persistent(entry) -> bool:
    return isinstance(entry, dict) and bool((next(iter(entry.values())) or {}).get("persist"))


def command(cmd: str | list[str]) -> str:
    return cmd if isinstance(cmd, str) else " && ".join(cmd)


def resolve(value, scope: dict, where: str):
    """value with each ${dotted.key} filled in from scope; a string that is one reference alone takes the value
    itself (a list or dict for a matrix)."""
    if isinstance(value, list):
        return [resolve(entry, scope, where) for entry in value]
    if not isinstance(value, str):
        return value
    whole = REFERENCE.fullmatch(value.strip())
    if whole:
        return lookup(whole.group(1), scope, where)
    return REFERENCE.sub(lambda match: str(lookup(match.group(1), scope, where)), value)


def lookup(dotted: str, scope: dict, where: str):
    found = scope
    for key in dotted.split("."):
        if not isinstance(found, dict) or key not in found:
            raise ConfigError(f"dvc.yaml: stage {where} names ${{{dotted}}}, which params.yaml does not hold; add it "
                              "to params.yaml or fix the stage")
        found = found[key]
    return found


def inside(path: str, folder: str) -> bool:
    path, folder = Path(path), Path(folder)
    return path == folder or folder in path.parents


def waits_for(stage: Expanded, other: Expanded) -> bool:
    """stage reads what other writes: a dep of one lies in or holds an out of the other."""
    return stage is not other and any(inside(dep, out) or inside(out, dep) for dep in stage.deps for out in other.outs)


class Pipeline:
    """The launcher's view of the pipeline without dvc, run from the project's root (the interface of
    stages.DvcPipeline): plan, prepare before a stage runs, record after it ran."""

    def __init__(self, root: Path, single_item: bool = False):
        self.root, self.single_item = Path(root), single_item
        params = self.root / "params.yaml"  # dvc's default params file; a pipeline may use none
        self.stages = {stage.name: stage for stage in expand(read_yaml(self.root / "dvc.yaml"),
                                                             read_yaml(params) or {} if params.is_file() else {})}
        self.ran: set[str] = set()
        self.kept: dict[str, list[tuple[Path, Path]]] = {}  # stage -> (output, where it was moved aside) while it runs

    def plan(self, targets: list[str] | None = None) -> list[Stage]:
        """Every stage, or the targets and the stages they wait for (with single_item, the targets alone: what
        they wait for must be there already), upstream first in dvc.yaml's order."""
        unknown = sorted(set(targets or ()) - set(self.stages))
        if unknown:
            raise ConfigError(f"{', '.join(unknown)}: no such stage in dvc.yaml; its stages are named as dvc names "
                              "them, e.g. train@gru-42")
        wanted = set(targets or self.stages)
        while not self.single_item:
            upstream = {other for name in wanted for other in self.stages
                        if waits_for(self.stages[name], self.stages[other])} - wanted
            if not upstream:
                break
            wanted |= upstream
        needs = {name: frozenset(other for other in wanted if waits_for(self.stages[name], self.stages[other]))
                 for name in wanted}
        order, placed = [], set()
        while len(order) < len(wanted):
            ready = [name for name in self.stages if name in wanted and name not in placed and needs[name] <= placed]
            if not ready:
                raise ConfigError(f"dvc.yaml: stages {', '.join(sorted(wanted - placed))} wait for each other in a "
                                  "circle; fix their deps and outs")
            order.append(ready[0])
            placed.add(ready[0])
        return [Stage(name, self.runnable(self.stages[name].cmd), needs[name]) for name in order]

    def runnable(self, cmd: str) -> str:
        """cmd with `nmtbench` run by this launcher's Python: a machine may hold the package without its command on
        PATH (pip --target installs no scripts there)."""
        words = cmd.split(" ", 1)
        return f"{shlex.quote(sys.executable)} -m nmtbench {words[1] if len(words) > 1 else ''}".rstrip() \
            if words[0] == "nmtbench" else cmd

    def prepare(self, name: str) -> bool:
        """False when the stage is up to date: every output there, nothing it waits for ran in this launch, and it is
        not stale. Else its outputs but the persistent ones are moved aside (record deletes them, restore puts them
        back)."""
        stage = self.stages[name]
        rerun_upstream = any(waits_for(stage, self.stages[other]) for other in self.ran) or name in self.stale()
        if not rerun_upstream and all((self.root / out).exists() for out in stage.outs):
            return False
        self.kept[name] = []
        for out in sorted(set(stage.outs) - set(stage.persistent)):
            path = self.root / out
            if path.exists() or path.is_symlink():
                aside = path.with_name(f"{temp_prefix(path)}kept")
                path.rename(aside)
                self.kept[name].append((path, aside))
        return True

    def record(self, name: str) -> str | None:
        """Nothing to record without dvc; the old outputs set aside go, and the stage counts as rerun for those that
        wait for it."""
        self.ran.add(name)
        for _, aside in self.kept.pop(name, []):
            remove(aside)
        self.mark_stale(name, False)
        return None

    def restore(self, name: str) -> None:
        """After the stage failed: its old outputs back in place of what it left, and, where it ran because a stage
        it waits for ran, marked stale so that the next launch runs it again."""
        for path, aside in self.kept.pop(name, []):
            remove(path)
            aside.rename(path)
        stage = self.stages[name]
        if any(waits_for(stage, self.stages[other]) for other in self.ran):
            self.mark_stale(name, True)

    def stale(self) -> set[str]:
        path = self.root / STALE
        return set(path.read_text().split()) if path.is_file() else set()

    def mark_stale(self, name: str, stale: bool) -> None:
        names = self.stale()
        if (name in names) != stale:
            write_text(self.root / STALE, "".join(f"{each}\n" for each in sorted(names ^ {name})))
