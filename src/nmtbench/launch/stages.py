"""DVC's view of the pipeline for the launcher, run from the project's root: which stages are out of date, what
each waits for, and recording a stage once its command has run. Every call opens the repository afresh (a finished
stage changes dvc.lock) and holds DVC's repository lock only for itself, so `dvc status` in another shell still works
during a launch. Without dvc, launch/dvcfile.py gives the same interface."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import networkx as nx
from dvc.exceptions import DvcException
from dvc.repo import Repo

from nmtbench.launch.dvcfile import Stage, command
from nmtbench.param_blocks import ConfigError


class DvcPipeline:
    """plan, prepare before a stage runs and record after it ran, as `dvc repro` does them."""

    def __init__(self, root: Path, single_item: bool = False):
        self.root, self.single_item = Path(root), single_item

    def plan(self, targets: list[str] | None = None) -> list[Stage]:
        try:
            return plan(self.root, targets, self.single_item)
        except DvcException as error:  # DVC's own words name the problem (a bad dvc.yaml, a locked repository)
            raise ConfigError(f"dvc: {error}") from None

    def prepare(self, name: str) -> bool:
        return prepare(self.root, name)

    def restore(self, name: str) -> None:
        """Nothing to do after a stage failed: DVC's cache holds the outputs it deleted (dvc checkout brings them
        back, docs/troubleshooting.md), and dvc.lock keeps the stage out of date."""

    def record(self, name: str) -> str | None:
        """None when recorded; what DVC refuses to record (an output the command did not write) fails the stage."""
        try:
            record(self.root, name)
        except DvcException as error:
            return f"dvc could not record it: {error}"
        return None


def plan(root: Path, targets: list[str] | None = None, single_item: bool = False) -> list[Stage]:
    """The stages to consider, upstream first: every stage out of date (as `dvc status` says) and everything
    downstream of one, since those may change once it runs. targets restricts it to them and what they need, or with
    single_item (dvc repro --single-item) to them alone."""
    with locked(root) as repo:
        graph = repo.index.graph  # an edge goes from a stage to a stage it depends on
        stages = {stage.addressing: stage for stage in graph if stage.cmd}
        wanted = set(stages)
        if targets:
            unknown = sorted(set(targets) - set(stages))
            if unknown:
                raise ValueError(f"{', '.join(unknown)}: no such stage in dvc.yaml; `dvc stage list` names them")
            wanted = {name for target in targets for name in (target, *(
                () if single_item else (s.addressing for s in nx.descendants(graph, stages[target]))))}
        stale = {name for name in wanted if stages[name].changed()}
        downstream = {up.addressing for name in stale for up in nx.ancestors(graph, stages[name])}
        chosen = (stale | downstream) & wanted
        position = {name: index for index, name in enumerate(stages)}  # dvc.yaml's order, as `dvc repro` runs
        upstream_first = nx.lexicographical_topological_sort(graph.reverse(), key=lambda s: position[s.addressing])
        order = [stage.addressing for stage in upstream_first if stage.addressing in chosen]
        return [Stage(name, command(stages[name].cmd),
                      frozenset(dep.addressing for dep in graph.successors(stages[name]) if dep.addressing in chosen))
                for name in order]


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
