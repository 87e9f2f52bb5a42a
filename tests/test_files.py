import json
import os
import subprocess
import sys

import pytest

from nmtbench.files import atomic_dir, write_json


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
