import json

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
