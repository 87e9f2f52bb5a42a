"""Experiment tracking: the W&B logger for training, metrics files for DVC, and offline run reading.

wandb and lightning are imported inside the functions that need them, so stages that only
write metrics do not pay a second of import time for them.
"""
from __future__ import annotations

import json
import os
import re
import struct
import uuid
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from nmtbench.config import WandbConfig
from nmtbench.provenance import describe

# W&B's transaction log (.wandb) uses LevelDB's log format: 32 KiB blocks of chunks, each with a
# 7-byte header (crc32 over type byte + data, length, type). Records larger than what is left of a
# block are split into FIRST, MIDDLE..., LAST chunks. The file opens with its own 7-byte header.
_FILE_HEADER = struct.Struct("<4sHB")  # b":W&B", magic 0xBEE1, format version
_CHUNK_HEADER = struct.Struct("<IHB")  # crc32, data length, chunk type
_BLOCK_SIZE = 32 * 1024
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


class TrackingError(ValueError):
    """W&B online without a usable account; the message says how to log in or stay offline."""


ONLINE_FIX = ("run `wandb login` (or set WANDB_API_KEY) on a machine with network, or log offline: wandb.mode: "
              "offline in params.yaml, or WANDB_MODE=offline for one command")


def require_wandb_login() -> None:
    """Check the API key before an online run starts: without one, wandb.init fails only after its
    90-second timeout, with a traceback; this fails in seconds, in one line."""
    import wandb

    try:
        if wandb.login(prompt=False, verify=True):
            return
        problem = "no W&B API key is set"
    except (wandb.errors.AuthenticationError, wandb.errors.CommError) as error:
        problem = f"W&B refused the API key or could not be reached ({type(error).__name__})"
    raise TrackingError(f"W&B online: {problem}; {ONLINE_FIX}")


def run_tags(name: str, block: dict, seed: int) -> list[str]:
    """Tags of every run of one model (training and evaluation), so a dashboard can filter and group by them."""
    return [name, block["family"], f"seed{seed}"]


def experiment_group(cfg: WandbConfig) -> str:
    """The W&B group of the experiment a stage runs in: `wandb.group`, followed inside `dvc exp run` by the DVC
    experiment's name (DVC exports it as DVC_EXP_NAME), so each experiment's runs group apart without a change
    to the wandb block, which the train and evaluate stages depend on."""
    experiment = os.environ.get("DVC_EXP_NAME")
    return f"{cfg.group}-{experiment}" if experiment else cfg.group


def run_id(name: str, job_type: str) -> str:
    """A run id a person reads in the offline folder's name (offline-run-<time>-<id>): job type and run name,
    then random letters, since W&B ids must be unique in a project and a stage may run again."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{job_type}-{name}")[:48]
    return f"{readable}-{uuid.uuid4().hex[:6]}"


def run_settings(cfg: WandbConfig, name: str, save_dir: Path, config: dict, tags: Sequence[str],
                 job_type: str) -> dict | None:
    """wandb.init's arguments for one run, or None when tracking is disabled.

    Every run of an experiment shares its group (`experiment_group`); `job_type` tells a model's training
    run from its evaluation run, and the run id starts with both (`run_id`). The config holds what
    produced the run (nmtbench.provenance); `finish_run` completes it with the stage's wall time.

    The mode comes from params.yaml (`wandb.mode`) unless the user exported WANDB_MODE, which wins:
    that lets one command go online (or disabled) without editing params.yaml and so without
    invalidating DVC stages. Offline runs need no account; they land in
    `<save_dir>/wandb/offline-run-<YYYYmmdd_HHMMSS>-<id>/` and can be uploaded later with `wandb sync`.
    """
    mode = os.environ.get("WANDB_MODE") or cfg.mode
    if mode == "disabled":
        return None
    if mode == "online":
        require_wandb_login()
    import wandb

    Path(save_dir).mkdir(parents=True, exist_ok=True)
    return {"name": name, "id": run_id(name, job_type), "dir": str(save_dir), "project": cfg.project,
            "group": experiment_group(cfg), "mode": mode, "tags": list(tags),
            "config": {**config, "provenance": describe()}, "job_type": job_type,
            "settings": wandb.Settings(quiet=True)}  # no banner or run history: the stage prints its result


def start_run(cfg: WandbConfig, name: str, save_dir: Path, config: dict, tags: Sequence[str] = (),
              job_type: str = "evaluate"):
    """A W&B run for a stage that trains nothing (evaluation, comparison), or None when tracking is disabled.

    wandb.init itself: Lightning's logger would import Lightning, about 4 s of CPU per stage, for nothing."""
    settings = run_settings(cfg, name, save_dir, config, tags, job_type)
    if settings is None:
        return None
    import wandb

    return wandb.init(**settings)


def make_wandb_logger(cfg: WandbConfig, name: str, save_dir: Path, config: dict, tags: Sequence[str] = ()):
    """A Lightning WandbLogger for one training run (`run_settings`), or None when tracking is disabled."""
    settings = run_settings(cfg, name, save_dir, config, tags, job_type="train")
    if settings is None:
        return None
    from lightning.pytorch.loggers import WandbLogger

    # mode goes straight to wandb.init; WandbLogger's own offline=True would set WANDB_MODE for the
    # whole process, leaking into every later run.
    logger = WandbLogger(save_dir=settings.pop("dir"), **settings)
    # Lightning passes anonymous=None to wandb.init, which W&B then warns has no effect, once per run
    logger._wandb_init.pop("anonymous", None)
    return logger


def finish_run(run, summary: dict, provenance: dict) -> None:
    """Record the final figures in the run summary and the stage's provenance in its config; close the run
    (a training's: its logger's `experiment`).

    `finish` returns before the offline `.wandb` file is complete; `teardown` waits for it, so a
    reader in the same process (a test, a later stage) sees every record.
    """
    import wandb

    run.config.update({"provenance": provenance}, allow_val_change=True)
    run.summary.update(summary)
    run.finish()
    wandb.teardown()


def log_tables(run, tables: dict[str, tuple[list[str], list[list]]]) -> None:
    """Log {key: (columns, rows)} as wandb.Tables to the run."""
    import wandb

    run.log({key: wandb.Table(columns=columns, data=rows) for key, (columns, rows) in tables.items()})


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
