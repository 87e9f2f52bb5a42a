import gzip
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from nmtbench.config import DataConfig, TokenizeConfig, parse_params
from nmtbench.data import tokenizer as tokenizer_module
from nmtbench.data.prepare import load_prepared, prepare
from nmtbench.data.sources import DataError
from nmtbench.data.subwords import BOS, EOS, PAD, UNK, Tokenizer, vocab_id
from nmtbench.data.tokenizer import load_tokenized, tokenize, training_sentences

TINY = TokenizeConfig(vocab_size=305)  # the tiny train split needs at least 301 pieces and yields at most 307
# one model per side: the tiny sources need 287 to 354 pieces, the targets 288 to 368
TINY_PER_SIDE = TokenizeConfig(joint=False, vocab_size=290, target_vocab_size=300)


@pytest.fixture
def prepared(make_data_mirror, tmp_path):
    mirror, checksums = make_data_mirror()
    prepare(DataConfig(max_length=8), mirror, tmp_path / "prepared", tmp_path / "stats.json", tmp_path / "raw",
            checksums)
    return tmp_path / "prepared"


@pytest.fixture
def tokenized(prepared, tmp_path):
    tokenize(TINY, prepared, tmp_path / "tokenized")
    return tmp_path / "tokenized"


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
@pytest.mark.parametrize("text", [
    "A dog runs.",
    "Two  cats sleep. ",                         # double and trailing spaces survive
    "  leading spaces",
    "Grüße „quoted“ 漢字",
    "Ωmega, ünseen 🐕 characters\tand a tab",  # none of these are in train: byte fallback
    "",
])
def test_round_trip_is_exact(prepared, tmp_path, model_type, text):
    tokenizer = tokenize(TokenizeConfig(model_type=model_type, vocab_size=305), prepared, tmp_path / "tokenized")
    ids = tokenizer.encode(text)
    assert UNK not in ids
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode([BOS, *ids, EOS, PAD, PAD]) == text  # specials decode to nothing


def test_special_ids_are_fixed(tokenized):
    tokenizer = Tokenizer(tokenized)
    assert (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    assert [tokenizer.source.sp.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]


def test_output_layout(tokenized):
    assert sorted(p.name for p in tokenized.iterdir()) == ["dataset", "spm.model", "spm.vocab", "vocab.json"]
    assert sorted(p.name for p in tokenized.parent.iterdir()) == ["mirror", "prepared", "stats.json", "tokenized"]
    sha256 = hashlib.sha256((tokenized / "spm.model").read_bytes()).hexdigest()
    assert json.loads((tokenized / "vocab.json").read_text()) == {
        "size": 305, "pad": 0, "unk": 1, "bos": 2, "eos": 3, "sha256": sha256}
    vocab = (tokenized / "spm.vocab").read_text().splitlines()
    assert len(vocab) == 305
    assert vocab[:5] == ["<pad>\t0", "<unk>\t0", "<s>\t0", "</s>\t0", "<0x00>\t0"]
    tokenizer = Tokenizer(tokenized)
    assert tokenizer.joint and tokenizer.source is tokenizer.target and tokenizer.files == [tokenized / "spm.model"]
    assert (tokenizer.source.size, tokenizer.source.sha256, vocab_id(tokenizer.record)) == (305, sha256, sha256)


def test_one_model_per_side_learns_its_side_only_and_round_trips(prepared, tmp_path):
    """tokenize.joint false: spm.src.* from the sources, spm.tgt.* from the targets, each split encoded with both."""
    tokenized = tmp_path / "tokenized"
    tokenizer = tokenize(TINY_PER_SIDE, prepared, tokenized)
    assert sorted(p.name for p in tokenized.iterdir()) == ["dataset", "spm.src.model", "spm.src.vocab",
                                                           "spm.tgt.model", "spm.tgt.vocab", "vocab.json"]
    source, target = (hashlib.sha256((tokenized / f"spm.{side}.model").read_bytes()).hexdigest()
                      for side in ("src", "tgt"))
    assert json.loads((tokenized / "vocab.json").read_text()) == tokenizer.record == {
        "size": 290, "pad": 0, "unk": 1, "bos": 2, "eos": 3, "sha256": source,
        "target_size": 300, "target_sha256": target}
    assert vocab_id(tokenizer.record) == f"{source}+{target}" and not tokenizer.joint
    assert [len((tokenized / f"spm.{side}.vocab").read_text().splitlines()) for side in ("src", "tgt")] == [290, 300]
    # "Ü" is only in the targets, "漢" only in the sources: each is a piece of its own side's model alone
    assert tokenizer.source.sp.piece_to_id("Ü") == UNK != tokenizer.target.sp.piece_to_id("Ü")
    assert tokenizer.target.sp.piece_to_id("漢") == UNK != tokenizer.source.sp.piece_to_id("漢")
    reloaded = Tokenizer(tokenized)
    for split in load_tokenized(tokenized).values():
        for row in split:
            assert row["src_ids"] == reloaded.encode(row["src"]) == tokenizer.source.encode(row["src"])
            assert row["tgt_ids"] == tokenizer.target.encode(row["tgt"])
            assert reloaded.decode(row["tgt_ids"]) == row["tgt"]
            assert tokenizer.source.decode(row["src_ids"]) == row["src"]
    text = "Grüße „quoted“ 漢字 Ünïcödé 🐕"
    for side in (tokenizer.source, tokenizer.target):  # byte fallback on both sides: every string round-trips
        assert side.decode(side.encode(text)) == text and UNK not in side.encode(text)


def test_dataset_holds_text_and_ids_without_bos_eos(tokenized):
    tokenizer = Tokenizer(tokenized)
    dataset = load_tokenized(tokenized)
    assert list(dataset) == ["train", "val", "test_2016_flickr", "test_2017_flickr"]
    for split in dataset.values():
        assert split.column_names == ["src", "tgt", "src_ids", "tgt_ids"]
        for row in split:
            for side in ("src", "tgt"):
                assert row[f"{side}_ids"] == tokenizer.encode(row[side])
                assert tokenizer.decode(row[f"{side}_ids"]) == row[side]
                assert not {BOS, EOS, PAD} & set(row[f"{side}_ids"])
    assert dataset["train"]["src"] == ["A dog runs.", "Two  cats sleep. ", "a b c", "Grüße „quoted“ 漢字"]


def test_training_is_reproducible(prepared, tmp_path):
    params = parse_params({"tokenize": {"vocab_size": 305}, "models": {"tiny": {}}})
    first = tokenize(params, prepared, tmp_path / "a").record
    assert tokenize(params, prepared, tmp_path / "b").record == first
    assert (tmp_path / "a" / "spm.vocab").read_bytes() == (tmp_path / "b" / "spm.vocab").read_bytes()


def test_sentencepiece_reads_every_sentence_in_order_or_a_seeded_sample(prepared):
    train = load_prepared(prepared)["train"]
    everything = [*train["src"], *train["tgt"]]
    assert list(training_sentences(train, 8)) == everything == list(training_sentences(train, 10**6))
    sample = list(training_sentences(train, 5))
    assert len(sample) == 5 and sample == list(training_sentences(train, 5))
    positions = [everything.index(sentence) for sentence in sample]  # the tiny corpus has no repeated sentence
    assert positions == sorted(positions)  # sources first, then targets, each in corpus order
    assert list(training_sentences(train, 10**6, ("tgt",))) == train["tgt"]  # one side's model reads that side only
    targets = list(training_sentences(train, 3, ("tgt",)))
    assert len(targets) == 3 and set(targets) < set(train["tgt"])


def test_encoding_in_several_processes_gives_the_same_dataset(prepared, tmp_path, monkeypatch):
    tokenize(TINY, prepared, tmp_path / "one")
    monkeypatch.setattr(tokenizer_module, "ROWS_PER_PROCESS", 1)
    monkeypatch.setattr(tokenizer_module.os, "cpu_count", lambda: 2)
    tokenize(TINY, prepared, tmp_path / "two")
    one, two = load_tokenized(tmp_path / "one"), load_tokenized(tmp_path / "two")
    for split in one:
        assert two[split].to_dict() == one[split].to_dict()
        assert two[split].features["src_ids"].feature.dtype == "int32"
    assert not (tmp_path / "two" / "encoding").exists()


# sha256 of the tokenize stage's outputs on the Multi30k en-de mirror with the default params, as computed
# before the stage streamed and sampled its input: the vocabulary and the ids must stay byte-identical.
MULTI30K_SHA256 = {
    "spm.model": "51c8c98c0390b0a3aa07e85e2e32605bd6e6a9a9ea49c6e46eed5ac642d89075",
    "spm.vocab": "c94a716c89ac90118674791d0274bbf6520b5a70e657aad80751880aa15fb175",
    "vocab.json": "3220277b3e9f35240dd843535482b0f2140f5b435c8524fe250d4ea4731190a4",
    "train": "cb8b90f706b90e1289f5e102e1d6d3b8f2359fcea94d5795b89e2b834cc7e74c",
    "val": "5981e5df1e7727d11b2b8d0e36c6324181987fdfd191af36790799c83a602b6e",
    "test_2016_flickr": "28ae81048b688e4f51d0bf56486a84623ecd95364567ed5c669c50c2be42a18a",
    "test_2017_flickr": "08355316f80fab5c2237988b7037872d0f503da883067f9e75db7ea7df25f04f",
}


def ids_sha256(split) -> str:
    """Every src_ids row then every tgt_ids row, as little-endian int32 with an 0xffffffff after each row."""
    digest = hashlib.sha256()
    for side in ("src_ids", "tgt_ids"):
        for ids in split[side]:
            digest.update(np.asarray(ids, dtype="<i4").tobytes() + b"\xff\xff\xff\xff")
    return digest.hexdigest()


def test_multi30k_vocabulary_and_ids_are_unchanged(tmp_path):
    if not os.environ.get("NMTBENCH_DATA_MIRROR"):
        pytest.skip("set NMTBENCH_DATA_MIRROR to a folder holding the Multi30k raw files")
    prepare(DataConfig(), Path(os.environ["NMTBENCH_DATA_MIRROR"]), tmp_path / "prepared", tmp_path / "stats.json",
            tmp_path / "raw")
    tokenize(TokenizeConfig(), tmp_path / "prepared", tmp_path / "tokenized")
    found = {name: hashlib.sha256((tmp_path / "tokenized" / name).read_bytes()).hexdigest()
             for name in ("spm.model", "spm.vocab", "vocab.json")}
    found |= {split: ids_sha256(data) for split, data in load_tokenized(tmp_path / "tokenized").items()}
    assert found == MULTI30K_SHA256


@pytest.mark.parametrize("vocab_size, message", [
    (280, "tokenize.vocab_size: 280 cannot hold the 4 special tokens, 256 fallback bytes and the characters of "
          "train; raise tokenize.vocab_size to at least 301"),
    (5000, "tokenize.vocab_size: 5000 is more pieces than the train split yields; "
           "lower tokenize.vocab_size to at most 443"),
])
def test_bad_vocab_size_says_which_value_to_use(prepared, tmp_path, vocab_size, message):
    out = tmp_path / "tokenized"
    out.mkdir()
    (out / "old-output").write_text("kept")
    with pytest.raises(DataError) as e:
        tokenize(TokenizeConfig(vocab_size=vocab_size), prepared, out)
    assert str(e.value) == message
    assert [p.name for p in out.iterdir()] == ["old-output"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folder left behind


@pytest.mark.parametrize("cfg, message", [
    (TokenizeConfig(joint=False, vocab_size=280), "tokenize.vocab_size: 280 cannot hold the 4 special tokens, 256 "
     "fallback bytes and the characters of train's source side; raise tokenize.vocab_size to at least 287"),
    (TokenizeConfig(joint=False, vocab_size=360), "tokenize.vocab_size: 360 is more pieces than the train split's "
     "source side yields; lower tokenize.vocab_size to at most 354"),
    (TokenizeConfig(joint=False, vocab_size=290, target_vocab_size=380), "tokenize.target_vocab_size: 380 is more "
     "pieces than the train split's target side yields; lower tokenize.target_vocab_size to at most 368"),
])
def test_a_bad_size_per_side_names_the_side_and_its_key(prepared, tmp_path, cfg, message):
    with pytest.raises(DataError) as e:
        tokenize(cfg, prepared, tmp_path / "tokenized")
    assert str(e.value) == message


def test_missing_prepared_says_which_stage_to_run(tmp_path):
    with pytest.raises(DataError, match=r"run the prepare stage first: dvc repro prepare$"):
        tokenize(TINY, tmp_path / "prepared", tmp_path / "tokenized")
    assert list(tmp_path.iterdir()) == []


def test_missing_model_says_which_stage_to_run(tmp_path):
    with pytest.raises(DataError, match=r"run the tokenize stage first: dvc repro tokenize$"):
        Tokenizer(tmp_path)
    with pytest.raises(DataError, match=r"run the tokenize stage first: dvc repro tokenize$"):
        load_tokenized(tmp_path)


def test_a_damaged_model_is_named_with_its_fix(tokenized, tmp_path):
    """#69: a cut spm.model (in a model folder that translate reads) gave sentencepiece's RuntimeError."""
    (tmp_path / "spm.model").write_bytes((tokenized / "spm.model").read_bytes()[:2000])
    with pytest.raises(DataError, match=rf"^{tmp_path}/spm.model: not a sentencepiece model \(damaged or cut "
                                        r"short\); copy it again from the tokenize stage's data/tokenized, or rerun "
                                        r"it: dvc repro tokenize$"):
        Tokenizer(tmp_path)


@pytest.mark.slow
def test_real_val_split_round_trips_exactly(tmp_path):
    """The issue's acceptance check: every val sentence of the real en-de data survives encode -> decode."""
    if not os.environ.get("NMTBENCH_DATA_MIRROR"):
        pytest.skip("set NMTBENCH_DATA_MIRROR to a folder holding the Multi30k raw files")
    mirror = Path(os.environ["NMTBENCH_DATA_MIRROR"])
    stats = prepare(DataConfig(src_lang="en", tgt_lang="de"), mirror, tmp_path / "prepared", tmp_path / "stats.json",
                    tmp_path / "raw")
    assert stats["splits"]["train"]["lines"] == 29000
    tokenizer = tokenize(TokenizeConfig(vocab_size=8000), tmp_path / "prepared", tmp_path / "tokenized")
    assert tokenizer.source.size == 8000
    val = load_tokenized(tmp_path / "tokenized")["val"]
    for side, lang in (("src", "en"), ("tgt", "de")):
        with gzip.open(mirror / f"val.{lang}.gz") as f:
            original = [line.decode("utf-8").removesuffix("\n") for line in f]
        assert len(original) == 1014
        assert val[side] == original
        assert [tokenizer.decode(ids) for ids in val[f"{side}_ids"]] == original
        assert all(UNK not in ids for ids in val[f"{side}_ids"])
