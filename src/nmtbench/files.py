"""Files in and out: atomic writers, so a reader (DVC, the next stage, a user) sees the old output or the new one,
never half; and the YAML reader that refuses a key given twice."""
from __future__ import annotations

import contextlib
import csv
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from nmtbench.param_blocks import ConfigError


def temp_prefix(final: Path) -> str:
    """Prefix of a temporary name beside final, holding this process' id.

    A process killed while writing leaves its temporary file or folder behind; the next writer of
    final removes those whose process is gone, so leftovers never pile up beside the outputs.
    """
    prefix = f".{final.name}."
    for leftover in final.parent.glob(glob.escape(prefix) + "*"):
        pid = leftover.name[len(prefix):].split(".")[0]
        if pid.isdigit() and not running(int(pid)):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
    return f"{prefix}{os.getpid()}."


def remove(path: Path) -> None:
    """Delete the file, link or folder at path, if there is one."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0 checks that the process exists and sends nothing
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


class PidLock:
    """One process at a time: a file holding the holder's pid, taken over when that process is gone (killed
    without cleaning up). refusal: the one-line error while another process holds it, {pid} standing for its pid."""

    def __init__(self, path: Path, refusal: str):
        self.path, self.refusal = Path(path), refusal

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):  # a lock left by a dead process is removed, then taken
            try:
                descriptor = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                owner = lock_owner(self.path)
                if owner and running(owner):
                    raise ConfigError(self.refusal.replace("{pid}", str(owner))) from None
                self.path.unlink(missing_ok=True)
                continue
            os.write(descriptor, f"{os.getpid()}\n".encode())
            os.close(descriptor)
            return self
        raise ConfigError(f"{self.path}: could not take the lock; delete it if the process it names is gone, "
                          "then rerun")

    def __exit__(self, *exc):
        self.path.unlink(missing_ok=True)


def lock_owner(path: Path) -> int:
    """The pid a PidLock's file holds; 0 when there is none."""
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return 0


def write_bytes(path: Path, data: bytes) -> None:
    """Write data so that readers (DVC, the next stage, a resumed run) see the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes the file private; outputs are not
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, obj: Any) -> None:
    """Atomically write obj as indented JSON (the format `dvc metrics show` reads)."""
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a temp folder beside final that replaces final only if the block succeeds; else it is removed.

    Readers thus see the old complete output or the new complete output, never a half-written one.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(final), dir=final.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the output is not
    try:
        yield tmp
        old = tmp.with_name(tmp.name + ".old")
        if final.exists():
            final.rename(old)  # rename cannot replace a non-empty folder, so move the old one aside first
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_json(path: str | Path, fix: str = "delete it and rerun the stage that writes it") -> Any:
    """The JSON document in path (a metrics file, a comparison); one cut short (a copy interrupted, a disk that
    filled) or not UTF-8 becomes one line naming the file and fix, where json's own words name neither."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} is not valid JSON ({error.msg} at line {error.lineno}); {fix}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start}); {fix}") from None


def read_csv(path: str | Path, fix: str = "restore it (git or dvc checkout) or rerun the stage that writes it"
             ) -> list[dict[str, str]]:
    """The rows of a CSV file (a learning curve), each a dict by the header's names; one cut short (a copy
    interrupted, a disk that filled) becomes one line naming the file, the line and fix, where csv gives a cut row's
    missing cells as None and the readers fail far from it, or read fewer epochs than ran."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    header = next(csv.reader(lines[:1]), [])
    rows = []
    for number, cells in enumerate(csv.reader(lines[1:]), 2):
        if len(cells) != len(header) or (number == len(lines) and not text.endswith("\n")):
            raise ConfigError(f"{path}: line {number} is cut short ({len(cells)} of {len(header)} columns, or no "
                              f"line end); {fix}")
        rows.append(dict(zip(header, cells)))
    return rows


def read_yaml(path: str | Path) -> Any:
    """The YAML document in path; a missing file, a syntax error or a key given twice becomes one line naming the
    file. A missing file is taken for the params file: every other file read here is checked by its reader first,
    and `nmtbench workspace` reads the project's params.yaml here, not through load_params."""
    if not Path(path).is_file():
        raise ConfigError(f"{path}: no such params file; run from the project root or pass --params")
    try:
        return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=UniqueKeyLoader)
    except DuplicateKey as error:
        raise ConfigError(f"{path}: {error}; keep one") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"{path}{where}: not valid YAML ({problem}); fix the syntax there") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}); save it as UTF-8") from None


class DuplicateKey(Exception):
    """A mapping of a YAML document that gives one key twice."""


class UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a key given twice in one mapping. PyYAML keeps the last silently, so `nmtbench check`
    passed a params.yaml that DVC, which reads it with ruamel.yaml, then refused in many lines."""

    def construct_document(self, node: yaml.Node) -> Any:
        refuse_duplicates(node)
        return super().construct_document(node)


def refuse_duplicates(node: yaml.Node, where: str = "") -> None:
    """Raise DuplicateKey for the first mapping under node (at the dotted key where) that gives a key twice."""
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            refuse_duplicates(item, f"{where}[{index}]")
    if not isinstance(node, yaml.MappingNode):
        return
    lines = {}  # (tag, text) of each key -> its line
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":  # `<<:` merges, no key
            first, line = lines.get((key.tag, key.value)), key.start_mark.line + 1
            if first:
                under = f"under {where}" if where else "at the top level"
                at = f"lines {first} and {line}" if first != line else f"line {line}, twice"  # {lr: 1, lr: 2}
                raise DuplicateKey(f"duplicate key {key.value!r} {under} ({at})")
            lines[key.tag, key.value] = line
        refuse_duplicates(value, f"{where}.{key.value}" if where else str(key.value))
