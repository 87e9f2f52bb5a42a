"""What the stages after training read back: the vocabulary record and a trained model from its checkpoint.

Below training in the layering: the model is rebuilt from the checkpoint's hyperparameters through the
model registry, so decoding, evaluation and analysis never import the training code.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from nmtbench.data.tokenizer import Tokenizer
from nmtbench.models.interface import Seq2Seq
from nmtbench.models.registry import build_model


class CheckpointError(ValueError):
    """A checkpoint that is missing or does not fit the current vocabulary."""


def read_vocab(tokenized_dir: Path) -> dict:
    path = Path(tokenized_dir) / "vocab.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; run the tokenize stage first (dvc repro tokenize)")
    return json.loads(path.read_text())


def load_model(checkpoint_path: Path, tokenizer: Tokenizer, device: torch.device | str = "cpu") -> Seq2Seq:
    """Rebuild a trained model from its checkpoint onto device (whichever device it was saved from),
    refusing one trained with another tokenizer."""
    checkpoint_path = Path(checkpoint_path)
    if not checkpoint_path.is_file():
        raise CheckpointError(f"{checkpoint_path} is missing; train the model first (dvc repro train@<name>-<seed>)")
    try:
        checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
        hparams = checkpoint["hyper_parameters"]  # TranslationModule's arguments
        model = build_model(hparams["name"], hparams["block"], hparams["vocab_size"], hparams["pad_id"])
        # the module holds the model as `model`: its weights are the state_dict's "model." entries
        model.load_state_dict({key.removeprefix("model."): value for key, value in checkpoint["state_dict"].items()
                               if key.startswith("model.")})
    except Exception as error:  # torch raises many kinds for an unreadable file
        raise CheckpointError(f"{checkpoint_path} is not a readable nmtbench checkpoint ({type(error).__name__}); "
                              "retrain the model or restore the file") from error
    if hparams["vocab_sha256"] != tokenizer.sha256:
        raise CheckpointError(f"{checkpoint_path} was trained with another vocabulary than {tokenizer.path}; "
                              f"retrain it (dvc repro train@{hparams['name']}-{hparams['seed']}) "
                              "or use the tokenizer it was trained with")
    return model.to(device).eval()
