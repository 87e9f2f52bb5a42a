"""W&B's offline runs read back, so a test checks what a stage logged: the decoder of a run's .wandb transaction
log, and the tables its summary names."""
from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# W&B's transaction log (.wandb) uses LevelDB's log format: 32 KiB blocks of chunks, each with a
# 7-byte header (crc32 over type byte + data, length, type). Records larger than what is left of a
# block are split into FIRST, MIDDLE..., LAST chunks. The file opens with its own 7-byte header.
_FILE_HEADER = struct.Struct("<4sHB")  # b":W&B", magic 0xBEE1, format version
_CHUNK_HEADER = struct.Struct("<IHB")  # crc32, data length, chunk type
_BLOCK_SIZE = 32 * 1024
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def read_offline_run(run_dir: Path) -> dict:
    """Read an offline W&B run folder into {"run": {...}, "config": {...}, "history": [row, ...], "summary": {...}}.

    "run" holds the run's name, group, job_type and tags. A logged wandb.Table appears in the
    summary as a reference {"_type": "table-file", "path": ...}; `read_table` reads it.

    wandb.Api only sees synced runs, and wandb 0.31 ships no Python reader for the run's .wandb
    transaction log, so this decodes it directly. History rows keep W&B's own keys (_step,
    _timestamp, _runtime, and trainer/global_step from WandbLogger); W&B's internal `_wandb` entry is
    dropped from config and summary.

    Read a run once its process has exited (or after wandb.teardown()): run.finish() returns before
    wandb-core has flushed the file, and a log cut short yields only its complete records.
    """
    from wandb.proto import wandb_internal_pb2 as pb

    run_dir = Path(run_dir)
    logs = sorted(run_dir.glob("run-*.wandb"))
    if len(logs) != 1:
        raise FileNotFoundError(f"{run_dir}: expected one run-<id>.wandb file, found {len(logs)}; "
                                "pass an offline-run-* folder from a wandb/ directory")
    run: dict = {}
    config: dict = {}
    summary: dict = {}
    history: list[dict] = []
    for data in _log_records(logs[0]):
        record = pb.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = {"name": record.run.display_name, "group": record.run.run_group,
                   "job_type": record.run.job_type, "tags": list(record.run.tags)}
            _apply(config, record.run.config)
        elif kind == "config":
            _apply(config, record.config)
        elif kind == "summary":
            _apply(summary, record.summary)
        elif kind == "history":
            row: dict = {}
            for item in record.history.item:
                _set(row, _keys(item), json.loads(item.value_json))
            history.append(row)
    config.pop("_wandb", None)
    summary.pop("_wandb", None)
    return {"run": run, "config": config, "history": history, "summary": summary}


def read_table(run_dir: Path, reference: dict) -> dict:
    """The {"columns": [...], "data": [[...], ...]} of a table an offline run's summary refers to."""
    path = Path(run_dir) / "files" / reference["path"]
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the table this run's summary names is missing; "
                                "re-run the stage that logged it")
    return json.loads(path.read_text())


def _log_records(path: Path) -> Iterator[bytes]:
    """Yield the serialised records of a .wandb transaction log, reassembling split records."""
    data = path.read_bytes()
    if len(data) < _FILE_HEADER.size:
        raise ValueError(f"{path}: too short to be a W&B run log")
    ident, magic, version = _FILE_HEADER.unpack_from(data)
    if (ident, magic, version) != (b":W&B", 0xBEE1, 0):
        raise ValueError(f"{path}: not a version-0 W&B run log (header {ident!r}, {magic:#x}, v{version})")
    pos = _FILE_HEADER.size
    parts: list[bytes] = []
    while True:
        left_in_block = _BLOCK_SIZE - pos % _BLOCK_SIZE
        if left_in_block < _CHUNK_HEADER.size:
            pos += left_in_block  # the writer zero-fills block tails too short for a chunk header
            continue
        start = pos + _CHUNK_HEADER.size
        if start > len(data):
            return
        crc, length, chunk_type = _CHUNK_HEADER.unpack_from(data, pos)
        chunk = data[start:start + length]
        if len(chunk) < length:
            return  # a run still writing, or killed mid-write, ends in a partial chunk
        known_type = chunk_type in (_FULL, _FIRST, _MIDDLE, _LAST)
        if not known_type or zlib.crc32(chunk, zlib.crc32(bytes([chunk_type]))) != crc:
            raise ValueError(f"{path}: corrupt chunk at byte {pos}")
        pos = start + length
        if chunk_type in (_FULL, _FIRST):
            parts = []
        parts.append(chunk)
        if chunk_type in (_FULL, _LAST):
            yield b"".join(parts)


def _keys(item) -> list[str]:
    return list(item.nested_key) or [item.key]


def _set(target: dict, keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


def _apply(target: dict, record) -> None:
    """Apply a config or summary record: its nested-key updates, then its removals."""
    for item in record.update:
        _set(target, _keys(item), json.loads(item.value_json))
    for item in record.remove:
        *parents, last = _keys(item)
        for key in parents:
            target = target.get(key, {})
        target.pop(last, None)
