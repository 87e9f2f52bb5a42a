"""A tiny Multi30k-shaped mirror with its own checksums, and the check that a refused prepare wrote nothing."""
from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

# en-de pairs chosen to exercise each filter of the prepare stage (run with max_length=8, max_length_ratio=3).
TINY_TRAIN = [
    ("A dog runs.", "Ein Hund rennt."),
    ("", "Leer."),                                      # empty
    ("   ", "Nur Leerzeichen."),                        # empty: whitespace only
    ("one two three four five six seven eight nine", "eins zwei drei vier fünf sechs sieben acht neun"),  # too_long
    ("a b c d e f g", "x y"),                           # length_ratio: 7 / 2 = 3.5
    ("Two  cats sleep. ", "Zwei Katzen schlafen."),     # kept exactly, double and trailing space included
    ("a b c", "x"),                                     # kept: ratio 3.0 is not above 3
    ("Grüße „quoted“ 漢字", "Ünïcödé ok"),
]
TINY_VAL = [
    ("A man sings.", "Ein Mann singt."),
    ("A woman.", ""),                                   # empty, dropped from val too
    ("one two three four five six seven eight nine ten", "eins"),  # long pairs are kept outside train
]
TINY_TEST_2016 = [("A cat.", "Eine Katze."), ("Two birds fly.", "Zwei Vögel fliegen.")]
TINY_TEST_2017 = [("Rain falls.", "Regen fällt.")]


def tiny_files() -> dict[str, list[str]]:
    """File name -> lines for en and de (fr copies en), with no test_2017_flickr.cs like the real dataset."""
    files = {}
    for split, pairs in (("train", TINY_TRAIN), ("val", TINY_VAL), ("test_2016_flickr", TINY_TEST_2016),
                         ("test_2017_flickr", TINY_TEST_2017)):
        files[f"{split}.en.gz"] = files[f"{split}.fr.gz"] = [src for src, _ in pairs]
        files[f"{split}.de.gz"] = [tgt for _, tgt in pairs]
    return files


def write_mirror(folder: Path, files: dict[str, list[str] | bytes] | None = None) -> tuple[Path, dict[str, str]]:
    """Write {file name: lines or raw bytes} gzipped into a new folder; returns (folder, checksums)."""
    folder.mkdir()
    checksums = {}
    for file_name, content in (tiny_files() if files is None else files).items():
        raw = content if isinstance(content, bytes) else "".join(f"{line}\n" for line in content).encode()
        path = folder / file_name
        path.write_bytes(gzip.compress(raw, mtime=0))
        checksums[file_name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return folder, checksums


def assert_nothing_written(tmp_path):
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["prepared"]  # no stats, no work or temp folder
    assert [p.name for p in (tmp_path / "out" / "prepared").iterdir()] == ["old-output"]
