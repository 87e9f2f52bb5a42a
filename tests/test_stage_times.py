"""Each command's seconds, recorded where NMTBENCH_STAGE_TIMES asks, and the smoke benchmark's sums of them."""
import importlib.util
import json
import shutil
import time
from pathlib import Path

import pytest

from nmtbench.cli import main
from nmtbench.stage_times import ENV, process_seconds

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("smoke_breakdown", ROOT / "benchmarks" / "smoke_breakdown.py")
smoke_breakdown = importlib.util.module_from_spec(spec)
spec.loader.exec_module(smoke_breakdown)


def test_every_command_appends_its_line_where_asked_and_nothing_otherwise(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    assert main(["check"]) == 0
    assert not list(tmp_path.glob("*.jsonl"))  # unset: nothing written
    times = tmp_path / "times.jsonl"
    monkeypatch.setenv(ENV, str(times))
    assert main(["check"]) == 0
    assert main(["--params", "missing.yaml", "check"]) == 2  # a refused command is timed too
    lines = [json.loads(line) for line in times.read_text().splitlines()]
    assert [(line["command"], line["argv"], line["exit"], line["folder"]) for line in lines] == [
        ("check", ["check"], 0, str(tmp_path)), ("check", ["--params", "missing.yaml", "check"], 2, str(tmp_path))]
    assert all(0 < line["seconds"] for line in lines)


def test_the_process_age_grows_with_the_process():
    before = process_seconds()
    time.sleep(0.05)
    assert before is not None and before > 0 and process_seconds() >= before + 0.04


def test_the_breakdown_splits_the_wall_into_the_stages_their_work_and_the_rest():
    lines = [{"command": "train", "seconds": 9.0, "warm": True}, {"command": "train", "seconds": 11.0},
             {"command": "compare", "seconds": 4.0}, {"command": "check", "seconds": None},
             {"command": "warm", "seconds": 39.0}]  # the wrapper of dvc repro, which holds the others
    rows = smoke_breakdown.breakdown(lines, {"train": 5.0}, wall=40.0)
    found = [(row["kind"], row["processes"], row["warm"], row["seconds"], row["work"], row["rest"], row["share"])
             for row in rows]
    assert found == [
        ("train", 2, 1, 20.0, 5.0, 15.0, 0.5), ("compare", 1, 0, 4.0, 0.0, 4.0, 0.1),
        ("check", 1, 0, 0.0, 0.0, 0.0, 0.0), ("every nmtbench process", 4, 1, 24.0, 5.0, 19.0, 0.6),
        (smoke_breakdown.OUTSIDE, None, None, 16.0, 0.0, 16.0, 0.4),
        ("the smoke pipeline", None, None, 40.0, 5.0, 35.0, 1.0)]


def test_the_work_is_read_from_the_runs_files(tmp_path):
    for model, train, decode in (("a", 2.5, {"test": 0.25, "val": 0.5}), ("b", 1.0, {"test": 0.25})):
        folder = tmp_path / "metrics" / model / "seed1"
        folder.mkdir(parents=True)
        (folder / "train.json").write_text(json.dumps({"train_seconds": train}))
        (folder / "eval.json").write_text(json.dumps({**{split: {"decode_seconds": seconds} for split, seconds in
                                                         decode.items()}, "provenance": {"wall_seconds": 9.0}}))
    assert smoke_breakdown.work_seconds(tmp_path) == pytest.approx({"train": 3.5, "evaluate": 1.0})


def test_a_warm_copy_counts_from_its_commands_own_start(tmp_path, monkeypatch):
    from nmtbench import stage_times

    times = tmp_path / "times.jsonl"
    monkeypatch.setenv(ENV, str(times))
    monkeypatch.setattr(stage_times, "_handed_over_after", None)  # this process's own command
    stage_times.record("check", ["check"], 0)
    stage_times.handed_over(100.0)  # as a copy forked for a command 100 s old does
    stage_times.record("check", ["check"], 0)
    own, copy = [json.loads(line) for line in times.read_text().splitlines()]
    assert (own["warm"], copy["warm"]) == (False, True)
    assert copy["seconds"] >= own["seconds"] + 100.0
