"""Stage `train@<name>-<seed>`: fit one model variant with one seed and keep its best checkpoint and its figures."""
from __future__ import annotations

import contextlib
import math
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint, Timer, TQDMProgressBar
from lightning.pytorch.utilities import rank_zero_only

from nmtbench.config import ConfigError, Params, TrainConfig
from nmtbench.data.datamodule import TranslationData
from nmtbench.data.subwords import Tokenizer, model_files, vocab_id
from nmtbench.data.tokenized import Split, TokenizedSplits
from nmtbench.files import PidLock, write_json
from nmtbench.loading import read_vocab
from nmtbench.models.registry import model_config
from nmtbench.provenance import stamp
from nmtbench.run_paths import RAISABLE, RunPaths
from nmtbench.tracking import finish_run, make_wandb_logger, run_tags
from nmtbench.training.allocator import reuse_freed_memory
from nmtbench.training.budget import FlopBudget, ValidateLastStep, budget_limits
from nmtbench.training.checkpoints import (
    AtomicCheckpointIO,
    ResumePoint,
    Snapshots,
    average_state_dicts,
    resumable_checkpoint,
)
from nmtbench.training.curves import LearningCurve, ValidationBleu, best_validation
from nmtbench.training.module import TranslationModule
from nmtbench.training.precision import (
    detect_hardware,
    precision_plugin,
    refuse_unsupported,
    resolve_precision,
)

# train.early_stopping_metric -> the logged metric that early stopping and the best checkpoint follow
BEST = {"loss": ("val/loss", "min"), "bleu": ("val/bleu", "max")}


class EpochProgressBar(TQDMProgressBar):
    """Lightning's bar, which also names the epoch and its length when a run resumes in the middle of one.

    Lightning skips on_train_epoch_start for the epoch it resumes, so its bar would read "Training: 310/?" until
    the next epoch begins.
    """

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        super().on_train_start(trainer, module)
        if trainer.fit_loop.restarted_mid_epoch:
            self.on_train_epoch_start(trainer)


def train(params: Params, name: str, seed: int | None = None, tokenized_dir: Path = Path("data/tokenized"),
          root: Path = Path(".")) -> dict:
    """Train one run of the grid: model `name` with `seed` (default: the first of params.seeds).

    Returns the figures of train.json; the file holds them and their provenance (nmtbench.provenance).
    """
    started = time.perf_counter()
    model_config(name, params.model_block(name))  # refuse a bad block before any work
    seed = params.seeds[0] if seed is None else seed
    if params.train.accelerator == "gpu" and not torch.cuda.is_available():
        raise ConfigError("train.accelerator: gpu, but torch finds no CUDA GPU on this machine; set "
                          "train.accelerator: cpu (or auto), or run where a GPU and a CUDA build of torch are")
    vocab = read_vocab(tokenized_dir)
    paths = RunPaths(name, seed, root)
    with run_lock(paths):
        return fit(params, paths, vocab, tokenized_dir, started)


def run_lock(paths: RunPaths):
    """One training of a run at a time: two would write one checkpoint folder over each other. Under DDP the other
    ranks are rank 0's own processes (started by it, or by srun with it), so rank 0 alone takes it."""
    if rank_zero_only.rank != 0:
        return contextlib.nullcontext()
    return PidLock(paths.train_lock,
                   f"another nmtbench train of {paths.model} seed {paths.seed} (pid {{pid}}) is writing "
                   f"{paths.model_dir}; wait for it or stop it (kill {{pid}}), then rerun")


def fit(params: Params, paths: RunPaths, vocab: dict, tokenized_dir: Path, started: float) -> dict:
    """The run of train(), under its lock: the module and its data, the callbacks, the trainer, then what it wrote."""
    name, seed, block, cfg = paths.model, paths.seed, params.model_block(paths.model), params.train
    L.seed_everything(seed, workers=True, verbose=False)
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    reuse_freed_memory()

    module = TranslationModule(name, block, vocab, cfg.model_dump(), seed)
    data = TranslationData(tokenized_dir, cfg.batch_tokens, seed, cfg.num_workers, cfg.batching)
    resume_from = resumable_checkpoint(paths.unfinished, module.resumable_fingerprints,
                                       set_aside=rank_zero_only.rank == 0)
    logger = make_wandb_logger(params.wandb, f"{name}-seed{seed}", Path("."),
                               {"model": name, "seed": seed, **block, **cfg.model_dump(),
                                "params": module.model.num_parameters()},
                               run_tags(name, block, seed))
    watch = RunCallbacks.of(cfg, paths, module, tokenized_dir, logged=bool(logger))
    precision, trainer = make_trainer(cfg, module, watch, logger, paths.model_dir, resumed=bool(resume_from))
    trainer.fit(module, datamodule=data, ckpt_path=resume_from)
    if not watch.checkpoint.best_model_path:  # the time budget ran out before the first validation
        trainer.validate(module, datamodule=data, verbose=False)
        watch.checkpoint.on_validation_end(trainer, module)
    metrics = run_metrics(trainer, module, watch, cfg.early_stopping_metric, precision, vocab)
    return finish(trainer, metrics, watch, params, paths, tokenized_dir, logger, started)


@dataclass
class RunCallbacks:
    """What watches a run: the best checkpoint, the learning curve, the FLOP budget, and where set, the snapshots to
    average and early stopping; `all`, every callback the trainer gets, in the order they act."""
    checkpoint: ModelCheckpoint
    curve: LearningCurve
    flop_budget: FlopBudget
    max_time: timedelta | None  # the time budget, for the trainer
    snapshots: Snapshots | None
    early_stopping: EarlyStopping | None
    all: list

    @classmethod
    def of(cls, cfg: TrainConfig, paths: RunPaths, module: TranslationModule, tokenized_dir: Path,
           logged: bool) -> RunCallbacks:
        monitor, mode = BEST[cfg.early_stopping_metric]
        # every callback that reads a validation acts on it at its end, not at the epoch's end: ResumePoint saves
        # right after them, and a run resumed from there must neither miss their state nor find the epoch's end
        # without metrics
        checkpoint = ModelCheckpoint(dirpath=paths.model_dir, filename="best", monitor=monitor, mode=mode,
                                     save_top_k=1, auto_insert_metric_name=False, enable_version_counter=False,
                                     save_on_train_epoch_end=False)
        max_time, flop_budget = budget_limits(cfg.budget, module.model)
        curve = LearningCurve(paths.learning_curve, flop_budget)
        # the bar reads the logged loss off the device: every 10 steps, like the loggers, not at every step
        callbacks = [checkpoint, curve, flop_budget, ValidateLastStep(), EpochProgressBar(refresh_rate=10)]
        if logged:  # the learning rate, module.LR_METRIC, at each scheduler's interval
            callbacks.append(LearningRateMonitor(logging_interval=None))
        snapshots = None
        if cfg.average_last:  # the weights of the last average_last validations (or epoch ends), by step
            snapshots = Snapshots(paths.unfinished, cfg.average_last, cfg.average_at == "epoch_ends")
            callbacks.append(snapshots)
        if cfg.checkpoint_every_steps:  # after the other checkpoints, so that it holds their state of each validation
            callbacks.append(ResumePoint(paths.unfinished, cfg.checkpoint_every_steps))
        if cfg.val_bleu_sentences != 0:
            val = TokenizedSplits(tokenized_dir)["val"]
            val = Split(val.table.slice(0, min(cfg.val_bleu_sentences or len(val), len(val))))
            callbacks.append(ValidationBleu(Tokenizer(tokenized_dir), list(val["src_ids"]), list(val["tgt"])))
        early_stopping = None
        if cfg.early_stopping_patience:
            early_stopping = EarlyStopping(monitor=monitor, mode=mode, patience=cfg.early_stopping_patience,
                                           check_on_train_epoch_end=False)
            callbacks.append(early_stopping)
        return cls(checkpoint, curve, flop_budget, max_time, snapshots, early_stopping, callbacks)


def make_trainer(cfg: TrainConfig, module: TranslationModule, watch: RunCallbacks, logger, model_dir: Path,
                 resumed: bool) -> tuple[str, L.Trainer]:
    """The precision this machine trains the run in, and Lightning's trainer for it."""
    hardware = detect_hardware(cfg.accelerator)
    precision = resolve_precision(cfg.precision, hardware)
    refuse_unsupported(precision, hardware, module.model)
    trainer = L.Trainer(
        accelerator=cfg.accelerator, devices=cfg.devices, num_nodes=cfg.num_nodes, strategy=cfg.strategy,
        deterministic=cfg.deterministic,
        max_epochs=cfg.max_epochs, max_steps=cfg.max_steps, max_time=watch.max_time,
        accumulate_grad_batches=cfg.accumulate_grad_batches,
        gradient_clip_val=cfg.gradient_clip_val or None, val_check_interval=cfg.val_check_interval,
        logger=logger or False, callbacks=watch.all, num_sanity_val_steps=0, log_every_n_steps=10,
        use_distributed_sampler=False,  # the token batch sampler shards by rank itself
        enable_model_summary=False, default_root_dir=model_dir,
        plugins=[AtomicCheckpointIO(), precision_plugin(precision, hardware.device)],
    )
    # Lightning warns that a mid-epoch resume repeats the epoch's batches unless the loader is stateful;
    # here the data module restores the position (TranslationData.state_dict), so the warning is wrong
    warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch ended")
    # the module's on_before_batch_transfer (the source lengths on the host) is meant, not the data module's
    warnings.filterwarnings("ignore", message="You have overridden `on_before_batch_transfer` in `LightningModule`")
    if resumed:  # and that the folder is not empty: it holds the run's own unfinished/ (a foreign one was set
        # aside by resumable_checkpoint); a fresh run over an earlier run's best.ckpt still gets the warning
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
    return precision, trainer


def run_metrics(trainer: L.Trainer, module: TranslationModule, watch: RunCallbacks, metric: str, precision: str,
                vocab: dict) -> dict:
    """The figures of train.json, read off the finished trainer and its learning curve."""
    rows = watch.curve.rows
    best = min(row["val_loss"] for row in rows)
    bleus = [row["val_bleu"] for row in rows if row["val_bleu"] != ""]
    kept = best_validation(rows, metric)  # the validation best.ckpt holds
    return {
        "params": module.model.num_parameters(),
        "train_seconds": round(watch.curve.elapsed, 2),  # of the whole run: a resumed run's earlier processes too
        "train_tokens_per_s": round(module.target_tokens / max(module.train_seconds, 1e-9), 1),
        "best_val_loss": round(best, 4),
        "best_val_ppl": round(math.exp(min(best, 50.0)), 2),
        "best_val_bleu": max(bleus) if bleus else None,
        "steps": trainer.global_step,
        "epochs": trainer.current_epoch,
        "target_tokens": module.target_tokens,
        "train_flops": watch.flop_budget.spent,
        "best_epoch": kept["epoch"], "best_step": kept["step"], "best_train_flops": kept["train_flops"],
        "precision": precision,
        "stopped_by": stopped_by(trainer, watch.early_stopping, watch.flop_budget),
        "vocab": vocab_id(vocab),  # the subwords it was trained on, which an export read elsewhere is checked by
    }


def finish(trainer: L.Trainer, metrics: dict, watch: RunCallbacks, params: Params, paths: RunPaths,
           tokenized_dir: Path, logger, started: float) -> dict:
    """Write what a finished run leaves (train.json, a model folder that translates on its own, the averaged
    weights) and keep what an unconverged one needs to go on, or remove it; returns the metrics."""
    cfg, unfinished = params.train, paths.unfinished
    # a run meant to stop early that reached its ceiling or its budget first is not converged: it keeps what it needs
    # to go on when that is raised (neither is part of the run's fingerprint)
    unconverged = watch.early_stopping is not None and metrics["stopped_by"] in RAISABLE
    # a budget can stop a run within an epoch, and a checkpoint saved after that stop, resumed, would not validate
    # the rest of the epoch (Lightning counts it done): the run then goes on from its last periodic checkpoint
    # (train.checkpoint_every_steps), the steps since repeated
    if unconverged and float(watch.curve.rows[-1]["epoch"]).is_integer():
        trainer.save_checkpoint(unfinished / "last.ckpt")  # every process: under DDP saving is collective
    if not trainer.is_global_zero:  # with data parallelism, one process writes the results
        return metrics
    # the model folder alone is enough to translate
    for file in [*model_files(tokenized_dir), Path(tokenized_dir) / "vocab.json"]:
        shutil.copyfile(file, Path(paths.model_dir) / file.name)
    if cfg.average_last:
        metrics["averaged_steps"] = average_into_best(watch.snapshots, watch.checkpoint.best_model_path)
    provenance = stamp(started)
    write_json(paths.train_metrics, {**metrics, "provenance": provenance})
    if logger:
        finish_run(logger.experiment, metrics, provenance)
    if unconverged:
        key = RAISABLE[metrics["stopped_by"]]
        reached = (f"max_epochs ({cfg.max_epochs})" if key == "max_epochs" else
                   f"its {cfg.budget.kind} budget ({cfg.budget.value:g})")
        last = unfinished / "last.ckpt"
        going_on = (f"to continue it from {last}" if last.is_file() else "to train it again from the start (it stopped "
                    "within an epoch before its first periodic checkpoint: train.checkpoint_every_steps)")
        print(f"nmtbench train: {paths.model} reached {reached} before early stopping, so it has not "
              f"converged; raise models.{paths.model}.train.{key} and train again {going_on}", file=sys.stderr)
    else:
        shutil.rmtree(unfinished, ignore_errors=True)  # finished: nothing left to resume
    return metrics


def stopped_by(trainer: L.Trainer, early_stopping: EarlyStopping | None, flop_budget: FlopBudget) -> str:
    """Why the run ended: early_stopping (patience spent), budget (its FLOPs or time), max_steps or max_epochs;
    interrupted where none of them holds (a run stopped from outside, e.g. by a signal)."""
    if early_stopping is not None and early_stopping.wait_count >= early_stopping.patience:
        return "early_stopping"
    timer = next((callback for callback in trainer.callbacks if isinstance(callback, Timer)), None)
    if flop_budget.exhausted or (timer is not None and timer.time_remaining() <= 0):
        return "budget"
    if 0 < trainer.max_steps <= trainer.global_step:
        return "max_steps"
    if trainer.max_epochs is not None and trainer.current_epoch >= trainer.max_epochs:
        return "max_epochs"
    return "interrupted"


def average_into_best(snapshots: ModelCheckpoint, best_path: str) -> list[int]:
    """Replace the weights of best.ckpt, the checkpoint evaluation reads, by the mean of the last validations'.

    Returns the steps averaged (fewer than average_last when training validated fewer times, none
    when a budget ran out before the first validation: best.ckpt is then left as it is).
    """
    by_step = sorted(snapshots.best_k_models, key=lambda path: float(snapshots.best_k_models[path]))
    if not by_step:
        return []
    best = torch.load(best_path, map_location="cpu", weights_only=False)
    best["state_dict"] = average_state_dicts([Path(p) for p in by_step])
    AtomicCheckpointIO().save_checkpoint(best, best_path)
    return [int(snapshots.best_k_models[path]) for path in by_step]
