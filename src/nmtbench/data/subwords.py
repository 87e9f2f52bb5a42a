"""The subword models a run reads: the sentencepiece model of each side, loaded from the tokenize stage's folder or a
trained model's, and the ids it reserves. Everything that encodes a source or decodes a translation reads them
through here, without the tokenize stage's dataset libraries (data/tokenizer.py trains and applies them).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from nmtbench.data.sources import DataError

PAD, UNK, BOS, EOS = 0, 1, 2, 3
JOINT = "spm"  # file stem of the joint model: spm.model, spm.vocab
PER_SIDE = {"src": "spm.src", "tgt": "spm.tgt"}  # file stems of one model per side


class Subwords:
    """One trained sentencepiece model; ids carry no bos/eos, which the model side adds."""

    def __init__(self, model: Path):
        proto = Path(model).read_bytes()
        self.sha256 = hashlib.sha256(proto).hexdigest()
        try:
            self.sp = spm.SentencePieceProcessor(model_proto=proto)
        except RuntimeError:  # sentencepiece's words name its own source line, not the file
            raise DataError(f"{model}: not a sentencepiece model (damaged or cut short); copy it again from the "
                            "tokenize stage's data/tokenized, or rerun it: dvc repro tokenize") from None

    @property
    def size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self.sp.encode(texts)

    def decode(self, ids: Iterable[int]) -> str:
        # pad, bos and eos are control pieces, which sentencepiece decodes to nothing.
        return self.sp.decode([int(i) for i in ids])


def model_files(folder: Path) -> list[Path]:
    """The sentencepiece models in folder: [spm.model] (joint), [spm.src.model, spm.tgt.model], or none."""
    for stems in ((JOINT,), (PER_SIDE["src"], PER_SIDE["tgt"])):
        files = [Path(folder) / f"{stem}.model" for stem in stems]
        if all(file.is_file() for file in files):
            return files
    return []


class Tokenizer:
    """The subwords of both sides, read from the tokenize stage's folder or a trained model's: sources are encoded
    with the source's model and translations decoded with the target's, which are one with a joint vocabulary."""

    def __init__(self, folder: Path):
        self.files = model_files(folder)
        if not self.files:
            raise DataError(f"no sentencepiece model in {folder}; run the tokenize stage first: dvc repro tokenize")
        self.source = Subwords(self.files[0])
        self.target = self.source if len(self.files) == 1 else Subwords(self.files[1])

    @property
    def joint(self) -> bool:
        return self.source is self.target

    @property
    def record(self) -> dict:
        """vocab.json: size and sha256 of the joint model, or of the source's with the target's as target_size
        and target_sha256."""
        source = self.source
        record = {"size": source.size, "pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS, "sha256": source.sha256}
        if not self.joint:
            record |= {"target_size": self.target.size, "target_sha256": self.target.sha256}
        return record

    def encode(self, text: str) -> list[int]:
        """A source sentence's ids."""
        return self.source.encode(text)

    def decode(self, ids: Iterable[int]) -> str:
        """A translation's text."""
        return self.target.decode(ids)

    def __str__(self) -> str:
        return " and ".join(map(str, self.files))


def vocab_id(record: dict) -> str:
    """The vocabularies of a vocab.json record (or a checkpoint's copy of one) in one string: the joint model's
    sha256, or the source's and the target's joined by +."""
    return "+".join(record[key] for key in ("sha256", "target_sha256") if key in record)
