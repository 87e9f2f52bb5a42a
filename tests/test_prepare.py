import json

import pytest

from nmtbench.config import DataConfig, parse_params
from nmtbench.data.prepare import load_prepared, prepare
from nmtbench.data.sources import DataError

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


def test_stats_count_every_pair_and_drop_reason(run):
    stats, _, stats_path = run()
    assert json.loads(stats_path.read_text()) == stats
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


def assert_nothing_written(tmp_path):
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["prepared"]  # no stats, no temp folder
    assert [p.name for p in (tmp_path / "out" / "prepared").iterdir()] == ["old-output"]


@pytest.fixture
def old_output(tmp_path):
    """An earlier complete output, which a failed run must leave exactly as it was."""
    (tmp_path / "out" / "prepared").mkdir(parents=True)
    (tmp_path / "out" / "prepared" / "old-output").write_text("kept")


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
