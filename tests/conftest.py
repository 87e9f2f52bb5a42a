"""Shared fixtures: tiny models of every variant, and a tiny Multi30k-shaped mirror with its own checksums."""
from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

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


def write_mirror(folder: Path, files: dict[str, list[str] | bytes] | None = None) -> tuple[Path, dict[str, str]]:
    """Write {file name: lines or raw bytes} gzipped into a new folder; returns (folder, checksums)."""
    folder.mkdir()
    checksums = {}
    for file_name, content in (tiny_files() if files is None else files).items():
        raw = content if isinstance(content, bytes) else "".join(f"{line}\n" for line in content).encode()
        path = folder / file_name
        path.write_bytes(gzip.compress(raw, mtime=0))
        checksums[file_name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return folder, checksums


@pytest.fixture
def make_data_mirror(tmp_path):
    """Factory: write_mirror into tmp_path / name."""
    def make(files: dict[str, list[str] | bytes] | None = None, name: str = "mirror") -> tuple[Path, dict[str, str]]:
        return write_mirror(tmp_path / name, files)
    return make


# params of a scratch project on the tiny mirror: merged onto params.yaml, with these models only
TINY_PARAMS = {
    "data": {"max_length": 8},
    "tokenize": {"vocab_size": 305},
    "train": {"batch_tokens": 64, "max_epochs": 2, "warmup_steps": 2, "budget": {"kind": "none"}},
    "evaluate": {"beam": 2, "max_len_a": 1.0, "max_len_b": 2},
    "beam_sweep": {"model": "tiny", "seed": 42, "beams": [1, 2], "alphas": [1.0]},
    "compare": {"baseline": "tiny", "bootstrap_resamples": 10, "examples": [0]},
    "wandb": {"group": "unit"},
    "models": {"tiny": {"family": "transformer", "d_model": 16, "heads": 2, "layers": 1, "d_ff": 32}},
}
ROOT = Path(__file__).resolve().parents[1]


def write_tiny_project(folder: Path, mirror: Path, checksums: dict[str, str], models: dict | None = None) -> dict:
    """params.yaml, data/prepared and data/tokenized of the tiny mirror in folder (the current folder
    for the stages); returns the raw params."""
    from nmtbench.config import DataConfig, TokenizeConfig, merge
    from nmtbench.data.prepare import prepare
    from nmtbench.data.tokenizer import tokenize

    raw = merge(yaml.safe_load((ROOT / "params.yaml").read_text()), TINY_PARAMS)
    raw["models"] = models or TINY_PARAMS["models"]
    (folder / "params.yaml").write_text(yaml.safe_dump(raw))
    prepare(DataConfig(max_length=8), mirror, folder / "data/prepared", folder / "data/stats.json",
            folder / "data/raw", checksums)
    tokenize(TokenizeConfig(vocab_size=305), folder / "data/prepared", folder / "data/tokenized")
    return raw


# the trained project: one Transformer and one attention LSTM, so each family's decoding is covered
TRAINED_MODELS = {"tiny": TINY_PARAMS["models"]["tiny"],
                  "tiny_rnn": {"family": "rnn", "cell": "lstm", "attention": "dot", "embed_dim": 12, "hidden_dim": 16}}


@pytest.fixture(scope="session")
def trained_project(tmp_path_factory) -> Path:
    """A tiny project trained and evaluated once per session (W&B disabled); copy it before changing it."""
    from nmtbench.cli import main

    folder = tmp_path_factory.mktemp("trained")
    mirror, checksums = write_mirror(folder.parent / f"{folder.name}-mirror")
    write_tiny_project(folder, mirror, checksums, TRAINED_MODELS)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("WANDB_MODE", "disabled")
        for name in TRAINED_MODELS:
            assert main(["train", name]) == 0 and main(["evaluate", name]) == 0
    return folder


@pytest.fixture
def old_output(tmp_path):
    """An earlier complete output of the prepare stage in tmp_path/out, which a failed run must leave as it was."""
    (tmp_path / "out" / "prepared").mkdir(parents=True)
    (tmp_path / "out" / "prepared" / "old-output").write_text("kept")


def assert_nothing_written(tmp_path):
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["prepared"]  # no stats, no work or temp folder
    assert [p.name for p in (tmp_path / "out" / "prepared").iterdir()] == ["old-output"]


def pipeline_workspace(workspace: Path, profile: Path, **env: str):
    """A DVC workspace of this project's params.yaml + profile; returns run(*cmd), which runs a command there."""
    # the stages call `nmtbench` and `dvc`: put this interpreter's scripts first on PATH
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "WANDB_SILENT": "true", "PATH": path, **env}
    subprocess.run([sys.executable, "-m", "nmtbench", "--params", str(ROOT / "params.yaml"),
                    "workspace", str(workspace), "--profile", str(profile)], check=True, env=env)
    return lambda *cmd: subprocess.run(cmd, cwd=workspace, env=env, check=True, capture_output=True, text=True)
