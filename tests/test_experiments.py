import subprocess
import sys

import pytest
import yaml

from helpers.project import pipeline_env
from nmtbench.cli import main
from nmtbench.experiments import blocks, columns_of, experiments, flat_params
from nmtbench.tables import Table

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
# a stage standing in for the pipeline: each model's BLEU is 10 times its index plus the beam size
WRITE_BLEU = """
import json, yaml
params = yaml.safe_load(open("params.yaml"))
bleu = {name: 10.0 * i + params["evaluate"]["beam"] for i, name in enumerate(params["models"])}
json.dump(bleu, open("results/bleu.json", "w"))
"""


@pytest.fixture
def project(tmp_path):
    """A git and DVC project whose one stage writes results/bleu.json, run once and committed; returns run()."""
    def run(*command):
        return subprocess.run(command, cwd=tmp_path, env=pipeline_env(), check=True, capture_output=True, text=True)

    (tmp_path / "results").mkdir()
    (tmp_path / "write_bleu.py").write_text(WRITE_BLEU)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(
        {"evaluate": {"beam": 5}, "models": {"rnn": {"layers": 1}, "transformer_relative": {"layers": 1}}}))
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"compare": {
        "cmd": f"{sys.executable} write_bleu.py", "deps": ["write_bleu.py"], "params": ["evaluate", "models"],
        "metrics": ["results/bleu.json"]}}}))
    run(*GIT, "init", "-q", "-b", "main")
    run(sys.executable, "-m", "dvc", "init", "-q")
    run(sys.executable, "-m", "dvc", "repro", "-q")
    run(*GIT, "add", "-A")
    run(*GIT, "commit", "-qm", "baseline")
    return tmp_path, run


def test_models_by_experiments_with_the_params_that_differ(project):
    folder, run = project
    run(sys.executable, "-m", "dvc", "exp", "run", "-q", "-n", "beam8", "-S", "evaluate.beam=8")
    run(sys.executable, "-m", "dvc", "exp", "run", "-q", "-n", "deeper", "-S", "models.rnn.layers=2")
    assert experiments(120, folder) == """\
BLEU of every model (results/bleu.json: the first test set, mean over seeds):

| model                | workspace |  main | deeper | beam8 |
|:---------------------|----------:|------:|-------:|------:|
| rnn                  |      8.00 |  5.00 |   8.00 |  8.00 |
| transformer_relative |     18.00 | 15.00 |  18.00 | 18.00 |

Params that differ:

| param             | workspace | main | deeper | beam8 |
|:------------------|:----------|:-----|:-------|:------|
| evaluate.beam     | 8         | 5    | 8      | 8     |
| models.rnn.layers | 2         | 1    | 2      | 1     |"""


def test_a_project_before_its_first_run(tmp_path):
    (tmp_path / "params.yaml").write_text("evaluate: {beam: 5}\n")
    for command in ([*GIT, "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"], [*GIT, "add", "-A"],
                    [*GIT, "commit", "-qm", "new"]):
        subprocess.run(command, cwd=tmp_path, env=pipeline_env(), check=True, capture_output=True)
    assert experiments(120, tmp_path) == (
        "BLEU of every model (results/bleu.json: the first test set, mean over seeds):\n\n"
        "none yet: no column has results/bleu.json; `dvc repro` (or `dvc exp run`) writes it\n\n"
        "Params that differ: none.")


def test_outside_a_dvc_project_the_command_says_where_to_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["experiments"]) == 2
    assert capsys.readouterr().err == (
        "nmtbench experiments: error: `dvc exp show --json` failed (you are not inside of a DVC repository "
        "(checked up to mount point '/')); run nmtbench experiments in the project's folder, or in a workspace that "
        "`nmtbench workspace` made\n")


def test_columns_are_the_workspace_each_commit_and_its_experiments():
    shown = [{"rev": "workspace", "name": None, "data": {"params": {}}, "experiments": None},
             {"rev": "0123456789abcdef", "name": None, "data": {"params": {"p": 1}},
              "experiments": [{"revs": [{"rev": "fedcba9876543210", "name": "lr-low", "data": {}}]},
                              {"revs": [{"rev": "aaaaaaaaaaaaaaaa", "name": None, "data": None}]}]}]
    assert columns_of(shown) == {"workspace": {"params": {}}, "0123456": {"params": {"p": 1}}, "lr-low": {},
                                 "aaaaaaa": {}}


def test_params_of_every_file_flattened():
    assert flat_params({"params.yaml": {"data": {"train": {"lr": 0.1, "budget": {"kind": "flops"}}, "seeds": [1, 2],
                                                 "report": {}}},
                        "other.yaml": {"data": {"x": None}}}) == {
        "train.lr": 0.1, "train.budget.kind": "flops", "seeds": [1, 2], "report": {}, "other.yaml:x": None}


def test_wide_tables_are_cut_into_blocks_that_fit():
    table = Table(["model", "first", "second", "third"], [["rnn", "1.00", "2.00", "3.00"]], "lrrr")
    assert blocks(table, 30) == ["| model | first | second |\n|:------|------:|-------:|\n| rnn   |  1.00 |   2.00 |",
                                 "| model | third |\n|:------|------:|\n| rnn   |  3.00 |"]
    assert blocks(table, 200) == [table.text()]
