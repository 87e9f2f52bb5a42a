"""The Multi30k source: raw files from a local mirror or from upstream.

Either way the files are checked against the project's checksums (nmtbench.multi30k).
"""
from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from nmtbench.multi30k import file_name, load_checksums

MIRROR_ENV = "NMTBENCH_DATA_MIRROR"
UPSTREAM = "https://github.com/multi30k/dataset/raw/master/data/task1/raw"
MIRROR_FIX = f"point {MIRROR_ENV} at a folder holding the Multi30k raw files"


class DataError(ValueError):
    """Missing, corrupt or inconsistent data; the message names the file and the fix."""


def mirror_from_env() -> Path | None:
    value = os.environ.get(MIRROR_ENV)
    return Path(value) if value else None


def sha256(*paths: Path) -> str:
    """The digest of the files' bytes, one after the other."""
    digest = hashlib.sha256()
    for path in paths:
        with Path(path).open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, expected: str, label: str, fix: str) -> None:
    actual = sha256(path)
    if actual != expected:
        raise DataError(f"checksum mismatch for {label}: expected {expected}, got {actual}; {fix}")


def fetch_split(split: str, lang: str, mirror: Path | None, cache_dir: Path,
                checksums: Mapping[str, str] | None = None, base_url: str = UPSTREAM) -> Path:
    """Path of the verified gzip file of one side of a split: the mirror's copy, or one downloaded into cache_dir."""
    checksums = load_checksums() if checksums is None else checksums
    name = file_name(split, lang)
    if name not in checksums:
        langs = sorted(n.split(".")[1] for n in checksums if n.startswith(f"{split}."))
        available = f"it exists in {', '.join(langs)}" if langs else "no such split"
        raise DataError(f"Multi30k has no {name} ({split} in {lang!r}: {available}); "
                        "choose another split or language pair in params.yaml")
    expected = checksums[name]
    if mirror is not None:
        if not Path(mirror).is_dir():
            raise DataError(f"the mirror folder {mirror} does not exist; {MIRROR_FIX}, or unset {MIRROR_ENV} "
                            "to download from upstream")
        path = Path(mirror) / name
        if not path.is_file():
            raise DataError(f"missing file {name} in mirror {mirror}; {MIRROR_FIX}")
        verify(path, expected, str(path), "the file is corrupt, re-download it or fix the mirror")
        return path
    path = Path(cache_dir) / name
    if path.is_file() and sha256(path) == expected:
        return path
    download(f"{base_url}/{name}", path, expected)
    return path


def download(url: str, dest: Path, expected: str) -> None:
    """Download url to dest through a temp file, so dest is either absent or complete and verified."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    shutil.copyfileobj(response, out)
            except (OSError, http.client.HTTPException) as e:
                raise DataError(f"could not download {url} ({e}); without network, {MIRROR_FIX}") from e
        verify(Path(tmp), expected, url, f"the download is corrupt, retry or {MIRROR_FIX}")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
