"""Checkpoints: written atomically, resumed only by the run that wrote them, and averaged.

A run keeps what it needs to continue (`last.ckpt`, every `train.checkpoint_every_steps` steps and after
every validation, and the weight snapshots of its last validations) in an `unfinished/` folder beside `best.ckpt`; the
folder is removed once the run has finished. Each checkpoint carries the fingerprint of its run (the
model block, the train block and the vocabulary), so a rerun resumes only its own run: a folder left
by another run is set aside under a new name, never mixed into this one.
"""
from __future__ import annotations

import hashlib
import io
import json
import sys
import time
from pathlib import Path

import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from nmtbench.files import write_bytes
from nmtbench.loading import run_description
from nmtbench.training.curves import epochs_done


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, through a temporary file and a rename: a run killed while saving
    leaves the previous checkpoint whole."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        write_bytes(Path(path), buffer.getvalue())


class ResumePoint(ModelCheckpoint):
    """unfinished/last.ckpt, what an interrupted run resumes from: every `every_steps` updates, and after every
    validation, once the curve, early stopping, best.ckpt and the snapshots have taken it in (train.py has them all
    act at the validation's end; Lightning calls the checkpoint callbacks last, in the order given: this one goes after
    the others). Resumed from a save after an epoch's last validation, Lightning goes straight to the epoch's end,
    where a callback left to act there would find no metric and raise, and its state would lack that validation.

    A periodic save on a batch that a validation follows, training going on after it, is left to the save after that
    validation: resumed from a checkpoint taken before it, Lightning counts the batch's epoch done and never validates
    it, so the curve would lose a row and early stopping a validation. Where the validation ends the run (a budget or
    max_steps asked to stop), the periodic save stands and the validation saves nothing: a run resumed with a raised
    budget goes on from before that last validation, which the uninterrupted run never made."""

    def __init__(self, dirpath: Path, every_steps: int):
        super().__init__(dirpath=dirpath, filename="last", every_n_train_steps=every_steps,
                         enable_version_counter=False)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        # Lightning's own test of whether this batch is validated (the epoch's last batch, val_check_interval, a
        # callback asking to stop): private, so lightning is pinned
        if trainer.should_stop or not trainer.fit_loop.epoch_loop._should_check_val_fx(trainer.fit_loop._data_fetcher):
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking and not trainer.should_stop:
            self._save_checkpoint(trainer, self.format_checkpoint_name({}))


class Snapshots(ModelCheckpoint):
    """The weights of the last `keep` validations, by step (validated-<step>.ckpt in the run's unfinished/), which
    train.average_last averages into best.ckpt. With epoch_ends_only, of the validations that close an epoch alone,
    as fairseq averages its epoch checkpoints (checkpointN.pt, scripts/average_checkpoints.py
    --num-epoch-checkpoints): one within an epoch, the last step of a run that max_steps ends there among them,
    writes none."""

    def __init__(self, dirpath: Path, keep: int, epoch_ends_only: bool):
        super().__init__(dirpath=dirpath, filename="validated-{step}", monitor="step", mode="max", save_top_k=keep,
                         save_weights_only=True, auto_insert_metric_name=False, save_on_train_epoch_end=False)
        self.epoch_ends_only = epoch_ends_only

    def on_validation_end(self, trainer, pl_module) -> None:
        if not self.epoch_ends_only or epochs_done(trainer).is_integer():
            super().on_validation_end(trainer, pl_module)


def run_fingerprint(block: dict, train: dict, vocab: str, seed: int, earlier: str | None = None) -> str:
    """sha256 of everything that decides a run's result (loading.run_description, which evaluation reads too): two
    runs with the same one may continue each other. earlier: the fingerprint as checkpoints of an earlier
    description had it (loading.EARLIER_DESCRIPTIONS), so they still resume."""
    described = json.dumps(run_description(block, train, vocab, seed, earlier), sort_keys=True, default=str)
    return hashlib.sha256(described.encode()).hexdigest()


def resumable_checkpoint(unfinished: Path, fingerprints: tuple[str, ...], set_aside: bool = True) -> Path | None:
    """unfinished/last.ckpt when it belongs to the run with one of these fingerprints, else None.

    Anything else in the folder (another run's checkpoint, an unreadable one, snapshots without a
    last.ckpt) is renamed to unfinished.set-aside-<time>, when set_aside (on one process only).
    """
    unfinished = Path(unfinished)
    if not unfinished.is_dir():
        return None
    last = unfinished / "last.ckpt"
    found, step = None, None
    if last.is_file():
        try:
            checkpoint = torch.load(last, map_location="cpu", weights_only=False)
            found, step = checkpoint.get("nmtbench", {}).get("run"), checkpoint.get("global_step")
        except Exception:  # torch raises many kinds for a damaged file; it is set aside like a foreign one
            found = None
    if found in fingerprints:
        print(f"nmtbench train: resuming {last} at step {step}", file=sys.stderr)
        return last
    if set_aside and any(unfinished.iterdir()):
        aside = unfinished.with_name(f"{unfinished.name}.set-aside-{time.strftime('%Y%m%d-%H%M%S')}")
        unfinished.rename(aside)
        print(f"nmtbench train: {unfinished} holds another run's checkpoints (other params or vocabulary); "
              f"moved to {aside}, starting afresh", file=sys.stderr)
    return None


def average_state_dicts(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the checkpoints' weights (accumulated in float64); other tensors from the last."""
    states = [torch.load(p, map_location="cpu", weights_only=False)["state_dict"] for p in paths]
    averaged = {}
    for key, last in states[-1].items():
        if last.is_floating_point():
            total = sum(state[key].double() for state in states)
            averaged[key] = (total / len(states)).to(last.dtype)
        else:
            averaged[key] = last
    return averaged
