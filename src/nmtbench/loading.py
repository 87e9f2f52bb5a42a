"""What the stages after training read back: the vocabulary record and a trained model from its checkpoint, onto
the device a device setting names.

Below training in the layering: the model is rebuilt from the checkpoint's hyperparameters through the
model registry, so decoding, evaluation and analysis never import the training code.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from nmtbench.blocks import ConfigError
from nmtbench.data.tokenizer import Tokenizer, vocab_id
from nmtbench.models.interface import Seq2Seq
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab


class CheckpointError(ValueError):
    """A checkpoint that is missing or does not fit the current vocabulary."""


def read_vocab(tokenized_dir: Path) -> dict:
    path = Path(tokenized_dir) / "vocab.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; run the tokenize stage first (dvc repro tokenize)")
    return json.loads(path.read_text())


def model_vocab(record: dict) -> Vocab:
    """The vocabularies a model is built for, from a vocab.json record: one joint, or target_size for the target."""
    return Vocab.of(record["size"], record.get("target_size"), record["pad"])


def checkpoint_vocab(hparams: dict) -> dict:
    """The vocab.json record a checkpoint was trained with; checkpoints from before separate vocabularies kept
    its size and sha256 as hyperparameters of their own."""
    return hparams.get("vocab") or {"size": hparams["vocab_size"], "pad": hparams["pad_id"],
                                    "sha256": hparams["vocab_sha256"]}


def resolve_device(setting: str, key: str):
    """The torch device of a device setting: auto is cuda when torch sees a GPU, else cpu."""
    if setting == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{key}: cuda, but torch finds no CUDA GPU on this machine; use {key} auto or cpu, "
                          "or run where a GPU and a CUDA build of torch are")
    if setting == "auto":
        setting = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(setting)


def load_model(checkpoint_path: Path, tokenizer: Tokenizer, device: torch.device | str = "cpu") -> Seq2Seq:
    """Rebuild a trained model from its checkpoint onto device (whichever device it was saved from),
    refusing one trained with another tokenizer."""
    checkpoint_path = Path(checkpoint_path)
    if not checkpoint_path.is_file():
        raise CheckpointError(f"{checkpoint_path} is missing; train the model first (dvc repro train@<name>-<seed>)")
    try:
        checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
        hparams = checkpoint["hyper_parameters"]  # TranslationModule's arguments
        vocab = checkpoint_vocab(hparams)
        model = build_model(hparams["name"], hparams["block"], model_vocab(vocab))
        # the module holds the model as `model`: its weights are the state_dict's "model." entries
        model.load_state_dict({key.removeprefix("model."): value for key, value in checkpoint["state_dict"].items()
                               if key.startswith("model.")})
    except Exception as error:  # torch raises many kinds for an unreadable file
        raise CheckpointError(f"{checkpoint_path} is not a readable nmtbench checkpoint ({type(error).__name__}); "
                              "retrain the model or restore the file") from error
    if vocab_id(vocab) != vocab_id(tokenizer.record):
        raise CheckpointError(f"{checkpoint_path} was trained with another vocabulary than {tokenizer}; "
                              f"retrain it (dvc repro train@{hparams['name']}-{hparams['seed']}) "
                              "or use the tokenizer it was trained with")
    return model.to(device).eval()
