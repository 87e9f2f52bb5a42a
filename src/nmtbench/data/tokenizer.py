"""The tokenize stage: sentencepiece trained on train only, one joint model for both sides or one per side
(tokenize.joint: false), and the splits encoded with it: sources with the source's, targets with the target's.

Detokenization is lossless: no normalization, whitespace kept as is, and byte fallback for characters never
seen in train, so decode(encode(text)) == text for every string and BLEU is scored on the exact references.

Neither step holds the corpus in Python: sentencepiece reads a bounded, seeded sample of train streamed from
the memory-mapped prepared dataset, and encoding is a batched map writing Arrow int32 columns to disk.
"""
from __future__ import annotations

import io
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import sentencepiece as spm
from datasets import Dataset, DatasetDict, Features, List, Value, load_from_disk

from nmtbench.config import Params, TokenizeConfig
from nmtbench.data.prepare import load_prepared
from nmtbench.data.sources import DataError
from nmtbench.data.subwords import BOS, EOS, JOINT, PAD, PER_SIDE, UNK, Subwords, Tokenizer
from nmtbench.data.tokenized import TokenizedSplits
from nmtbench.files import atomic_dir, write_json

SIDE_NAMES = {"src": "source", "tgt": "target"}
SEED = 0  # fixed rather than train.seed, so changing the training seed keeps the vocabulary
ROWS_PER_BATCH = 10_000  # rows read or encoded at a time: a few MB of text
ROWS_PER_PROCESS = 200_000  # a split encodes in one process per this many rows, up to one per core
FEATURES = Features({"src": Value("string"), "tgt": Value("string"),
                     "src_ids": List(Value("int32")), "tgt_ids": List(Value("int32"))})


class SubwordModel(NamedTuple):
    """One sentencepiece model the stage trains: its files' stem, the sides of train it learns from, its size and
    the params key that sets the size."""
    stem: str
    sides: tuple[str, ...]
    size: int
    key: str

    @property
    def side(self) -> str:
        """What of train it learns from, after `train`: nothing for the joint model, else `'s source side`."""
        return "" if len(self.sides) == 2 else f"'s {SIDE_NAMES[self.sides[0]]} side"


def subword_models(cfg: TokenizeConfig) -> list[SubwordModel]:
    """The joint model, or the source's and the target's (tokenize.joint: false)."""
    if cfg.joint:
        return [SubwordModel(JOINT, ("src", "tgt"), cfg.vocab_size, "tokenize.vocab_size")]
    target_key = "tokenize.vocab_size" if cfg.target_vocab_size is None else "tokenize.target_vocab_size"
    return [SubwordModel(PER_SIDE["src"], ("src",), cfg.vocab_size, "tokenize.vocab_size"),
            SubwordModel(PER_SIDE["tgt"], ("tgt",), cfg.target_vocab_size or cfg.vocab_size, target_key)]


def training_sentences(train: Dataset, sample: int, sides: tuple[str, ...] = ("src", "tgt")) -> Iterator[str]:
    """Every sentence of train's sides, side after side (sources, then targets); when that is more than sample
    sentences, a seeded uniform draw of sample of them without replacement, still in that order."""
    pairs = len(train)
    chosen = (None if len(sides) * pairs <= sample
              else np.sort(np.random.default_rng(SEED).choice(len(sides) * pairs, sample, replace=False)))
    for first, side in zip(range(0, len(sides) * pairs, pairs), sides):
        rows = train if chosen is None else train.select(chosen[(chosen >= first) & (chosen < first + pairs)] - first)
        for batch in rows.select_columns([side]).iter(batch_size=ROWS_PER_BATCH):
            yield from batch[side]


def train_sentencepiece(sentences: Iterable[str], cfg: TokenizeConfig, model: SubwordModel) -> bytes:
    """The serialized model, turning sentencepiece's cryptic vocabulary-size errors into DataErrors."""
    spm.set_random_generator_seed(SEED)
    written = io.BytesIO()  # not model_prefix, which would record the temp folder's name in the model
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=written,
            model_type=cfg.model_type, vocab_size=model.size, character_coverage=cfg.character_coverage,
            pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
            normalization_rule_name="identity", remove_extra_whitespaces=False, byte_fallback=True,
            input_sentence_size=0, shuffle_input_sentence=False,  # all it is given, in order: reproducible
            num_threads=2, minloglevel=2)
    except RuntimeError as e:
        if m := re.search(r"smaller than required_chars\. (\d+) vs (\d+)", str(e)):
            raise DataError(f"{model.key}: {m[1]} cannot hold the 4 special tokens, 256 fallback bytes and the "
                            f"characters of train{model.side}; raise {model.key} to at least {m[2]}") from e
        if m := re.search(r"Vocabulary size too high \((\d+)\).*<= (\d+)", str(e)):
            raise DataError(f"{model.key}: {m[1]} is more pieces than the train split{model.side} yields; "
                            f"lower {model.key} to at most {m[2]}") from e
        raise
    return written.getvalue()


def encode_rows(rows: dict[str, list[str]], tokenizer: Tokenizer) -> dict[str, list[list[int]]]:
    return {"src_ids": tokenizer.source.encode_batch(rows["src"]),
            "tgt_ids": tokenizer.target.encode_batch(rows["tgt"])}


def encode_split(tokenizer: Tokenizer, data: Dataset, cache_file: Path) -> Dataset:
    """data with its src_ids and tgt_ids, written to cache_file (and its per-process shards)."""
    processes = min(os.cpu_count() or 1, len(data) // ROWS_PER_PROCESS)
    return data.map(encode_rows, fn_kwargs={"tokenizer": tokenizer}, batched=True, batch_size=ROWS_PER_BATCH,
                    features=FEATURES, num_proc=processes if processes > 1 else None,
                    cache_file_name=str(cache_file), new_fingerprint=cache_file.stem,
                    desc=f"encoding {cache_file.stem}")


def tokenize(params: Params | TokenizeConfig, prepared_dir: Path = Path("data/prepared"),
             out_dir: Path = Path("data/tokenized")) -> Tokenizer:
    """Run the tokenize stage: out_dir gets spm.model and spm.vocab (or spm.src.* and spm.tgt.*), vocab.json and
    the encoded dataset/."""
    cfg = params.tokenize if isinstance(params, Params) else params
    prepared = load_prepared(prepared_dir)
    with atomic_dir(out_dir) as tmp:
        for model in subword_models(cfg):
            path = tmp / f"{model.stem}.model"
            path.write_bytes(train_sentencepiece(training_sentences(prepared["train"], cfg.sample_sentences,
                                                                    model.sides), cfg, model))
            # the .vocab file is for people reading the vocabulary: one "piece<TAB>score" per id, as sentencepiece
            # writes it
            sp = Subwords(path).sp
            (tmp / f"{model.stem}.vocab").write_text("".join(f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n"
                                                             for i in range(sp.get_piece_size())))
        tokenizer = Tokenizer(tmp)
        encoded = DatasetDict({split: encode_split(tokenizer, data, tmp / "encoding" / f"{split}.arrow")
                               for split, data in prepared.items()})
        encoded.save_to_disk(str(tmp / "dataset"))
        shutil.rmtree(tmp / "encoding")
        write_json(tmp / "vocab.json", tokenizer.record)
    return Tokenizer(out_dir)


def load_tokenized(tokenized_dir: Path = Path("data/tokenized")) -> DatasetDict:
    """Every split of the tokenized dataset through `datasets`, for the notebook and the tests (the stages read it
    with pyarrow: data/tokenized.py)."""
    folder = TokenizedSplits(tokenized_dir).folder  # refuses a missing dataset, naming the stage to run
    return load_from_disk(str(folder))
