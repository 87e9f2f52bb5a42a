"""What the stages after training read back: the vocabulary record and a trained model from its checkpoint, onto
the device a device setting names.

Below training in the layering: the model is rebuilt from the checkpoint's hyperparameters through the
model registry, so decoding, evaluation and analysis never import the training code.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from nmtbench.data.subwords import Tokenizer, vocab_id
from nmtbench.models.interface import Seq2Seq
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab
from nmtbench.param_blocks import ConfigError


class CheckpointError(ValueError):
    """A checkpoint that is missing, or does not fit the current vocabulary or the run the params describe."""


UNSET = "unset"  # a key of a run that one side lacks: a train key added to nmtbench after a checkpoint was written


@dataclass(frozen=True)
class Run:
    """The run params.yaml describes for a model and seed: its model block and train block (for_model's)."""
    name: str
    block: dict
    train: dict
    seed: int
    own_train: tuple[str, ...] = ()  # the train keys of the block's own `train:`, named there in a refusal

    def key(self, path: tuple[str, ...]) -> str:
        """The params.yaml key of a path into run_description: ("model", "d_ff") is models.<name>.d_ff."""
        if path[0] == "model":
            return ".".join((f"models.{self.name}", *path[1:]))
        if path[0] == "train" and path[1] in self.own_train:
            return ".".join((f"models.{self.name}", *path))
        return ".".join(path)


# What a run's description once held and no longer does, newest first: checkpoints written then still resume.
# "budget": the budget was described (before it was left out); "ceiling": the epoch ceiling was too.
EARLIER_DESCRIPTIONS = ("budget", "ceiling")
# train keys added since runs were first described, with the value every earlier run trained with: described only
# where a run sets another, so the fingerprints of the runs before them, and their checkpoints, stay as they were
ADDED_TRAIN_KEYS = {"average_at": "validations", "batching": "nmtbench", "adam_betas": (0.9, 0.98), "adam_eps": 1e-9,
                    "weight_decay": 0.0}


def at_added_default(key: str, value) -> bool:
    """Whether a train key is one of ADDED_TRAIN_KEYS at the value runs trained with before it (a tuple read back
    from YAML or JSON as a list is the same value)."""
    return key in ADDED_TRAIN_KEYS and json.dumps(value) == json.dumps(ADDED_TRAIN_KEYS[key])


def run_description(block: dict, train: dict, vocab: str, seed: int, earlier: str | None = None) -> dict:
    """Everything that decides a run's result (vocab: subwords.vocab_id of the vocabularies), which its fingerprint
    hashes (training.checkpoints.run_fingerprint). The epoch ceiling and the budget (time or FLOPs) decide only where
    a run ends, unless a cosine schedule stretches over the ceiling, so they are left out: a run that reached its
    max_epochs or its budget before early stopping continues when that is raised. earlier: one of
    EARLIER_DESCRIPTIONS, the description as checkpoints written before then had it."""
    left_out = {None: {"max_epochs", "budget"}, "budget": {"max_epochs"}, "ceiling": set()}[earlier]
    if train.get("schedule") == "cosine":
        left_out = left_out - {"max_epochs"}
    train = {key: value for key, value in train.items() if key not in left_out and not at_added_default(key, value)}
    return {"model": block, "train": train, "vocab": vocab, "seed": seed}


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


def load_model(checkpoint_path: Path, tokenizer: Tokenizer, device: torch.device | str = "cpu",
               run: Run | None = None) -> Seq2Seq:
    """Rebuild a trained model from its checkpoint onto device (whichever device it was saved from),
    refusing one trained with another tokenizer, or, given run, for another run than that."""
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
    if run is not None:
        refuse_another_run(checkpoint_path, hparams, run, vocab_id(vocab))
    return model.to(device).eval()


def refuse_another_run(checkpoint_path: Path, hparams: dict, run: Run, vocab: str) -> None:
    """Refuse a checkpoint whose run is not `run`: a block or train key changed since training, say.

    Its hyperparameters are what its fingerprint hashes, so comparing their descriptions compares the fingerprints
    and names each key that differs; checkpoints from before the fingerprint have them too.
    """
    ours = flat(run_description(run.block, run.train, vocab, run.seed))
    theirs = flat(run_description(hparams["block"], hparams["train"], vocab, hparams["seed"]))
    differing = [path for path in {**ours, **theirs} if ours.get(path, UNSET) != theirs.get(path, UNSET)]
    if differing:
        found = "; ".join(f"{run.key(path)}: {ours.get(path, UNSET)} in params.yaml, {theirs.get(path, UNSET)} in "
                          "the checkpoint" for path in differing)
        raise CheckpointError(f"{checkpoint_path} is not the run params.yaml describes for {run.name} ({found}); "
                              f"retrain it (dvc repro train@{run.name}-{run.seed}) or restore the params it was "
                              "trained with")


def flat(description: dict) -> dict[tuple[str, ...], object]:
    """Every leaf of a run description by its path, as the fingerprint reads it (JSON: a tuple is a list)."""
    def leaves(value, path: tuple[str, ...]):
        if isinstance(value, dict):
            return [leaf for key, item in value.items() for leaf in leaves(item, (*path, key))]
        return [(path, value)]
    return dict(leaves(json.loads(json.dumps(description, default=str)), ()))
