"""DVC's view of the pipeline for the launcher, run from the project's root: which stages are out of date, what
each waits for, and recording a stage once its command has run. Every call opens the repository afresh (a finished
stage changes dvc.lock) and holds DVC's repository lock only for itself, so `dvc status` in another shell still works
during a launch."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
from dvc.repo import Repo


@dataclass(frozen=True)
class Stage:
    name: str  # dvc.yaml's address, e.g. train@transformer-42
    cmd: str
    needs: frozenset[str]  # the stages of the plan it waits for


def plan(root: Path, targets: list[str] | None = None) -> list[Stage]:
    """The stages to consider, upstream first: every stage out of date (as `dvc status` says) and everything
    downstream of one, since those may change once it runs. targets restricts it to them and what they need."""
    with locked(root) as repo:
        graph = repo.index.graph  # an edge goes from a stage to a stage it depends on
        stages = {stage.addressing: stage for stage in graph if stage.cmd}
        wanted = set(stages)
        if targets:
            unknown = sorted(set(targets) - set(stages))
            if unknown:
                raise ValueError(f"{', '.join(unknown)}: no such stage in dvc.yaml; `dvc stage list` names them")
            wanted = {name for target in targets
                      for name in (target, *(s.addressing for s in nx.descendants(graph, stages[target])))}
        stale = {name for name in wanted if stages[name].changed()}
        downstream = {up.addressing for name in stale for up in nx.ancestors(graph, stages[name])}
        chosen = (stale | downstream) & wanted
        position = {name: index for index, name in enumerate(stages)}  # dvc.yaml's order, as `dvc repro` runs
        upstream_first = nx.lexicographical_topological_sort(graph.reverse(), key=lambda s: position[s.addressing])
        order = [stage.addressing for stage in upstream_first if stage.addressing in chosen]
        return [Stage(name, command(stages[name].cmd),
                      frozenset(dep.addressing for dep in graph.successors(stages[name]) if dep.addressing in chosen))
                for name in order]


def command(cmd: str | list[str]) -> str:
    return cmd if isinstance(cmd, str) else " && ".join(cmd)


def prepare(root: Path, name: str) -> bool:
    """Before a stage runs, what `dvc repro` does: False when it turns out up to date (what it waited for rebuilt
    its deps unchanged), else its outputs deleted but the persistent ones (a killed training resumes)."""
    with locked(root) as repo:
        stage = repo.stage.collect(name)[0]
        if not stage.changed():
            return False
        stage.remove_outs(ignore_remove=False, force=False)
        return True


def record(root: Path, name: str) -> None:
    """After a stage's command succeeded, what `dvc repro` does: hash and cache its outputs, save it to the run
    cache and write its entry of dvc.lock. The launcher calls it for one stage at a time."""
    with locked(root) as repo:
        stage = repo.stage.collect(name)[0]
        stage.save(run_cache=True)
        stage.commit()
        stage.dump(update_pipeline=False)


@contextmanager
def locked(root: Path):
    """The repository under DVC's lock (DVC waits a few seconds for a `dvc` command of the user's to finish)."""
    repo = Repo(str(root))
    try:
        with repo.lock:
            yield repo
    finally:
        repo.close()
