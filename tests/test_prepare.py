import hashlib
import json

import pytest

from helpers.data import assert_nothing_written
from nmtbench.config import DataConfig, load_params, parse_params
from nmtbench.data.prepare import load_prepared, prepare
from nmtbench.data.sources import DataError, load_checksums, mirror_from_env, sha256

CONFIG = DataConfig(max_length=8, max_length_ratio=3.0)


def lengths(tokens, mean, longest):
    return {"tokens": tokens, "mean_length": mean, "max_length": longest}


def dropped(empty=0, too_long=0, length_ratio=0, max_pairs=0):
    return {"empty": empty, "too_long": too_long, "length_ratio": length_ratio, "max_pairs": max_pairs}


@pytest.fixture
def run(make_data_mirror, tmp_path):
    """prepare() into tmp_path/out, returning (stats, paths)."""
    def go(config=CONFIG, files=None):
        mirror, checksums = make_data_mirror(files)
        out, stats_path = tmp_path / "out" / "prepared", tmp_path / "out" / "stats.json"
        stats = prepare(config, mirror, out, stats_path, tmp_path / "raw", checksums)
        return stats, out, stats_path
    return go


def test_stats_count_every_pair_and_drop_reason(run, tmp_path):
    stats, _, stats_path = run()
    assert json.loads(stats_path.read_text()) == stats
    names = [f"{split}.{lang}.gz" for split in ("train", "val", "test_2016_flickr", "test_2017_flickr")
             for lang in ("en", "de")]
    assert stats.pop("inputs") == {name: sha256(tmp_path / "mirror" / name) for name in names}
    assert stats.pop("source") == "multi30k"
    assert stats.pop("preprocess") == "none"
    assert stats == {"pair": "en-de", "splits": {
        "train": {"lines": 8, "pairs": 4, "dropped": dropped(empty=2, too_long=1, length_ratio=1),
                  "src": lengths(12, 3.0, 3), "tgt": lengths(9, 2.25, 3)},
        "val": {"lines": 3, "pairs": 2, "dropped": dropped(empty=1),
                "src": lengths(13, 6.5, 10), "tgt": lengths(4, 2.0, 3)},
        "test_2016_flickr": {"lines": 2, "pairs": 2, "dropped": dropped(),
                             "src": lengths(5, 2.5, 3), "tgt": lengths(5, 2.5, 3)},
        "test_2017_flickr": {"lines": 1, "pairs": 1, "dropped": dropped(),
                             "src": lengths(2, 2.0, 2), "tgt": lengths(2, 2.0, 2)},
    }}


def test_text_is_kept_exactly(run):
    _, out, _ = run()
    dataset = load_prepared(out)
    assert list(dataset) == ["train", "val", "test_2016_flickr", "test_2017_flickr"]
    assert dataset["train"].to_dict() == {
        "src": ["A dog runs.", "Two  cats sleep. ", "a b c", "Grüße „quoted“ 漢字"],
        "tgt": ["Ein Hund rennt.", "Zwei Katzen schlafen.", "x", "Ünïcödé ok"],
    }
    assert dataset["val"]["src"] == ["A man sings.", "one two three four five six seven eight nine ten"]


def test_max_pairs_keep_the_first_pairs_after_filtering(run):
    stats, out, _ = run(DataConfig(max_length=8, max_train_pairs=3, max_eval_pairs=1))
    assert stats["splits"]["train"]["dropped"] == dropped(empty=2, too_long=1, length_ratio=1, max_pairs=1)
    assert stats["splits"]["val"]["dropped"] == dropped(empty=1, max_pairs=1)
    assert stats["splits"]["test_2017_flickr"]["dropped"] == dropped()
    dataset = load_prepared(out)
    assert dataset["train"]["tgt"] == ["Ein Hund rennt.", "Zwei Katzen schlafen.", "x"]
    assert {split: dataset[split].num_rows for split in dataset} == {
        "train": 3, "val": 1, "test_2016_flickr": 1, "test_2017_flickr": 1}


def test_params_pick_the_pair_and_eval_splits(run):
    params = parse_params({"data": {"src_lang": "fr", "tgt_lang": "en", "eval_splits": ["test_2016_flickr"]},
                           "models": {"tiny": {}}})
    stats, out, _ = run(params)
    assert stats["pair"] == "fr-en"
    assert list(load_prepared(out)) == ["train", "val", "test_2016_flickr"]


def test_unequal_line_counts(run, tmp_path, old_output):
    with pytest.raises(DataError) as e:
        run(files={"train.en.gz": ["a", "b", "c"], "train.de.gz": ["x", "y"]})
    mirror = tmp_path / "mirror"
    assert str(e.value) == (f"{mirror / 'train.en.gz'} has 3 lines but {mirror / 'train.de.gz'} has 2; "
                            "parallel files must align line by line, re-download them or fix the mirror")
    assert_nothing_written(tmp_path)


def test_non_utf8_names_file_and_line(run, tmp_path, old_output):
    with pytest.raises(DataError) as e:
        run(files={"train.en.gz": ["a", "b"], "train.de.gz": b"x\ny\xe4\n"})
    assert str(e.value) == (f"{tmp_path / 'mirror' / 'train.de.gz'}, line 2: not valid UTF-8 "
                            "(invalid continuation byte at byte 1); the file is corrupt, "
                            "re-download it or fix the mirror")
    assert_nothing_written(tmp_path)


def test_missing_file_fails_before_writing(make_data_mirror, tmp_path, old_output):
    mirror, checksums = make_data_mirror()
    (mirror / "test_2017_flickr.de.gz").unlink()
    with pytest.raises(DataError, match="^missing file test_2017_flickr.de.gz in mirror "):
        prepare(CONFIG, mirror, tmp_path / "out" / "prepared", tmp_path / "out" / "stats.json", tmp_path / "raw",
                checksums)
    assert_nothing_written(tmp_path)


def test_rerun_replaces_the_old_output(run, tmp_path, old_output):
    _, out, _ = run()
    assert not (out / "old-output").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["prepared", "stats.json"]


def test_load_prepared_says_which_stage_to_run(tmp_path):
    with pytest.raises(DataError) as e:
        load_prepared(tmp_path / "prepared")
    assert str(e.value) == (f"no prepared dataset in {tmp_path / 'prepared'}; "
                            "run the prepare stage first: dvc repro prepare")


# The default params on the real Multi30k: what the prepare stage gave before data sources existed.
MULTI30K_CONTENT_SHA256 = "212967b32cd7ba38873d3d0458113b7dd537b913cdc3ac20c2160d611aaf73a0"
MULTI30K_SPLITS = {
    "train": {"lines": 29000, "pairs": 28998, "dropped": dropped(length_ratio=2),
              "src": lengths(345004, 11.8975, 37), "tgt": lengths(322381, 11.1174, 39)},
    "val": {"lines": 1014, "pairs": 1014, "dropped": dropped(),
            "src": lengths(12167, 11.999, 27), "tgt": lengths(11568, 11.4083, 30)},
    "test_2016_flickr": {"lines": 1000, "pairs": 1000, "dropped": dropped(),
                         "src": lengths(11877, 11.877, 32), "tgt": lengths(10905, 10.905, 30)},
    "test_2017_flickr": {"lines": 1000, "pairs": 1000, "dropped": dropped(),
                         "src": lengths(10526, 10.526, 41), "tgt": lengths(9600, 9.6, 39)},
}


def content_sha256(dataset) -> str:
    digest = hashlib.sha256()
    for split in dataset:
        digest.update(split.encode() + b"\0")
        for src, tgt in zip(dataset[split]["src"], dataset[split]["tgt"]):
            digest.update(src.encode() + b"\0" + tgt.encode() + b"\n")
    return digest.hexdigest()


def test_multi30k_output_is_unchanged(tmp_path):
    mirror = mirror_from_env()
    if mirror is None:
        pytest.skip("set NMTBENCH_DATA_MIRROR to a Multi30k mirror folder")
    stats = prepare(load_params("params.yaml"), mirror, tmp_path / "prepared", tmp_path / "stats.json",
                    tmp_path / "raw")
    assert (stats["pair"], stats["splits"]) == ("en-de", MULTI30K_SPLITS)
    assert stats["inputs"] == {name: digest for name, digest in load_checksums().items()
                               if name.split(".")[1] in ("en", "de")}
    assert content_sha256(load_prepared(tmp_path / "prepared")) == MULTI30K_CONTENT_SHA256
