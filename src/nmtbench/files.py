"""Atomic writers: a reader (DVC, the next stage, a user) sees the old output or the new one, never half."""
from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nmtbench.blocks import ConfigError


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
