"""launch/dvcfile.py and `nmtbench launch --without-dvc`: dvc.yaml's stages expanded over params.yaml as dvc expands
them, and run on a machine without dvc: a stage when an output is missing or what it waits for ran, the persistent
outputs kept, the named stages alone with --single-item, everything cut at a time limit."""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest
import yaml

from nmtbench.cli import main
from nmtbench.config import LaunchConfig
from nmtbench.launch import launch
from nmtbench.launch.dvcfile import Pipeline, expand
from nmtbench.param_blocks import ConfigError

ROOT = Path(__file__).resolve().parents[1]
# a fans out to b@1 and b@2 (each keeping a persistent folder), which c joins
TOY = """
stages:
  a:
    cmd: echo a > a.txt
    outs: [a.txt]
  b:
    matrix:
      n: ${numbers}
    cmd: cat a.txt > b${item.n}.txt && echo ${item.n} ${greeting} >> b${item.n}.txt && date +%N >> kept${item.n}/runs
    deps: [a.txt]
    outs:
      - b${item.n}.txt
      - kept${item.n}:
          persist: true
  c:
    cmd: cat b1.txt b2.txt > c.txt
    deps: [b1.txt, b2.txt]
    outs: [c.txt]
"""
PROCESSES = LaunchConfig(executor="process", jobs=2, threads_per_job=1)


def toy(folder: Path, dvc_yaml: str = TOY) -> Path:
    """A folder holding dvc_yaml and its params, neither git nor dvc."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dvc.yaml").write_text(dvc_yaml)
    (folder / "params.yaml").write_text("numbers: [1, 2]\ngreeting: hello\n")
    for n in (1, 2):
        (folder / f"kept{n}").mkdir(exist_ok=True)
    return folder


def run(folder: Path, targets=None, **options) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        code = launch(PROCESSES, targets, out, without_dvc=True, **options)
    return code, out.getvalue()


def ran(printed: str) -> list[str]:
    return sorted(line.split()[1] for line in printed.splitlines() if line.startswith("done: "))


def test_the_projects_stages_expand_as_dvc_names_them_with_their_commands_and_waits(tmp_path):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params = {**params, "models": {name: params["models"][name] for name in ("gru", "transformer")}, "seeds": [1, 2],
              "beam_sweep": {**params["beam_sweep"], "model": "gru", "seed": 2}}
    stages = {stage.name: stage for stage in expand(yaml.safe_load((ROOT / "dvc.yaml").read_text()), params)}
    assert [name for name in stages if name.startswith(("train", "evaluate"))] == [
        "train@gru-1", "train@gru-2", "train@transformer-1", "train@transformer-2",
        "evaluate@gru-1", "evaluate@gru-2", "evaluate@transformer-1", "evaluate@transformer-2"]
    assert stages["train@gru-2"].cmd == "nmtbench train gru --seed 2"
    assert stages["train@gru-2"].persistent == ("models/gru/seed2",)
    assert "metrics/gru/seed2/learning_curve.csv" in stages["train@gru-2"].outs  # a plot is an output too
    (tmp_path / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    pipeline = Pipeline(tmp_path)
    assert pipeline.stages == stages
    needs = {stage.name: stage.needs for stage in pipeline.plan(["evaluate@gru-2", "compare"])}
    assert needs["evaluate@gru-2"] == {"tokenize", "train@gru-2", "tune@gru"}
    assert needs["train@gru-2"] == {"tokenize", "tune@gru"} and needs["tokenize"] == {"prepare"}
    assert needs["compare"] == {"tokenize", "tune@gru", "tune@transformer", *(
        f"{stage}@{model}-{seed}" for stage in ("train", "evaluate") for model in ("gru", "transformer")
        for seed in (1, 2))}  # metrics/ holds what train and evaluate write
    assert {stage.name: stage.needs for stage in pipeline.plan(["beam_sweep"])}["beam_sweep"] == {
        "tokenize", "train@gru-2"}


def test_nmtbench_runs_by_the_launchers_python_and_other_commands_as_written(tmp_path):
    pipeline = Pipeline(toy(tmp_path, TOY.replace("echo a > a.txt", "nmtbench --version > a.txt")))
    commands = {stage.name: stage.cmd for stage in pipeline.plan()}
    assert commands["a"] == f"{sys.executable} -m nmtbench --version > a.txt"
    assert commands["b@2"].startswith("cat a.txt > b2.txt && echo 2 hello >> b2.txt")


@pytest.mark.parametrize(("text", "message"), [
    (TOY.replace("${greeting}", "${nonesuch.key}"), r"stage b@1 names \$\{nonesuch.key\}, which params.yaml"),
    (TOY.replace("matrix:\n      n:", "foreach:\n      n:"), "stage b uses foreach"),
    (TOY.replace("cmd: echo a > a.txt\n    outs: [a.txt]", "cmd: echo a > a.txt\n    deps: [c.txt]\n    outs: [a.txt]"),
     "wait for each other in a circle"),
])
def test_a_dvc_yaml_it_cannot_run_is_refused_in_one_line(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message) as error:
        Pipeline(toy(tmp_path, text)).plan()
    assert "\n" not in str(error.value)


def test_an_unknown_stage_is_refused_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="b@3: no such stage in dvc.yaml"):
        Pipeline(toy(tmp_path)).plan(["b@3"])


def test_it_runs_what_is_missing_and_what_waits_for_a_rerun_keeping_the_persistent_outputs(tmp_path):
    folder = toy(tmp_path)
    code, printed = run(folder)
    assert code == 0 and ran(printed) == ["a", "b@1", "b@2", "c"]
    assert (folder / "c.txt").read_text() == "a\n1 hello\na\n2 hello\n"
    code, printed = run(folder)
    assert code == 0 and ran(printed) == [] and printed.count("up to date: ") == 4
    (folder / "b1.txt").unlink()
    code, printed = run(folder)
    assert code == 0 and ran(printed) == ["b@1", "c"]  # c because b@1 ran; a and b@2 untouched
    assert len((folder / "kept1" / "runs").read_text().split()) == 2  # kept across the rerun, as dvc keeps it
    assert len((folder / "kept2" / "runs").read_text().split()) == 1


def test_a_stage_that_fails_gets_its_outputs_back_and_reruns_next_time_if_it_was_stale(tmp_path):
    """#69: without dvc's cache, a stage's outputs are moved aside while it runs, deleted once it succeeded and put
    back if it failed (they were deleted before it ran); one that failed on a rerun upstream stays out of date."""
    folder = toy(tmp_path, "stages:\n  a:\n    cmd: echo a > a.txt\n    outs: [a.txt]\n  b:\n"
                           "    cmd: test -f go && date +%N > b.txt && date +%N > b2.txt\n    deps: [a.txt]\n"
                           "    outs: [b.txt, b2.txt]\n")
    (folder / "go").touch()
    assert run(folder)[0] == 0
    first = (folder / "b.txt").read_text()
    (folder / "go").unlink()
    (folder / "b2.txt").unlink()
    code, printed = run(folder, ["b"], single_item=True)
    assert code == 1 and "FAILED: b" in printed
    assert (folder / "b.txt").read_text() == first and not (folder / "b2.txt").exists()
    assert sorted(path.name for path in folder.iterdir()) == ["a.txt", "b.txt", "dvc.yaml", "kept1", "kept2",
                                                              "launch", "params.yaml"]
    (folder / "go").touch()
    assert run(folder)[0] == 0
    second = {name: (folder / name).read_text() for name in ("b.txt", "b2.txt")}
    (folder / "go").unlink()
    (folder / "a.txt").unlink()
    code, printed = run(folder)
    assert code == 1 and ran(printed) == ["a"]
    assert {name: (folder / name).read_text() for name in ("b.txt", "b2.txt")} == second  # back, though stale
    (folder / "go").touch()
    code, printed = run(folder)
    assert code == 0 and ran(printed) == ["b"]  # every output there, a up to date: b reruns, having failed on a's
    assert run(folder)[1].count("up to date: ") == 2


def test_single_item_runs_the_named_stages_alone(tmp_path):
    folder = toy(tmp_path)
    code, printed = run(folder, ["b@1"], single_item=True)
    assert code == 1 and ran(printed) == []  # a.txt is not there, and a is not run for it
    assert "FAILED: b@1" in printed and not (folder / "a.txt").exists()
    code, printed = run(folder, ["c"])
    assert code == 0 and ran(printed) == ["a", "b@1", "b@2", "c"]


def test_the_time_limit_cancels_the_running_and_starts_nothing_more(tmp_path):
    folder = toy(tmp_path, TOY.replace("echo a > a.txt", "sleep 30 && echo a > a.txt"))
    started = time.monotonic()
    code, printed = run(folder, time_limit=2)
    assert code == 1 and time.monotonic() - started < 15
    assert "the time limit passed; cancelled 1 job(s), 3 not started" in printed
    assert "failed: a: cut at the time limit" in printed and "failed: c: not run: the time limit passed" in printed
    time.sleep(1)
    assert not (folder / "a.txt").exists()  # the command was ended with its job


def test_the_command_line_runs_it_in_a_folder_without_git_or_dvc(tmp_path, monkeypatch, capsys):
    folder = toy(tmp_path, TOY.replace("${numbers}", "[1, 2]").replace("${greeting}", "hello"))
    (folder / "params.yaml").unlink()  # the launch block's defaults
    monkeypatch.chdir(folder)
    assert main(["launch", "--without-dvc", "--executor", "process", "c"]) == 0
    assert (folder / "c.txt").is_file() and not (folder / "dvc.lock").exists()
    assert main(["launch", "--without-dvc", "--time-limit", "0"]) == 2
    assert "--time-limit: must be a positive number of seconds" in capsys.readouterr().err
