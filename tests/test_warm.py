"""nmtbench warm: a command served by a copy forked from the warm interpreter behaves as the command's own process
would (output, input, folder, environment, exit status, signals), falls back to its own process where the copy could
differ, and trains and decodes exactly as a cold stage does."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest

from helpers.project import pipeline_env
from nmtbench import warm

pytestmark = pytest.mark.skipif(not warm.available(), reason="nmtbench warm forks and passes descriptors: Linux only")

# a warm interpreter whose main stands in for nmtbench's, preloading nothing
SERVER = """
import os, sys, time
from nmtbench import warm

def main(argv):
    if argv[0] == "echo":
        print("out", argv[1], os.getcwd(), os.environ.get("MARK"), sys.stdin.read().strip(), flush=True)
        print("err", file=sys.stderr)
        return int(argv[1])
    if argv[0] == "sleep":
        with open(argv[1], "w") as out:
            out.write(str(os.getpid()))
        time.sleep(60)
    if argv[0] == "raise":
        raise RuntimeError("boom")
    raise SystemExit(argv[1])

sys.exit(warm.run(sys.argv[1:], main=main, preload=()))
"""
# what cli.main does first: the command handed over, or run here ("cold") where it cannot be
CLIENT = """
import sys
from nmtbench import warm
code = warm.forward(sys.argv[1:])
print("cold" if code is None else "handed over", file=sys.stderr)
sys.exit(3 if code is None else code)
"""


@pytest.fixture
def serve(tmp_path):
    """serve(script): run the shell script under a warm interpreter of SERVER, `client` calling CLIENT."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    client = tmp_path / "client"  # a program, not a shell function: `client ... &` is then its own pid
    client.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tmp_path / "client.py"}" "$@"\n')
    client.chmod(0o755)
    (tmp_path / "sub").mkdir()

    def run(script: str) -> subprocess.CompletedProcess:
        script = f'PATH="{tmp_path}:$PATH"\n{script}'
        return subprocess.run([sys.executable, str(tmp_path / "server.py"), "sh", "-c", script], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, env=pipeline_env())
    return run


def test_a_handed_over_command_has_its_own_input_output_folder_environment_and_status(serve, tmp_path):
    done = serve('cd sub && echo typed | MARK=m client echo 5; echo "status $?"')
    assert done.stdout.splitlines() == [f"out 5 {tmp_path / 'sub'} m typed", "status 5"]
    assert done.stderr.splitlines() == ["err", "handed over"]
    assert done.returncode == 0  # the script's own status: its last command's


def test_an_exit_message_is_printed_and_ends_with_status_1_as_python_does(serve):
    done = serve('client exit "no such model"; echo "status $?"')
    assert done.stdout.splitlines() == ["status 1"]
    assert done.stderr.splitlines() == ["no such model", "handed over"]


def test_an_unexpected_error_ends_the_copy_with_status_1_and_the_next_command_is_served(serve):
    done = serve('client raise; echo "status $?"; client echo 4 </dev/null; echo "status $?"')
    assert done.stdout.splitlines()[0] == "status 1" and done.stdout.splitlines()[-1] == "status 4"
    assert "RuntimeError: boom" in done.stderr and done.stderr.count("handed over") == 2


def test_a_command_with_other_import_time_settings_runs_in_its_own_process(serve):
    done = serve('OMP_NUM_THREADS=7 client echo 0; echo "status $?"')  # torch sized its pool when imported
    assert done.stdout.splitlines() == ["status 3"]
    assert done.stderr.splitlines() == ["cold"]


def test_without_a_warm_interpreter_a_command_runs_in_its_own_process(tmp_path, monkeypatch):
    monkeypatch.setenv(warm.ENV, str(tmp_path / "gone"))
    assert warm.forward(["echo", "0"]) is None
    monkeypatch.delenv(warm.ENV)
    assert warm.forward(["echo", "0"]) is None


def test_a_signal_to_the_command_reaches_its_copy(serve):
    done = serve("""client sleep pid & command=$!
        while [ ! -s pid ]; do sleep 0.05; done
        kill -TERM $command; wait $command; echo "status $?"
        kill -0 "$(cat pid)" 2>/dev/null && echo "copy running" || echo "copy ended" """)
    assert done.stdout.splitlines() == ["status 143", "copy ended"]  # 128 + SIGTERM, as a shell reports it


def test_a_copy_whose_command_is_killed_is_stopped(serve):
    done = serve("""client sleep pid & command=$!
        while [ ! -s pid ]; do sleep 0.05; done
        kill -KILL $command; wait $command
        for _ in $(seq 100); do kill -0 "$(cat pid)" 2>/dev/null || break; sleep 0.05; done
        kill -0 "$(cat pid)" 2>/dev/null && echo "copy running" || echo "copy ended" """)
    assert done.stdout.splitlines() == ["copy ended"]


def test_warm_with_no_command_says_what_to_give(capsys):
    from nmtbench.cli import main

    assert main(["warm"]) == 2
    assert capsys.readouterr().err.strip() == (
        "nmtbench warm: error: warm: name the command to run, e.g. nmtbench warm -- dvc repro")


def scores(folder) -> tuple[dict, list[list[str]]]:
    """A trained and evaluated run's scores, its curve and its translations, without the times they took."""
    metrics = folder / "metrics" / "tiny" / "seed7"
    evaluated = json.loads((metrics / "eval.json").read_text())
    kept = {split: {k: v for k, v in found.items() if k not in ("decode_seconds", "sentences_per_s")}
            for split, found in evaluated.items() if split != "provenance"}
    with open(metrics / "learning_curve.csv", newline="") as curve:
        rows = list(csv.reader(curve))
    timed = [i for i, name in enumerate(rows[0]) if "second" in name or "per_s" in name]
    return kept, [[cell for i, cell in enumerate(row) if i not in timed] for row in rows]


@pytest.mark.slow
def test_a_warm_stage_trains_and_decodes_exactly_as_a_stage_of_its_own(trained_copy, tmp_path):
    """The real interpreter, preloading torch and Lightning: seed 7 of tiny trained and evaluated in its own
    processes and again in warm copies."""
    warm_copy = shutil.copytree(trained_copy, tmp_path / "warm")
    times = tmp_path / "stage_times.jsonl"
    stages = "nmtbench train tiny --seed 7 && nmtbench evaluate tiny --seed 7"
    env = pipeline_env(WANDB_MODE="disabled", NMTBENCH_STAGE_TIMES=str(times))
    subprocess.run(["sh", "-c", stages], cwd=trained_copy, check=True, capture_output=True, env=env)
    subprocess.run(["nmtbench", "warm", "--", "sh", "-c", stages], cwd=warm_copy, check=True, capture_output=True,
                   env=env)
    ran = [(line["command"], line["exit"], line["warm"]) for line in map(json.loads, times.read_text().splitlines())]
    assert ran == [("train", 0, False), ("evaluate", 0, False), ("train", 0, True), ("evaluate", 0, True),
                   ("warm", 0, False)]
    assert scores(warm_copy) == scores(trained_copy)
