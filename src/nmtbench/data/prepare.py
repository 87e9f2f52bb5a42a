"""The prepare stage: raw parallel text (data.source) -> filtered sentence pairs (a DatasetDict) and their statistics.

Each split is read into a memory-mapped Arrow file, its pairs measured by a batched map (in parallel for large
splits), the statistics and the kept rows computed on those columns with numpy, and the kept rows saved.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from datasets import Dataset, DatasetDict, Features, Value, load_from_disk

from nmtbench.config import DataConfig, Params
from nmtbench.data.preprocess import preprocess
from nmtbench.data.readers import read_split
from nmtbench.data.sources import DataError
from nmtbench.files import atomic_dir, write_json

# Reasons a pair is dropped, in the order they are checked; a pair counts under the first that applies.
DROP_REASONS = ("empty", "too_long", "length_ratio", "max_pairs")
KEPT = -1
MEASURES = Features({"src_len": Value("int32"), "tgt_len": Value("int32"), "reason": Value("int8")})
# From this many pairs a split is measured by data.num_proc processes; below, starting them costs more than they save.
PARALLEL_FROM = 100_000


def drop_reason(src_len: int, tgt_len: int, data: DataConfig, is_train: bool) -> str | None:
    if not src_len or not tgt_len:  # whitespace-only counts as empty
        return "empty"
    if is_train and max(src_len, tgt_len) > data.max_length:
        return "too_long"
    if is_train and max(src_len, tgt_len) / min(src_len, tgt_len) > data.max_length_ratio:
        return "length_ratio"
    return None


def measure(batch: dict, data: DataConfig, is_train: bool) -> dict:
    """Whitespace-token lengths of a batch of pairs, and the index in DROP_REASONS of why each is dropped (or KEPT)."""
    src_len, tgt_len = ([len(text.split()) for text in batch[side]] for side in ("src", "tgt"))
    reasons = (drop_reason(s, t, data, is_train) for s, t in zip(src_len, tgt_len))
    return {"src_len": src_len, "tgt_len": tgt_len,
            "reason": [KEPT if reason is None else DROP_REASONS.index(reason) for reason in reasons]}


def length_stats(lengths: np.ndarray) -> dict:
    tokens = int(lengths.sum())
    return {"tokens": tokens, "mean_length": round(tokens / len(lengths), 4) if len(lengths) else 0.0,
            "max_length": int(lengths.max(initial=0))}


def filter_split(split: str, pairs: Dataset, data: DataConfig, work_dir: Path) -> tuple[Dataset, dict]:
    is_train = split == "train"
    if not len(pairs):
        raise DataError(f"{split} has no sentence pairs: the source has no lines for it; add them or drop the split")
    columns = pairs.map(measure, batched=True, remove_columns=["src", "tgt"], features=MEASURES,
                        num_proc=_processes(len(pairs), data), fn_kwargs={"data": data, "is_train": is_train},
                        cache_file_name=str(work_dir / f"{split}.arrow"),
                        desc=f"measuring {split}").with_format("numpy")[:]
    reason = columns["reason"]
    kept = np.flatnonzero(reason == KEPT)
    dropped = {name: int((reason == index).sum()) for index, name in enumerate(DROP_REASONS)}
    limit = data.max_train_pairs if is_train else data.max_eval_pairs
    if limit is not None and len(kept) > limit:
        dropped["max_pairs"] = len(kept) - limit
        kept = kept[:limit]
    stats = {"lines": len(pairs), "pairs": len(kept), "dropped": dropped,
             "src": length_stats(columns["src_len"][kept]), "tgt": length_stats(columns["tgt_len"][kept])}
    if not len(kept):  # only empty pairs are dropped outside train
        counts = ", ".join(f"{n} {reason}" for reason, n in dropped.items() if n)
        fix = "loosen data.max_length and data.max_length_ratio" if is_train else "fix the source"
        raise DataError(f"{split} has no sentence pairs: all {len(pairs)} were dropped ({counts}); {fix}")
    return pairs.select(kept), stats


def _processes(pairs: int, data: DataConfig) -> int | None:
    return (data.num_proc or os.cpu_count()) if pairs >= PARALLEL_FROM else None


def prepare(params: Params | DataConfig, mirror: Path | None = None, out_dir: Path = Path("data/prepared"),
            stats_path: Path = Path("data/stats.json"), cache_dir: Path = Path("data/raw"),
            checksums: Mapping[str, str] | None = None) -> dict:
    """Run the prepare stage; returns the statistics also written to stats_path.

    mirror, cache_dir and checksums concern the multi30k source only. Every split is read and checked before
    anything is written, so a data error leaves old outputs untouched.
    """
    data = params.data if isinstance(params, Params) else params
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.work.", dir=out_dir.parent) as work:
        kept, stats, inputs = {}, {}, {}
        for split in data.splits:
            raw = read_split(data, split, Path(work), mirror, cache_dir, checksums)
            pairs = preprocess(raw.pairs, data.preprocess, data.src_lang, data.tgt_lang,
                               str(Path(work) / f"{split}.preprocessed.arrow"), _processes(len(raw.pairs), data))
            kept[split], stats[split] = filter_split(split, pairs, data, Path(work))
            inputs.update(raw.inputs)
        with atomic_dir(out_dir) as tmp:
            DatasetDict(kept).save_to_disk(str(tmp))
    summary = {"pair": data.pair, "splits": stats, "source": data.source.kind, "preprocess": data.preprocess,
               "inputs": inputs}
    write_json(Path(stats_path), summary)
    return summary


def load_prepared(prepared_dir: Path = Path("data/prepared")) -> DatasetDict:
    if not (Path(prepared_dir) / "dataset_dict.json").is_file():
        raise DataError(f"no prepared dataset in {prepared_dir}; run the prepare stage first: dvc repro prepare")
    return load_from_disk(str(prepared_dir))

