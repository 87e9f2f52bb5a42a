import json
import os
import subprocess
import sys

import pytest

from nmtbench.files import atomic_dir, read_yaml, write_json
from nmtbench.param_blocks import ConfigError


def test_write_json_replaces_atomically(tmp_path, monkeypatch):
    path = tmp_path / "metrics" / "m.json"
    write_json(path, {"bleu": 1.0})
    assert path.read_text() == '{\n  "bleu": 1.0\n}\n'
    assert path.stat().st_mode & 0o777 == 0o644

    def interrupted(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", interrupted)
    with pytest.raises(OSError, match="disk full"):
        write_json(path, {"bleu": 2.0})
    assert json.loads(path.read_text()) == {"bleu": 1.0}
    assert [p.name for p in path.parent.iterdir()] == ["m.json"]


def test_atomic_dir_keeps_the_old_output_when_the_block_fails(tmp_path):
    out = tmp_path / "prepared"
    with atomic_dir(out) as tmp:
        (tmp / "a.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as tmp:
            (tmp / "a.txt").write_text("half")
            raise RuntimeError("interrupted")
    assert (out / "a.txt").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["prepared"]


def test_a_writer_removes_what_killed_writers_left_and_nothing_else(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (tmp_path / f".m.json.{dead}.abc.tmp").write_text("half")  # a write killed before its rename
    (tmp_path / f".prepared.{dead}.xyz").mkdir()  # a folder killed likewise
    (tmp_path / f".m.json.{os.getpid()}.def.tmp").write_text("live")  # a writer still running
    (tmp_path / ".m.json.notapid.tmp").write_text("someone else's")
    write_json(tmp_path / "m.json", {"bleu": 1.0})
    with atomic_dir(tmp_path / "prepared") as tmp:
        (tmp / "a.txt").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["m.json", "prepared", f".m.json.{os.getpid()}.def.tmp", ".m.json.notapid.tmp"])


@pytest.mark.parametrize("text, message", [
    ("train:\n  lr: 0.1\n  max_steps: 5\n  lr: 0.2\n", "duplicate key 'lr' under train (lines 2 and 4)"),
    ("models:\n  a:\n    family: rnn\n  a:\n    family: cnn\n", "duplicate key 'a' under models (lines 2 and 4)"),
    ("seeds: [1]\nseeds: [2]\n", "duplicate key 'seeds' at the top level (lines 1 and 2)"),
    ("train: {lr: 0.1, lr: 0.2}\n", "duplicate key 'lr' under train (line 1, twice)"),
    ("space:\n- {low: 1}\n- {low: 1,\n   low: 2}\n", "duplicate key 'low' under space[1] (lines 3 and 4)"),
])
def test_a_key_given_twice_is_refused_with_both_lines(tmp_path, text, message):
    """PyYAML kept the last silently; DVC, reading params.yaml with ruamel.yaml, refused it in many lines."""
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(ConfigError) as error:
        read_yaml(tmp_path / "params.yaml")
    assert str(error.value) == f"{tmp_path / 'params.yaml'}: {message}; keep one"


def test_a_merge_key_and_the_keys_beside_it_are_no_duplicates(tmp_path):
    (tmp_path / "p.yaml").write_text("base: &base {lr: 0.1}\ntrain:\n  <<: *base\n  lr: 0.2\n")
    assert read_yaml(tmp_path / "p.yaml") == {"base": {"lr": 0.1}, "train": {"lr": 0.2}}
