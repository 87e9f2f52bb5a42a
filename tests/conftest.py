"""Shared fixtures: tiny models of every variant, and a tiny Multi30k-shaped mirror with its own checksums."""
from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest
import torch

from nmtbench.models.registry import build_model

# Tiny models: one entry per variant the shared model and search tests run on.
V, PAD, BOS, EOS = 20, 0, 2, 3

RNN = {"family": "rnn", "embed_dim": 12, "hidden_dim": 16, "dropout": 0.0}
TRANSFORMER = {"family": "transformer", "d_model": 16, "heads": 2, "layers": 2, "d_ff": 32, "dropout": 0.0}
TINY_VARIANTS = {
    **{f"{cell}_{attention}": {**RNN, "cell": cell, "attention": attention}
       for cell in ("rnn", "gru", "lstm") for attention in ("none", "dot", "general", "reduced_rank", "additive")},
    "lstm_uni_no_feeding": {**RNN, "bidirectional": False, "input_feeding": False, "layers": 2},
    "gru_additive_2layers": {**RNN, "cell": "gru", "layers": 2},
    "transformer_post": TRANSFORMER,
    "transformer_pre": {**TRANSFORMER, "norm": "pre"},
    "transformer_learned": {**TRANSFORMER, "positions": "learned", "max_positions": 32},
    "transformer_relative": {**TRANSFORMER, "positions": "relative", "relative_clip": 3},
    "decoder_only": {**TRANSFORMER, "family": "decoder_only"},
    "decoder_only_prefix_learned": {**TRANSFORMER, "family": "decoder_only", "prefix_attention": True,
                                    "positions": "learned", "norm": "post"},
    "cnn": {"family": "cnn", "embed_dim": 12, "channels": 16, "kernel": 3, "dropout": 0.0},
    "cnn_wide_kernel": {"family": "cnn", "embed_dim": 12, "channels": 16, "kernel": 5, "encoder_layers": 3,
                        "decoder_layers": 1, "dropout": 0.0},
}


def make_tiny_model(name, seed=0):
    """A tiny model of every registered variant, in eval mode, the same for the same seed."""
    torch.manual_seed(seed)
    return build_model(name, TINY_VARIANTS[name], V, PAD).eval()


# en-de pairs chosen to exercise each filter of the prepare stage (run with max_length=8, max_length_ratio=3).
TINY_TRAIN = [
    ("A dog runs.", "Ein Hund rennt."),
    ("", "Leer."),                                      # empty
    ("   ", "Nur Leerzeichen."),                        # empty: whitespace only
    ("one two three four five six seven eight nine", "eins zwei drei vier fünf sechs sieben acht neun"),  # too_long
    ("a b c d e f g", "x y"),                           # length_ratio: 7 / 2 = 3.5
    ("Two  cats sleep. ", "Zwei Katzen schlafen."),     # kept exactly, double and trailing space included
    ("a b c", "x"),                                     # kept: ratio 3.0 is not above 3
    ("Grüße „quoted“ 漢字", "Ünïcödé ok"),
]
TINY_VAL = [
    ("A man sings.", "Ein Mann singt."),
    ("A woman.", ""),                                   # empty, dropped from val too
    ("one two three four five six seven eight nine ten", "eins"),  # long pairs are kept outside train
]
TINY_TEST_2016 = [("A cat.", "Eine Katze."), ("Two birds fly.", "Zwei Vögel fliegen.")]
TINY_TEST_2017 = [("Rain falls.", "Regen fällt.")]


def tiny_files() -> dict[str, list[str]]:
    """File name -> lines for en and de (fr copies en), with no test_2017_flickr.cs like the real dataset."""
    files = {}
    for split, pairs in (("train", TINY_TRAIN), ("val", TINY_VAL), ("test_2016_flickr", TINY_TEST_2016),
                         ("test_2017_flickr", TINY_TEST_2017)):
        files[f"{split}.en.gz"] = files[f"{split}.fr.gz"] = [src for src, _ in pairs]
        files[f"{split}.de.gz"] = [tgt for _, tgt in pairs]
    return files


@pytest.fixture
def make_data_mirror(tmp_path):
    """Factory: write {file name: lines or raw bytes} gzipped into a folder; returns (folder, checksums)."""
    def make(files: dict[str, list[str] | bytes] | None = None, name: str = "mirror") -> tuple[Path, dict[str, str]]:
        folder = tmp_path / name
        folder.mkdir()
        checksums = {}
        for file_name, content in (tiny_files() if files is None else files).items():
            raw = content if isinstance(content, bytes) else "".join(f"{line}\n" for line in content).encode()
            path = folder / file_name
            path.write_bytes(gzip.compress(raw, mtime=0))
            checksums[file_name] = hashlib.sha256(path.read_bytes()).hexdigest()
        return folder, checksums
    return make


@pytest.fixture
def old_output(tmp_path):
    """An earlier complete output of the prepare stage in tmp_path/out, which a failed run must leave as it was."""
    (tmp_path / "out" / "prepared").mkdir(parents=True)
    (tmp_path / "out" / "prepared" / "old-output").write_text("kept")


def assert_nothing_written(tmp_path):
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["prepared"]  # no stats, no work or temp folder
    assert [p.name for p in (tmp_path / "out" / "prepared").iterdir()] == ["old-output"]
