"""What Multi30k holds: its languages, its splits, the names of its raw files and their checksums.

Below the params (nmtbench.config checks a Multi30k data block against it) and below the data stage that fetches
the files (nmtbench.data.sources). The checksums are the project's own copy, data/multi30k.sha256 in the package,
so a wrong mirror cannot vouch for itself.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

# What the packaged checksums cover; test_2017_flickr has no Czech.
MULTI30K_LANGUAGES = ("en", "de", "fr", "cs")
MULTI30K_SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr")


def load_checksums(path: Path | None = None) -> dict[str, str]:
    """File name -> sha256, in sha256sum format; by default the copy shipped with the package."""
    text = path.read_text() if path else resources.files("nmtbench").joinpath("data", "multi30k.sha256").read_text()
    return {name: digest for digest, name in (line.split() for line in text.splitlines() if line.strip())}


def file_name(split: str, lang: str) -> str:
    return f"{split}.{lang}.gz"
