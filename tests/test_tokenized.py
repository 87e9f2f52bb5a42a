from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict

from nmtbench.config import DataConfig, TokenizeConfig
from nmtbench.data.prepare import prepare
from nmtbench.data.sources import DataError
from nmtbench.data.tokenized import TokenizedSplits
from nmtbench.data.tokenizer import load_tokenized, tokenize

COLUMNS = ("src", "tgt", "src_ids", "tgt_ids")


@pytest.fixture
def tokenized(make_data_mirror, tmp_path) -> Path:
    mirror, checksums = make_data_mirror()
    prepare(DataConfig(max_length=8), mirror, tmp_path / "prepared", tmp_path / "stats.json", tmp_path / "raw",
            checksums)
    tokenize(TokenizeConfig(vocab_size=305), tmp_path / "prepared", tmp_path / "tokenized")
    return tmp_path / "tokenized"


def test_every_split_reads_as_datasets_reads_it(tokenized):
    expected, found = load_tokenized(tokenized), TokenizedSplits(tokenized)
    assert list(found) == list(expected) and len(found) == len(expected) == 4
    for name in expected:
        assert len(found[name]) == len(expected[name]) > 0
        for column in COLUMNS:
            assert found[name][column] == list(expected[name][column]), (name, column)
        assert found[name][len(expected[name]) - 1] == expected[name][len(expected[name]) - 1]


def test_a_split_in_several_files_reads_in_their_order(tmp_path):
    rows = {"src": [f"s{i}" for i in range(7)], "src_ids": [[i] * (i % 3) for i in range(7)]}
    DatasetDict({"test": Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "dataset"), num_shards={"test": 3})
    assert len(list((tmp_path / "dataset" / "test").glob("*.arrow"))) == 3
    split = TokenizedSplits(tmp_path)["test"]
    assert (split["src"], split["src_ids"], split[4]) == (rows["src"], rows["src_ids"], {"src": "s4", "src_ids": [4]})


def test_a_split_is_read_only_when_asked_for(tokenized):
    (tokenized / "dataset" / "train" / "state.json").unlink()
    splits = TokenizedSplits(tokenized)
    assert splits["val"]["tgt"] and "train" in splits and "test" not in splits
    with pytest.raises(KeyError):
        splits["test"]
    with pytest.raises(DataError, match=r"train: the tokenized split cannot be read .*dvc repro tokenize --force"):
        splits["train"]


def test_a_damaged_split_names_its_folder_and_the_fix(tokenized):
    (arrow,) = (tokenized / "dataset" / "val").glob("*.arrow")
    arrow.write_bytes(arrow.read_bytes()[:100])
    with pytest.raises(DataError, match=r"val: the tokenized split cannot be read .*rerun the tokenize stage"):
        TokenizedSplits(tokenized)["val"]


def test_no_dataset_names_the_stage_to_run(tmp_path):
    with pytest.raises(DataError, match=r"no tokenized dataset in .*: dvc repro tokenize$"):
        TokenizedSplits(tmp_path)
