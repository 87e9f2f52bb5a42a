"""The files and hub sources of the prepare stage: layouts, formats, and a one-line error for each bad input."""
import gzip
import json

import datasets
import pytest
from datasets import Dataset

from helpers.data import assert_nothing_written
from nmtbench.config import DataConfig
from nmtbench.data.prepare import load_prepared, prepare
from nmtbench.data.sources import DataError, sha256

# en-fr pairs: the second is dropped for its length ratio (7 / 1), the third for being empty.
TRAIN = [("Hello world .", "Bonjour le monde ."), ("a b c d e f g", "x"), ("", "Vide"), ("Good  morning ", "Bonjour")]
KEPT_TRAIN = {"src": ["Hello world .", "Good  morning "], "tgt": ["Bonjour le monde .", "Bonjour"]}
VAL = [("A cat .", "Un chat .")]
MYTEST = [("Two dogs .", "Deux chiens ."), ("Rain .", "Pluie .")]


def write(folder, name, content):
    """content: lines, or raw bytes; gzipped when name ends in .gz."""
    raw = content if isinstance(content, bytes) else "".join(f"{line}\n" for line in content).encode()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(gzip.compress(raw, mtime=0) if name.endswith(".gz") else raw)


def side(pairs, i):
    return [pair[i] for pair in pairs]


@pytest.fixture
def corpus(tmp_path):
    """A files-source folder: train and val as plain text, mytest gzipped."""
    folder = tmp_path / "corpus"
    for split, pairs, suffix in (("train", TRAIN, ""), ("val", VAL, ""), ("mytest", MYTEST, ".gz")):
        write(folder, f"{split}.en{suffix}", side(pairs, 0))
        write(folder, f"{split}.fr{suffix}", side(pairs, 1))
    return folder


def files_config(folder, **overrides):
    return DataConfig(**{"src_lang": "en", "tgt_lang": "fr", "eval_splits": ["mytest"], "max_length_ratio": 3.0,
                         "source": {"kind": "files", "path": str(folder)}, **overrides})


def run(data, tmp_path):
    out = tmp_path / "out"
    return prepare(data, out_dir=out / "prepared", stats_path=out / "stats.json"), out


def test_files_source_reads_plain_and_gzip_files_and_user_splits(corpus, tmp_path):
    stats, out = run(files_config(corpus), tmp_path)
    dataset = load_prepared(out / "prepared")
    assert list(dataset) == ["train", "val", "mytest"]
    assert dataset["train"].to_dict() == KEPT_TRAIN
    assert dataset["mytest"].to_dict() == {"src": side(MYTEST, 0), "tgt": side(MYTEST, 1)}
    assert stats["splits"]["train"]["dropped"] == {"empty": 1, "too_long": 0, "length_ratio": 1, "max_pairs": 0}
    assert stats["splits"]["mytest"]["src"] == {"tokens": 5, "mean_length": 2.5, "max_length": 3}
    assert (stats["pair"], stats["source"]) == ("en-fr", "files")
    names = ["train.en", "train.fr", "val.en", "val.fr", "mytest.en.gz", "mytest.fr.gz"]
    assert stats["inputs"] == {name: sha256(corpus / name) for name in names}
    assert json.loads((out / "stats.json").read_text()) == stats


def tsv(pairs, header=("fr", "en")):  # columns in the other order: they are found by name
    return ["\t".join(header), *(f"{fr}\t{en}" for en, fr in pairs)]


@pytest.mark.parametrize("name, content", [
    ("train.tsv", tsv(TRAIN)),
    ("train.tsv.gz", tsv(TRAIN)),
    ("train.jsonl", [json.dumps({"en": en, "fr": fr, "id": i}) for i, (en, fr) in enumerate(TRAIN)]),
    ("train.jsonl.gz", [json.dumps({"translation": {"en": en, "fr": fr}}) for en, fr in TRAIN]),
])
def test_one_table_per_split_gives_the_same_pairs(corpus, tmp_path, name, content):
    for lang in ("en", "fr"):
        (corpus / f"train.{lang}").unlink()
    write(corpus, name, content)
    stats, out = run(files_config(corpus), tmp_path)
    assert load_prepared(out / "prepared")["train"].to_dict() == KEPT_TRAIN
    assert name in stats["inputs"]


def with_bom(lines):
    """The lines of a file saved as UTF-8 with a byte-order mark, as some editors save it."""
    return ["\ufeff" + lines[0], *lines[1:]]


@pytest.mark.parametrize("files", [
    {"train.en": with_bom(side(TRAIN, 0)), "train.fr.gz": with_bom(side(TRAIN, 1))},
    {"train.tsv": with_bom(tsv(TRAIN))},  # the header names fr, not \ufefffr
    {"train.jsonl": with_bom([json.dumps({"en": en, "fr": fr}) for en, fr in TRAIN])},
])
def test_a_byte_order_mark_opening_a_file_is_no_part_of_its_text(corpus, tmp_path, files):
    for lang in ("en", "fr"):
        (corpus / f"train.{lang}").unlink()
    for name, lines in files.items():
        write(corpus, name, lines)
    _, out = run(files_config(corpus), tmp_path)
    assert load_prepared(out / "prepared")["train"].to_dict() == KEPT_TRAIN


@pytest.mark.parametrize("translation_column", [False, True])
def test_parquet_table_with_language_or_translation_columns(corpus, tmp_path, translation_column):
    for lang in ("en", "fr"):
        (corpus / f"train.{lang}").unlink()
    rows = ({"translation": [{"en": en, "fr": fr} for en, fr in TRAIN]} if translation_column
            else {"fr": side(TRAIN, 1), "en": side(TRAIN, 0), "id": list(range(len(TRAIN)))})
    Dataset.from_dict(rows).to_parquet(str(corpus / "train.parquet"))
    _, out = run(files_config(corpus), tmp_path)
    assert load_prepared(out / "prepared")["train"].to_dict() == KEPT_TRAIN


@pytest.fixture
def hub_folder(tmp_path, monkeypatch):
    """A dataset in the layout the hub serves (parquet files per split, a translation column), read through
    datasets.load_dataset with its cache in tmp_path and no network."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    folder = tmp_path / "my-hub-dataset"
    folder.mkdir()
    for split, pairs in (("train", TRAIN), ("validation", VAL), ("test", MYTEST)):
        rows = {"translation": [{"de": f"de {i}", "en": en, "fr": fr} for i, (en, fr) in enumerate(pairs)]}
        Dataset.from_dict(rows).to_parquet(str(folder / f"{split}.parquet"))
    return folder


def test_hub_source_maps_our_splits_to_the_datasets(hub_folder, tmp_path):
    data = DataConfig(src_lang="en", tgt_lang="fr", eval_splits=["newstest"], max_length_ratio=3.0,
                      source={"kind": "hub", "name": str(hub_folder),
                              "splits": {"val": "validation", "newstest": "test"}})
    stats, out = run(data, tmp_path)
    dataset = load_prepared(out / "prepared")
    assert list(dataset) == ["train", "val", "newstest"]
    assert dataset["train"].to_dict() == KEPT_TRAIN
    assert dataset["newstest"].to_dict() == {"src": side(MYTEST, 0), "tgt": side(MYTEST, 1)}
    assert list(stats["inputs"]) == [f"{hub_folder}/{split}" for split in ("train", "validation", "test")]
    assert all(len(digest) == 64 for digest in stats["inputs"].values())


# Each bad input: the exact one-line error, and nothing written (an earlier output stays as it was).
def fails(data, tmp_path, message):
    with pytest.raises(DataError) as error:
        run(data, tmp_path)
    assert str(error.value) == message
    assert "\n" not in message
    assert_nothing_written(tmp_path)


def test_unequal_line_counts(corpus, tmp_path, old_output):
    write(corpus, "val.fr", ["Un chat .", "De trop ."])
    fails(files_config(corpus), tmp_path,
          f"{corpus / 'val.en'} has 1 lines but {corpus / 'val.fr'} has 2; parallel files must align line by line, "
          "line n of one file must translate line n of the other")


def test_non_utf8_names_file_and_line(corpus, tmp_path, old_output):
    write(corpus, "train.fr", b"Bonjour\nx\nVide\nCaf\xe9\n")
    fails(files_config(corpus), tmp_path,
          f"{corpus / 'train.fr'}, line 4: not valid UTF-8 (invalid continuation byte at byte 3); "
          "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)")


def test_missing_split(corpus, tmp_path, old_output):
    fails(files_config(corpus, eval_splits=["newstest"]), tmp_path,
          f"{corpus} has no split newstest: expected newstest.en and newstest.fr (or .gz), or one newstest.tsv, "
          ".jsonl or .parquet; add it, or name another split in data.eval_splits")


def test_language_the_source_does_not_have(corpus, tmp_path, old_output):
    fails(files_config(corpus, tgt_lang="de"), tmp_path,
          f"{corpus} has no train.de or train.de.gz: the corpus has train in en, fr; "
          "set data.src_lang and data.tgt_lang to two of them or add the file")


def test_missing_language_column(corpus, tmp_path, old_output):
    (corpus / "train.fr").unlink()
    write(corpus, "train.tsv", tsv(TRAIN, header=("de", "en")))
    fails(files_config(corpus), tmp_path,
          f"{corpus / 'train.tsv'}, line 1: the header has no column 'fr' (it has de, en); "
          "name each column by its language, or set data.src_lang and data.tgt_lang")


def test_missing_column_of_a_table(corpus, tmp_path, old_output):
    (corpus / "train.en").unlink()
    Dataset.from_dict({"en_text": side(TRAIN, 0), "fr": side(TRAIN, 1)}).to_parquet(str(corpus / "train.parquet"))
    fails(files_config(corpus), tmp_path,
          f"{corpus / 'train.parquet'} has no column 'en' (it has en_text, fr); "
          "set data.src_lang and data.tgt_lang to two of its languages")


def test_tsv_line_without_the_separator(corpus, tmp_path, old_output):
    (corpus / "val.en").unlink()
    write(corpus, "val.tsv", ["en\tfr", "A cat .\tUn chat .", "A dog . Un chien ."])
    fails(files_config(corpus), tmp_path,
          f"{corpus / 'val.tsv'}, line 3: 1 tab-separated column(s) but the header has 2 (en, fr); "
          "put one tab between columns and none in a sentence")


def test_empty_corpus_after_filtering(corpus, tmp_path, old_output):
    fails(files_config(corpus, max_length=1), tmp_path,
          "train has no sentence pairs: all 4 were dropped (1 empty, 3 too_long); "
          "loosen data.max_length and data.max_length_ratio")


def test_test_split_without_pairs(corpus, tmp_path, old_output):
    write(corpus, "mytest.en.gz", [])
    write(corpus, "mytest.fr.gz", [])
    fails(files_config(corpus), tmp_path,
          "mytest has no sentence pairs: the source has no lines for it; add them or drop the split")


def test_hub_id_that_cannot_be_loaded(hub_folder, tmp_path, old_output):
    data = DataConfig(src_lang="en", tgt_lang="fr", eval_splits=["test"],
                      source={"kind": "hub", "name": "nmtbench-test/no-such-dataset", "config": "en-fr"})
    fails(data, tmp_path,
          "could not load nmtbench-test/no-such-dataset/en-fr/train with datasets.load_dataset: Couldn't reach "
          "'nmtbench-test/no-such-dataset' on the Hub (OfflineModeIsEnabled); check data.source.name, config and "
          "splits; without network set HF_DATASETS_OFFLINE=1 and have the dataset in the cache "
          f"({tmp_path / 'hf-cache'})")


def test_hub_split_the_dataset_does_not_have(hub_folder, tmp_path, old_output):
    data = DataConfig(src_lang="en", tgt_lang="fr", eval_splits=["test"],
                      source={"kind": "hub", "name": str(hub_folder)})
    with pytest.raises(DataError, match=r"^could not load .*/val with datasets.load_dataset: Unknown split \"val\""):
        run(data, tmp_path)
