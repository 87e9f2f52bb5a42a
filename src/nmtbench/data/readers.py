"""Raw parallel text -> one memory-mapped Arrow dataset of `src`/`tgt` strings per split, for each source kind.

Text is streamed line by line into Arrow files under a work folder (datasets' from_generator), never held in
Python lists, and decoded as strict UTF-8 with nothing changed but the newline and a byte-order mark opening a
file: a bad byte, a short line or a missing column is reported with its file and line. Every reader also names its
inputs with their sha256.
"""
from __future__ import annotations

import gzip
import json
from contextlib import closing
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

import datasets
from datasets import Dataset, Features, Value

from nmtbench.config import DataConfig, SourceConfig
from nmtbench.data.sources import DataError, fetch_split, sha256

TEXT_FEATURES = Features({"src": Value("string"), "tgt": Value("string")})
TABLE_SUFFIXES = (".tsv", ".tsv.gz", ".jsonl", ".jsonl.gz", ".parquet")
# The end of each error about a file: Multi30k's files are checksummed, so a bad one is a bad copy.
MIRROR_FIXES = {"utf8": "the file is corrupt, re-download it or fix the mirror",
                "align": "re-download them or fix the mirror"}
FILE_FIXES = {"utf8": "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
              "align": "line n of one file must translate line n of the other"}


@dataclass
class RawSplit:
    pairs: Dataset  # columns src, tgt
    inputs: dict[str, str]  # each input file (or hub split) -> sha256 of its bytes


def read_split(data: DataConfig, split: str, work_dir: Path, mirror: Path | None = None,
               cache_dir: Path = Path("data/raw"), checksums=None) -> RawSplit:
    langs = (data.src_lang, data.tgt_lang)
    source = data.source
    if source.kind == "multi30k":
        paths = [fetch_split(split, lang, mirror, cache_dir, checksums) for lang in langs]
        return read_line_files(*paths, work_dir, MIRROR_FIXES)
    if source.kind == "files":
        return read_folder(Path(source.path), split, langs, work_dir)
    return read_hub(source, split, langs)


def read_folder(folder: Path, split: str, langs: tuple[str, str], work_dir: Path) -> RawSplit:
    """<split>.<lang>[.gz] for both languages, else one <split>.tsv/.jsonl[.gz]/.parquet with a column per language."""
    if not folder.is_dir():
        raise DataError(f"data.source.path: {folder} is not a folder; point it at the folder holding the corpus files")
    line_files = [next((p for p in (folder / f"{split}.{lang}", folder / f"{split}.{lang}.gz") if p.is_file()), None)
                  for lang in langs]
    if all(line_files):
        return read_line_files(*line_files, work_dir, FILE_FIXES)
    table = next((folder / f"{split}{suffix}" for suffix in TABLE_SUFFIXES if (folder / f"{split}{suffix}").is_file()),
                 None)
    if table and table.suffix == ".parquet":
        pairs = pairs_from_columns(Dataset.from_parquet(str(table), cache_dir=str(work_dir)), langs, str(table))
        return RawSplit(pairs, {table.name: sha256(table)})
    if table:
        rows = generate(table_rows, {"path": str(table), "langs": langs}, work_dir)
        return RawSplit(rows, {table.name: sha256(table)})
    if any(line_files):
        lang = langs[line_files.index(None)]
        has = sorted({p.name.removesuffix(".gz").split(".", 1)[1] for p in folder.glob(f"{split}.*")}
                     - {"tsv", "jsonl"})
        raise DataError(f"{folder} has no {split}.{lang} or {split}.{lang}.gz: the corpus has {split} in "
                        f"{', '.join(has)}; set data.src_lang and data.tgt_lang to two of them or add the file")
    raise DataError(f"{folder} has no split {split}: expected {split}.{langs[0]} and {split}.{langs[1]} (or .gz), "
                    f"or one {split}.tsv, .jsonl or .parquet; add it, or name another split in data.eval_splits")


def read_line_files(src: Path, tgt: Path, work_dir: Path, fixes: dict[str, str]) -> RawSplit:
    pairs = generate(line_pairs, {"src": str(src), "tgt": str(tgt), "fixes": fixes}, work_dir)
    return RawSplit(pairs, {src.name: sha256(src), tgt.name: sha256(tgt)})


def read_hub(source: SourceConfig, split: str, langs: tuple[str, str]) -> RawSplit:
    theirs = source.dataset_split(split)
    label = "/".join(filter(None, (source.name, source.config, theirs)))
    try:
        dataset = datasets.load_dataset(source.name, source.config, split=theirs, revision=source.revision)
    except (datasets.exceptions.DatasetsError, OSError, ValueError, RuntimeError) as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise DataError(f"could not load {label} with datasets.load_dataset: {reason}; check data.source.name, config "
                        "and splits; without network set HF_DATASETS_OFFLINE=1 and have the dataset in the cache "
                        f"({datasets.config.HF_DATASETS_CACHE})") from e
    inputs = {label: sha256(*(Path(f["filename"]) for f in dataset.cache_files))}
    return RawSplit(pairs_from_columns(dataset, langs, f"hub dataset {label}"), inputs)


def pairs_from_columns(dataset: Dataset, langs: tuple[str, str], where: str) -> Dataset:
    """The two language columns as src and tgt: top-level columns, or fields of a `translation` column."""
    names = {lang: lang for lang in langs}
    if "translation" in dataset.column_names and not set(langs) <= set(dataset.column_names):
        dataset = dataset.flatten()  # translation.<lang> columns, still memory-mapped
        names = {lang: f"translation.{lang}" for lang in langs}
    for lang in langs:
        if names[lang] not in dataset.column_names:
            raise DataError(f"{where} has no column {lang!r} (it has {', '.join(dataset.column_names)}); set "
                            "data.src_lang and data.tgt_lang to two of its languages")
    dataset = dataset.select_columns(list(names.values())).rename_columns(dict(zip(names.values(), ("src", "tgt"))))
    return dataset if dataset.features == TEXT_FEATURES else dataset.cast(TEXT_FEATURES)


def generate(generator, gen_kwargs: dict, work_dir: Path) -> Dataset:
    """An Arrow dataset in work_dir written from generator's rows; a DataError it raises comes out unwrapped."""
    with closing(generator(**gen_kwargs)) as rows:
        if next(rows, None) is None:  # from_generator refuses to build a dataset without rows
            return Dataset.from_dict({"src": [], "tgt": []}, features=TEXT_FEATURES)
    try:
        return Dataset.from_generator(generator, features=TEXT_FEATURES, gen_kwargs=gen_kwargs,
                                      cache_dir=str(work_dir))
    except datasets.exceptions.DatasetGenerationError as e:
        if isinstance(e.__cause__, DataError):
            raise e.__cause__ from None
        raise


def open_binary(path: Path):
    return gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")


def decode(raw: bytes, path: str, number: int, fixes: dict[str, str]) -> str:
    """One line without its newline, strict UTF-8; anything else (a \\r, spaces) is kept exactly, but a byte-order
    mark opening line 1: an editor's mark of UTF-8 (utf-8-sig), not text of the first sentence or header."""
    try:
        return raw.decode("utf-8-sig" if number == 1 else "utf-8").removesuffix("\n")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}, line {number}: not valid UTF-8 ({e.reason} at byte {e.start}); "
                        f"{fixes['utf8']}") from e


def line_pairs(src: str, tgt: str, fixes: dict[str, str]):
    with open_binary(src) as s, open_binary(tgt) as t:
        for number, (a, b) in enumerate(zip_longest(s, t), start=1):
            if a is None or b is None:  # one file ended: count the rest of the other for the message
                counts = [number - 1 + (line is not None) + sum(1 for _ in f) for line, f in ((a, s), (b, t))]
                raise DataError(f"{src} has {counts[0]} lines but {tgt} has {counts[1]}; parallel files must align "
                                f"line by line, {fixes['align']}")
            yield {"src": decode(a, src, number, fixes), "tgt": decode(b, tgt, number, fixes)}


def table_rows(path: str, langs: tuple[str, str]):
    """Rows of a TSV file (a header naming the languages, one tab between columns) or of a JSON-lines file
    (one object a line, the languages as keys or inside a `translation` object)."""
    with open_binary(path) as f:
        if ".tsv" in Path(path).suffixes:
            header = decode(next(f, b""), path, 1, FILE_FIXES).split("\t")
            for lang in langs:
                if lang not in header:
                    raise DataError(f"{path}, line 1: the header has no column {lang!r} (it has {', '.join(header)}); "
                                    "name each column by its language, or set data.src_lang and data.tgt_lang")
            columns = [header.index(lang) for lang in langs]
            for number, raw in enumerate(f, start=2):
                fields = decode(raw, path, number, FILE_FIXES).split("\t")
                if len(fields) != len(header):
                    raise DataError(f"{path}, line {number}: {len(fields)} tab-separated column(s) but the header has "
                                    f"{len(header)} ({', '.join(header)}); "
                                    "put one tab between columns and none in a sentence")
                yield {"src": fields[columns[0]], "tgt": fields[columns[1]]}
            return
        for number, raw in enumerate(f, start=1):
            try:
                row = json.loads(decode(raw, path, number, FILE_FIXES))
            except json.JSONDecodeError as e:
                raise DataError(f"{path}, line {number}: not JSON ({e.msg}); write one JSON object a line") from e
            texts = row.get("translation", row) if isinstance(row, dict) else {}
            for lang in langs:
                if not isinstance(texts.get(lang), str):
                    raise DataError(f"{path}, line {number}: no text in column {lang!r}; give every line a string "
                                    f"for each of {', '.join(langs)}, or set data.src_lang and data.tgt_lang")
            yield {"src": texts[langs[0]], "tgt": texts[langs[1]]}
