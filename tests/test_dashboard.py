"""`nmtbench dashboard` without an account or without the report package: one line saying what it needs."""
import os
import sys
from pathlib import Path

import pytest
import wandb

from nmtbench.cli import main
from nmtbench.config import WandbConfig
from nmtbench.dashboard import NEEDS_KEY, NEEDS_PACKAGE, DashboardError, dashboard

ROOT = Path(__file__).resolve().parents[1]


def test_without_an_api_key_the_command_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    for key in [key for key in os.environ if key.startswith("WANDB_")]:
        monkeypatch.delenv(key)
    for key, value in (("HOME", tmp_path), ("WANDB_CONFIG_DIR", tmp_path), ("NETRC", tmp_path / "netrc")):
        monkeypatch.setenv(key, str(value))
    monkeypatch.chdir(tmp_path)
    assert main(["--params", str(ROOT / "params.yaml"), "dashboard"]) == 2
    assert capsys.readouterr() == ("", f"nmtbench dashboard: error: {NEEDS_KEY}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


def test_with_a_key_but_no_report_package_it_names_the_package(monkeypatch):
    monkeypatch.setattr(wandb, "Api", lambda: object())  # stands for a configured key
    monkeypatch.setitem(sys.modules, "wandb_workspaces", None)  # makes the import fail even where installed
    with pytest.raises(DashboardError) as error:
        dashboard(WandbConfig(), "test_2016_flickr")
    assert str(error.value) == NEEDS_PACKAGE


def test_the_report_compares_the_runs_of_the_group():
    wr = pytest.importorskip("wandb_workspaces.reports.v2")
    from nmtbench.dashboard import build_report

    report = build_report(wr, WandbConfig(project="p", group="g1"), "test_2016_flickr", "someone")
    assert (report.entity, report.project, report.title) == ("someone", "p", "nmtbench: g1")
    (grid,) = report.blocks
    (runs,) = grid.runsets
    assert (runs.entity, runs.project, runs.filters) == ("someone", "p", "Metric('Group') == 'g1'")
    assert [panel.title for panel in grid.panels] == [
        "validation loss", "validation BLEU against tokens seen", "test_2016_flickr BLEU against parameters",
        "test_2016_flickr BLEU against decoding speed"]
