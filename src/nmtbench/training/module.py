"""The LightningModule shared by every model: loss, optimiser, schedule and the figures it logs."""
from __future__ import annotations

import math
import time

import lightning as L
import torch
import torch.nn.functional as F

from nmtbench.config import TrainConfig
from nmtbench.models.registry import build_model


def inverse_sqrt_schedule(warmup_steps: int):
    """Multiplier of the peak rate: linear warmup to 1 at warmup_steps, then 1/sqrt decay (Vaswani et al.)."""
    def factor(step: int) -> float:
        step += 1
        if warmup_steps == 0:
            return 1.0
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))
    return factor


class TranslationModule(L.LightningModule):
    def __init__(self, name: str, block: dict, vocab_size: int, pad_id: int, vocab_sha256: str, train: dict):
        super().__init__()
        self.save_hyperparameters()  # the checkpoint alone rebuilds the model and checks its vocabulary
        self.model = build_model(name, block, vocab_size, pad_id)
        self.train_cfg = TrainConfig(**train)
        self.target_tokens = 0
        self.train_seconds = 0.0
        self._val_loss_sum = self._val_tokens = 0.0

    def loss(self, batch) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Label-smoothed cross-entropy per target token, padding ignored; also the plain (unsmoothed) sum."""
        logits = self.model(batch["src"], batch["src_mask"], batch["tgt_in"]).float()  # (B, T, V)
        flat, gold = logits.flatten(0, 1), batch["tgt_out"].flatten()
        tokens = int((gold != self.hparams.pad_id).sum())
        smoothed = F.cross_entropy(flat, gold, ignore_index=self.hparams.pad_id,
                                   label_smoothing=self.train_cfg.label_smoothing, reduction="sum")
        nll = F.cross_entropy(flat, gold, ignore_index=self.hparams.pad_id, reduction="sum")
        return smoothed / tokens, nll, tokens

    def on_train_batch_start(self, batch, batch_idx):
        self._batch_started = time.perf_counter()

    def training_step(self, batch, batch_idx):
        loss, _, tokens = self.loss(batch)
        self.target_tokens += tokens
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["src"].size(0))
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], batch_size=batch["src"].size(0))
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.train_seconds += time.perf_counter() - self._batch_started

    def on_validation_epoch_start(self):
        self._val_loss_sum = self._val_tokens = 0.0

    def validation_step(self, batch, batch_idx):
        _, nll, tokens = self.loss(batch)
        self._val_loss_sum += float(nll)
        self._val_tokens += tokens

    def on_validation_epoch_end(self):
        val_loss = self._val_loss_sum / max(self._val_tokens, 1)
        # unsmoothed per-token NLL, so perplexity means the same thing for every model
        self.log("val/loss", val_loss, prog_bar=True)
        self.log("val/ppl", math.exp(min(val_loss, 50.0)))
        self.log("train/target_tokens", float(self.target_tokens))

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.train_cfg.lr, betas=(0.9, 0.98), eps=1e-9)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt_schedule(self.train_cfg.warmup_steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
