"""The prepare stage: verified raw Multi30k -> filtered sentence pairs (a DatasetDict) and their statistics."""
from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path

from datasets import Dataset, DatasetDict, Features, Value, load_from_disk

from nmtbench.config import DataConfig, Params
from nmtbench.data.sources import DataError, fetch_split
from nmtbench.files import atomic_dir, write_json

# Reasons a pair is dropped, in the order they are checked; a pair counts under the first that applies.
DROP_REASONS = ("empty", "too_long", "length_ratio", "max_pairs")
TEXT_FEATURES = Features({"src": Value("string"), "tgt": Value("string")})


def read_lines(path: Path) -> list[str]:
    """Lines of a gzip file without their newline, decoded as strict UTF-8; anything else is left exactly as is."""
    lines = []
    with gzip.open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                lines.append(raw.decode("utf-8").removesuffix("\n"))
            except UnicodeDecodeError as e:
                raise DataError(f"{path}, line {number}: not valid UTF-8 ({e.reason} at byte {e.start}); "
                                "the file is corrupt, re-download it or fix the mirror") from e
    return lines


def drop_reason(src: str, tgt: str, data: DataConfig, is_train: bool) -> str | None:
    src_len, tgt_len = len(src.split()), len(tgt.split())
    if not src_len or not tgt_len:  # whitespace-only counts as empty
        return "empty"
    if is_train and max(src_len, tgt_len) > data.max_length:
        return "too_long"
    if is_train and max(src_len, tgt_len) / min(src_len, tgt_len) > data.max_length_ratio:
        return "length_ratio"
    return None


def length_stats(texts: list[str]) -> dict:
    lengths = [len(t.split()) for t in texts]
    return {"tokens": sum(lengths), "mean_length": round(sum(lengths) / len(lengths), 4) if lengths else 0.0,
            "max_length": max(lengths, default=0)}


def prepare_split(split: str, data: DataConfig, mirror: Path | None, cache_dir: Path,
                  checksums: Mapping[str, str] | None) -> tuple[dict[str, list[str]], dict]:
    paths = [fetch_split(split, lang, mirror, cache_dir, checksums) for lang in (data.src_lang, data.tgt_lang)]
    src_lines, tgt_lines = (read_lines(p) for p in paths)
    if len(src_lines) != len(tgt_lines):
        raise DataError(f"{paths[0]} has {len(src_lines)} lines but {paths[1]} has {len(tgt_lines)}; "
                        "parallel files must align line by line, re-download them or fix the mirror")
    is_train = split == "train"
    dropped = dict.fromkeys(DROP_REASONS, 0)
    pairs = {"src": [], "tgt": []}
    for src, tgt in zip(src_lines, tgt_lines):
        reason = drop_reason(src, tgt, data, is_train)
        if reason:
            dropped[reason] += 1
        else:
            pairs["src"].append(src)
            pairs["tgt"].append(tgt)
    limit = data.max_train_pairs if is_train else data.max_eval_pairs
    if limit is not None and len(pairs["src"]) > limit:
        dropped["max_pairs"] = len(pairs["src"]) - limit
        pairs = {side: texts[:limit] for side, texts in pairs.items()}
    stats = {"lines": len(src_lines), "pairs": len(pairs["src"]), "dropped": dropped,
             "src": length_stats(pairs["src"]), "tgt": length_stats(pairs["tgt"])}
    return pairs, stats


def prepare(params: Params | DataConfig, mirror: Path | None, out_dir: Path = Path("data/prepared"),
            stats_path: Path = Path("data/stats.json"), cache_dir: Path = Path("data/raw"),
            checksums: Mapping[str, str] | None = None) -> dict:
    """Run the prepare stage; returns the statistics also written to stats_path.

    Every split is read and checked before anything is written, so a data error leaves old outputs untouched.
    """
    data = params.data if isinstance(params, Params) else params
    splits = list(dict.fromkeys(["train", "val", *data.eval_splits]))
    prepared = {split: prepare_split(split, data, mirror, cache_dir, checksums) for split in splits}
    dataset = DatasetDict({split: Dataset.from_dict(pairs, features=TEXT_FEATURES)
                           for split, (pairs, _) in prepared.items()})
    stats = {"pair": data.pair, "splits": {split: split_stats for split, (_, split_stats) in prepared.items()}}
    with atomic_dir(out_dir) as tmp:
        dataset.save_to_disk(str(tmp))
    write_json(Path(stats_path), stats)
    return stats


def load_prepared(prepared_dir: Path = Path("data/prepared")) -> DatasetDict:
    if not (Path(prepared_dir) / "dataset_dict.json").is_file():
        raise DataError(f"no prepared dataset in {prepared_dir}; run the prepare stage first: dvc repro prepare")
    return load_from_disk(str(prepared_dir))
