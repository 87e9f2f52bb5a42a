import hashlib
import re

import pytest

from nmtbench.data.sources import DataError, fetch_split, load_checksums, mirror_from_env


def test_packaged_checksums_cover_multi30k_without_test_2017_czech():
    checksums = load_checksums()
    assert len(checksums) == 15
    assert "test_2017_flickr.cs.gz" not in checksums
    assert checksums["train.en.gz"] == "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"


def test_load_checksums_reads_sha256sum_format(tmp_path):
    path = tmp_path / "SUMS"
    path.write_text("aa  train.en.gz\nbb  val.de.gz\n\n")
    assert load_checksums(path) == {"train.en.gz": "aa", "val.de.gz": "bb"}


def test_mirror_from_env(monkeypatch, tmp_path):
    monkeypatch.delenv("NMTBENCH_DATA_MIRROR", raising=False)
    assert mirror_from_env() is None
    monkeypatch.setenv("NMTBENCH_DATA_MIRROR", str(tmp_path))
    assert mirror_from_env() == tmp_path


def test_mirror_file_is_returned_after_verification(make_data_mirror, tmp_path):
    mirror, checksums = make_data_mirror()
    path = fetch_split("val", "de", mirror, tmp_path / "raw", checksums)
    assert path == mirror / "val.de.gz"
    assert not (tmp_path / "raw").exists()  # a mirror is read in place, never copied


def test_missing_file_in_mirror(make_data_mirror, tmp_path):
    mirror, checksums = make_data_mirror()
    (mirror / "val.de.gz").unlink()
    with pytest.raises(DataError) as e:
        fetch_split("val", "de", mirror, tmp_path / "raw", checksums)
    assert str(e.value) == (f"missing file val.de.gz in mirror {mirror}; "
                            "point NMTBENCH_DATA_MIRROR at a folder holding the Multi30k raw files")


def test_checksum_mismatch_in_mirror(make_data_mirror, tmp_path):
    mirror, checksums = make_data_mirror()
    (mirror / "val.de.gz").write_bytes(b"corrupt")
    with pytest.raises(DataError) as e:
        fetch_split("val", "de", mirror, tmp_path / "raw", checksums)
    assert str(e.value) == (f"checksum mismatch for {mirror / 'val.de.gz'}: expected {checksums['val.de.gz']}, "
                            f"got {hashlib.sha256(b'corrupt').hexdigest()}; "
                            "the file is corrupt, re-download it or fix the mirror")


def test_split_missing_in_a_language(make_data_mirror, tmp_path):
    mirror, checksums = make_data_mirror()
    with pytest.raises(DataError) as e:
        fetch_split("test_2017_flickr", "cs", mirror, tmp_path / "raw", checksums)
    assert str(e.value) == ("Multi30k has no test_2017_flickr.cs.gz (test_2017_flickr in 'cs': it exists in de, en, "
                            "fr); choose another split or language pair in params.yaml")


def test_unknown_split(tmp_path):
    with pytest.raises(DataError,
                       match=re.escape("Multi30k has no test_2018.en.gz (test_2018 in 'en': no such split)")):
        fetch_split("test_2018", "en", None, tmp_path)


def test_download_is_verified_cached_and_atomic(make_data_mirror, tmp_path):
    upstream, checksums = make_data_mirror()
    cache = tmp_path / "raw"
    path = fetch_split("train", "en", None, cache, checksums, base_url=upstream.as_uri())
    assert path == cache / "train.en.gz"
    assert path.read_bytes() == (upstream / "train.en.gz").read_bytes()
    assert sorted(p.name for p in cache.iterdir()) == ["train.en.gz"]  # no temp file left behind
    # A verified cached file is reused: an unreachable upstream does not matter any more.
    assert fetch_split("train", "en", None, cache, checksums, base_url=(tmp_path / "gone").as_uri()) == path


def test_corrupt_cached_file_is_downloaded_again(make_data_mirror, tmp_path):
    upstream, checksums = make_data_mirror()
    cache = tmp_path / "raw"
    cache.mkdir()
    (cache / "train.en.gz").write_bytes(b"truncated")
    path = fetch_split("train", "en", None, cache, checksums, base_url=upstream.as_uri())
    assert path.read_bytes() == (upstream / "train.en.gz").read_bytes()


def test_download_failure_says_to_set_the_mirror(tmp_path):
    cache = tmp_path / "raw"
    url = (tmp_path / "offline").as_uri()
    with pytest.raises(DataError) as e:
        fetch_split("val", "en", None, cache, {"val.en.gz": "00"}, base_url=url)
    message = str(e.value)
    assert message.startswith(f"could not download {url}/val.en.gz (")
    assert message.endswith("); without network, point NMTBENCH_DATA_MIRROR at a folder holding the Multi30k raw files")
    assert list(cache.iterdir()) == []


def test_corrupt_download_leaves_nothing(make_data_mirror, tmp_path):
    upstream, checksums = make_data_mirror()
    cache = tmp_path / "raw"
    with pytest.raises(DataError, match="^checksum mismatch for file://.*/val.en.gz: expected 00, got .*; "
                                        "the download is corrupt, retry or point NMTBENCH_DATA_MIRROR"):
        fetch_split("val", "en", None, cache, {**checksums, "val.en.gz": "00"}, base_url=upstream.as_uri())
    assert list(cache.iterdir()) == []
