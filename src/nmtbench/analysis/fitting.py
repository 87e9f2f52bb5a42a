"""Bounded training for the probes: the project's LightningModule (loss, optimiser, schedule) for a
fixed number of steps, recording the gradient norm before any clipping and the loss of every step."""
from __future__ import annotations

import lightning as L
import torch

from nmtbench.config import AnalyzeConfig, TrainConfig
from nmtbench.training.module import TranslationModule


class StepRecorder(L.Callback):
    def __init__(self):
        self.gradient_norms: list[float] = []
        self.losses: list[float] = []

    def on_before_optimizer_step(self, trainer, module, optimizer):  # Lightning clips after this hook
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        self.gradient_norms.append(float(torch.nn.utils.get_total_norm(grads)))

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses.append(float(outputs["loss"]))


def train_probe(name: str, block: dict, vocab: dict, cfg: AnalyzeConfig, steps: int, clip: float,
        train_data) -> tuple[TranslationModule, StepRecorder]:
    """Train `block` for `steps` steps on train_data (a datamodule or a dataloader of collated batches) in the
    vocabularies of a vocab.json record."""
    L.seed_everything(cfg.seed, verbose=False)
    train = TrainConfig().model_copy(update={"lr": cfg.lr, "warmup_steps": cfg.warmup_steps, "label_smoothing": 0.0,
                                             "gradient_clip_val": clip, "batch_tokens": cfg.batch_tokens})
    module = TranslationModule(name, block, vocab, train.model_dump(), cfg.seed)
    recorder = StepRecorder()
    trainer = L.Trainer(accelerator="gpu" if cfg.device == "cuda" else "cpu", devices=1, max_steps=steps,
                        max_epochs=-1, gradient_clip_val=clip or None, limit_val_batches=0, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[recorder], use_distributed_sampler=False)
    if isinstance(train_data, L.LightningDataModule):
        trainer.fit(module, datamodule=train_data)
    else:
        trainer.fit(module, train_dataloaders=train_data)
    return module, recorder
