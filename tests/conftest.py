"""Shared fixtures: tiny data mirrors and a tiny project trained once per session; what they build is in helpers/.
And the order the test files start in."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.data import write_mirror
from helpers.project import TRAINED_MODELS, write_tiny_project

# The files that take longest, longest first (CPU seconds measured in docs/testing.md: the smoke pipeline about 380,
# the next about 100 each). make test runs each file whole on one worker, in collection order
# (--dist loadfile --no-loadscope-reorder); xdist's own order, most tests first, started the smoke pipeline's
# ten tests late, and the other workers then sat idle while it ran.
LONGEST_FIRST = ("test_pipeline.py", "test_train_evaluate.py", "test_budget.py", "test_dvc_runs.py", "test_tuning.py",
                 "test_launch.py", "test_models.py")


def pytest_collection_modifyitems(items):
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its own order


def pytest_runtest_logreport(report):
    """With NMTBENCH_TEST_FAILURES naming a file (tools/gpu_check.sh's tests part), each failure's traceback is
    appended there as it happens: pytest prints them only at the session's end, which a run cut short loses."""
    path = os.environ.get("NMTBENCH_TEST_FAILURES")
    if path and report.failed:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"FAILED {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


@pytest.fixture
def make_data_mirror(tmp_path):
    """Factory: write_mirror into tmp_path / name."""
    def make(files: dict[str, list[str] | bytes] | None = None, name: str = "mirror") -> tuple[Path, dict[str, str]]:
        return write_mirror(tmp_path / name, files)
    return make


@pytest.fixture(scope="session")
def trained_project(tmp_path_factory) -> Path:
    """A tiny project trained and evaluated once per session (W&B disabled); copy it before changing it."""
    from nmtbench.cli import main

    folder = tmp_path_factory.mktemp("trained")
    mirror, checksums = write_mirror(folder.parent / f"{folder.name}-mirror")
    write_tiny_project(folder, mirror, checksums, TRAINED_MODELS)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("WANDB_MODE", "disabled")
        for name in TRAINED_MODELS:
            assert main(["train", name]) == 0 and main(["evaluate", name]) == 0
    return folder


@pytest.fixture
def trained_copy(trained_project, tmp_path, monkeypatch) -> Path:
    """A copy of trained_project in tmp_path/project, the current folder for the test: the one to change."""
    folder = tmp_path / "project"
    shutil.copytree(trained_project, folder)
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def old_output(tmp_path):
    """An earlier complete output of the prepare stage in tmp_path/out, which a failed run must leave as it was."""
    (tmp_path / "out" / "prepared").mkdir(parents=True)
    (tmp_path / "out" / "prepared" / "old-output").write_text("kept")
