"""The tokenize stage: one joint sentencepiece model, trained on train only, and the splits encoded with it.

Detokenization is lossless: no normalization, whitespace kept as is, and byte fallback for characters never
seen in train, so decode(encode(text)) == text for every string and BLEU is scored on the exact references.

Neither step holds the corpus in Python: sentencepiece reads a bounded, seeded sample of train streamed from
the memory-mapped prepared dataset, and encoding is a batched map writing Arrow int32 columns to disk.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import sentencepiece as spm
from datasets import Dataset, DatasetDict, Features, List, Value, load_from_disk

from nmtbench.config import Params, TokenizeConfig
from nmtbench.data.prepare import load_prepared
from nmtbench.data.sources import DataError
from nmtbench.files import atomic_dir, write_json

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SEED = 0  # fixed rather than train.seed, so changing the training seed keeps the vocabulary
ROWS_PER_BATCH = 10_000  # rows read or encoded at a time: a few MB of text
ROWS_PER_PROCESS = 200_000  # a split encodes in one process per this many rows, up to one per core
FEATURES = Features({"src": Value("string"), "tgt": Value("string"),
                     "src_ids": List(Value("int32")), "tgt_ids": List(Value("int32"))})


class Tokenizer:
    """A trained sentencepiece model; ids carry no bos/eos, which the model side adds."""

    def __init__(self, path: Path):
        path = Path(path)
        model = path / "spm.model" if path.is_dir() else path
        if not model.is_file():
            raise DataError(f"no sentencepiece model at {model}; run the tokenize stage first: dvc repro tokenize")
        proto = model.read_bytes()
        self.path = model
        self.sha256 = hashlib.sha256(proto).hexdigest()
        self.sp = spm.SentencePieceProcessor(model_proto=proto)

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self.sp.encode(texts)

    def decode(self, ids: Iterable[int]) -> str:
        # pad, bos and eos are control pieces, which sentencepiece decodes to nothing.
        return self.sp.decode([int(i) for i in ids])


def training_sentences(train: Dataset, sample: int) -> Iterator[str]:
    """Every source sentence of train, then every target sentence; when that is more than sample sentences,
    a seeded uniform draw of sample of them without replacement, still in that order."""
    pairs = len(train)
    chosen = (None if 2 * pairs <= sample
              else np.sort(np.random.default_rng(SEED).choice(2 * pairs, sample, replace=False)))
    for side, first in (("src", 0), ("tgt", pairs)):
        rows = train if chosen is None else train.select(chosen[(chosen >= first) & (chosen < first + pairs)] - first)
        for batch in rows.select_columns([side]).iter(batch_size=ROWS_PER_BATCH):
            yield from batch[side]


def train_sentencepiece(sentences: Iterable[str], cfg: TokenizeConfig) -> bytes:
    """The serialized model, turning sentencepiece's cryptic vocabulary-size errors into DataErrors."""
    spm.set_random_generator_seed(SEED)
    model = io.BytesIO()  # not model_prefix, which would record the temp folder's name in the model
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=model,
            model_type=cfg.model_type, vocab_size=cfg.vocab_size, character_coverage=cfg.character_coverage,
            pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
            normalization_rule_name="identity", remove_extra_whitespaces=False, byte_fallback=True,
            input_sentence_size=0, shuffle_input_sentence=False,  # all it is given, in order: reproducible
            num_threads=2, minloglevel=2)
    except RuntimeError as e:
        if m := re.search(r"smaller than required_chars\. (\d+) vs (\d+)", str(e)):
            raise DataError(f"tokenize.vocab_size: {m[1]} cannot hold the 4 special tokens, 256 fallback bytes and "
                            f"the characters of train; raise tokenize.vocab_size to at least {m[2]}") from e
        if m := re.search(r"Vocabulary size too high \((\d+)\).*<= (\d+)", str(e)):
            raise DataError(f"tokenize.vocab_size: {m[1]} is more pieces than the train split yields; "
                            f"lower tokenize.vocab_size to at most {m[2]}") from e
        raise
    return model.getvalue()


def encode_rows(rows: dict[str, list[str]], tokenizer: Tokenizer) -> dict[str, list[list[int]]]:
    return {"src_ids": tokenizer.encode_batch(rows["src"]), "tgt_ids": tokenizer.encode_batch(rows["tgt"])}


def encode_split(tokenizer: Tokenizer, data: Dataset, cache_file: Path) -> Dataset:
    """data with its src_ids and tgt_ids, written to cache_file (and its per-process shards)."""
    processes = min(os.cpu_count() or 1, len(data) // ROWS_PER_PROCESS)
    return data.map(encode_rows, fn_kwargs={"tokenizer": tokenizer}, batched=True, batch_size=ROWS_PER_BATCH,
                    features=FEATURES, num_proc=processes if processes > 1 else None,
                    cache_file_name=str(cache_file), new_fingerprint=cache_file.stem,
                    desc=f"encoding {cache_file.stem}")


def tokenize(params: Params | TokenizeConfig, prepared_dir: Path = Path("data/prepared"),
             out_dir: Path = Path("data/tokenized")) -> Tokenizer:
    """Run the tokenize stage: out_dir gets spm.model, spm.vocab, vocab.json and the encoded dataset/."""
    cfg = params.tokenize if isinstance(params, Params) else params
    prepared = load_prepared(prepared_dir)
    with atomic_dir(out_dir) as tmp:
        model = train_sentencepiece(training_sentences(prepared["train"], cfg.sample_sentences), cfg)
        (tmp / "spm.model").write_bytes(model)
        tokenizer = Tokenizer(tmp / "spm.model")
        # spm.vocab is for people reading the vocabulary: one "piece<TAB>score" per id, as sentencepiece writes it.
        (tmp / "spm.vocab").write_text("".join(f"{tokenizer.sp.id_to_piece(i)}\t{tokenizer.sp.get_score(i):g}\n"
                                               for i in range(tokenizer.vocab_size)))
        encoded = DatasetDict({split: encode_split(tokenizer, data, tmp / "encoding" / f"{split}.arrow")
                               for split, data in prepared.items()})
        encoded.save_to_disk(str(tmp / "dataset"))
        shutil.rmtree(tmp / "encoding")
        write_json(tmp / "vocab.json", {"size": tokenizer.vocab_size, "pad": PAD, "unk": UNK, "bos": BOS,
                                        "eos": EOS, "sha256": tokenizer.sha256})
    return Tokenizer(out_dir)


def load_tokenized(tokenized_dir: Path = Path("data/tokenized"), splits: tuple[str, ...] | None = None) -> DatasetDict:
    """Every split of the tokenized dataset, or only `splits`: training opens train and val alone, so that
    nothing it does (tuning above all) can read a test set."""
    folder = Path(tokenized_dir) / "dataset"
    if not (folder / "dataset_dict.json").is_file():
        raise DataError(f"no tokenized dataset in {tokenized_dir}; run the tokenize stage first: dvc repro tokenize")
    if splits is None:
        return load_from_disk(str(folder))
    return DatasetDict({split: load_from_disk(str(folder / split)) for split in splits})
