"""The LightningModule shared by every model: loss, optimiser, schedule and the figures it logs."""
from __future__ import annotations

import math
import time

import lightning as L
import torch

from nmtbench.config import TrainConfig
from nmtbench.data.subwords import vocab_id
from nmtbench.loading import EARLIER_DESCRIPTIONS, model_vocab
from nmtbench.models.interface import SourceLengths
from nmtbench.models.registry import build_model
from nmtbench.training.checkpoints import run_fingerprint
from nmtbench.training.loss import label_smoothed_nll

# the learning rate's name in the loggers: train.py's LearningRateMonitor logs it from the optimizer's host-side
# value, where self.log would copy a Python float to the GPU at every step, a host synchronisation (the GPU lane's
# test_training_steps_never_wait_for_the_gpu found it)
LR_METRIC = "train/lr"


def inverse_sqrt_schedule(warmup_steps: int):
    """Multiplier of the peak rate: linear warmup to 1 at warmup_steps, then 1/sqrt decay (Vaswani et al.)."""
    def factor(step: int) -> float:
        step += 1
        if warmup_steps == 0:
            return 1.0
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))
    return factor


def cosine_schedule(warmup_steps: int, total_steps: int):
    """Linear warmup, then half a cosine from 1 down to 0 at total_steps."""
    def factor(step: int) -> float:
        step += 1
        if step <= warmup_steps:
            return step / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def adam(model: torch.nn.Module, cfg: TrainConfig, fused: bool = True) -> torch.optim.Adam:
    """The optimiser of every model. Fused: one kernel updates every tensor (on a CPU, a third of the
    time of the default loop over tensors, which foreach does not shorten there). With train.weight_decay, L2 added
    to the gradients of every parameter but the biases, as nmtpytorch's l2_reg does (nmtpytorch/optimizer.py: two
    parameter groups, torch's Adam weight_decay)."""
    parameters = list(model.parameters())
    if cfg.weight_decay:
        biases = {id(p) for name, p in model.named_parameters() if "bias" in name.rsplit(".", 1)[-1]}
        parameters = [{"params": [p for p in parameters if id(p) not in biases], "weight_decay": cfg.weight_decay},
                      {"params": [p for p in parameters if id(p) in biases], "weight_decay": 0.0}]
    return torch.optim.Adam(parameters, lr=cfg.lr, betas=cfg.adam_betas, eps=cfg.adam_eps, fused=fused)


class TranslationModule(L.LightningModule):
    def __init__(self, name: str, block: dict, vocab: dict, train: dict, seed: int = 0):
        """vocab: the vocab.json record of the vocabularies the model reads and writes."""
        super().__init__()
        self.save_hyperparameters()  # the checkpoint alone rebuilds the model and checks its vocabulary
        self.model = build_model(name, block, model_vocab(vocab))
        self.pad_id = vocab["pad"]
        self.train_cfg = TrainConfig(**train)
        # read on the host only at validation, checkpoint and the end: the steps between never wait for the device
        self.target_tokens = 0  # folded in from _new_tokens, a device tensor the steps add to
        self._new_tokens: torch.Tensor | int = 0
        self.train_seconds = 0.0  # whole stretches of training between validations, the device synchronised
        self._stretch_started: float | None = None
        self._val_loss_sum: torch.Tensor | float = 0.0
        self._val_tokens: torch.Tensor | int = 0
        self._restored_rng: dict | None = None

    @property
    def fingerprint(self) -> str:
        return run_fingerprint(self.hparams.block, self.hparams.train, vocab_id(self.hparams.vocab), self.hparams.seed)

    @property
    def resumable_fingerprints(self) -> tuple[str, ...]:
        """This run's fingerprint, and those its checkpoints had before the budget and the epoch ceiling were left
        out of it."""
        return self.fingerprint, *(run_fingerprint(self.hparams.block, self.hparams.train,
                                                   vocab_id(self.hparams.vocab), self.hparams.seed, earlier)
                                   for earlier in EARLIER_DESCRIPTIONS)

    def loss(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Label-smoothed cross-entropy per target token, padding ignored; also the plain (unsmoothed) sum
        and the number of target tokens, both left on the device."""
        logits = self.model(batch["src"], batch["src_mask"], batch["tgt_in"], batch["src_lengths"])  # (B, T, V)
        gold = batch["tgt_out"].flatten()
        tokens = (gold != self.pad_id).sum()
        smoothed, nll = label_smoothed_nll(logits.flatten(0, 1), gold, self.train_cfg.label_smoothing,
                                           self.pad_id)
        return smoothed / tokens, nll, tokens

    def on_before_batch_transfer(self, batch, dataloader_idx):
        """The source lengths as packing needs them, made while the batch is still on the host (SourceLengths)."""
        return {**batch, "src_lengths": SourceLengths.of(batch["src_lengths"])}

    def configure_model(self):
        if self.train_cfg.compile:  # in place: the state dict keeps its keys, so checkpoints stay the same
            self.model.compile()

    def on_train_epoch_start(self):
        # Lightning sets the epoch of a sampler but not of a batch sampler: without this, every
        # epoch would repeat the first epoch's order
        sampler = getattr(self.trainer.train_dataloader, "batch_sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self.current_epoch)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # what a resumed run needs beyond weights, optimiser and loop state: which run this is, the
        # figures counted so far, and the random state dropout draws from
        rng = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        self._fold_tokens()
        running = 0.0 if self._stretch_started is None else time.perf_counter() - self._stretch_started
        checkpoint["nmtbench"] = {
            "run": self.fingerprint,
            "target_tokens": self.target_tokens, "train_seconds": self.train_seconds + running, "rng": rng,
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint.get("nmtbench")
        if state:
            self.target_tokens, self.train_seconds = state["target_tokens"], state["train_seconds"]
            self._restored_rng = state["rng"]

    def on_train_start(self):
        # restored here, not on load: nothing between this and the first step draws random numbers
        if self._restored_rng is not None:
            torch.set_rng_state(self._restored_rng["cpu"])
            if "cuda" in self._restored_rng and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(self._restored_rng["cuda"])
            self._restored_rng = None
        self._start_stretch()

    def _fold_tokens(self) -> None:
        self.target_tokens += int(self._new_tokens)
        self._new_tokens = 0

    def _start_stretch(self) -> None:
        self._stretch_started = time.perf_counter()

    def _end_stretch(self) -> None:
        """Add the stretch since _start_stretch, once the device has finished its work."""
        if self._stretch_started is None:  # validation outside training, or a second end
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.train_seconds += time.perf_counter() - self._stretch_started
        self._stretch_started = None

    def training_step(self, batch, batch_idx):
        loss, _, tokens = self.loss(batch)
        self._new_tokens = self._new_tokens + tokens
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["src"].size(0))
        # Lightning divides "loss" by accumulate_grad_batches before callbacks see it; the curve wants it whole
        return {"loss": loss, "batch_loss": loss.detach()}

    def on_validation_start(self):
        self._end_stretch()

    def on_validation_end(self):
        if self.trainer.state.fn == "fit":  # back to training, not a validation on its own
            self._start_stretch()

    def on_validation_epoch_start(self):
        self._val_loss_sum, self._val_tokens = 0.0, 0

    def validation_step(self, batch, batch_idx):
        _, nll, tokens = self.loss(batch)
        self._val_loss_sum = self._val_loss_sum + nll.detach()
        self._val_tokens = self._val_tokens + tokens

    def on_validation_epoch_end(self):
        self._fold_tokens()
        # under data parallelism each rank saw part of the val set: add up losses and tokens first
        totals = torch.tensor([float(self._val_loss_sum), int(self._val_tokens), self.target_tokens],
                              dtype=torch.float64, device=self.device)
        loss_sum, tokens, target_tokens = self.trainer.strategy.reduce(totals, reduce_op="sum").tolist()
        val_loss = loss_sum / max(tokens, 1)
        # unsmoothed per-token NLL, so perplexity means the same thing for every model
        self.log("val/loss", val_loss, prog_bar=True)
        self.log("val/ppl", math.exp(min(val_loss, 50.0)))
        self.log("train/target_tokens", target_tokens)  # every process' tokens

    def on_train_end(self):
        """Every rank's target tokens, summed, and the slowest rank's time: the throughput of the job."""
        self._end_stretch()
        self._fold_tokens()
        totals = torch.tensor([float(self.target_tokens)], dtype=torch.float64, device=self.device)
        self.target_tokens = int(self.trainer.strategy.reduce(totals, reduce_op="sum").item())
        seconds = torch.tensor([self.train_seconds], dtype=torch.float64, device=self.device)
        self.train_seconds = float(self.trainer.strategy.reduce(seconds, reduce_op="max").item())

    def configure_optimizers(self):
        cfg = self.train_cfg
        # fp16's gradient scaler cannot unscale a fused optimizer's gradients before clipping: Lightning refuses it
        optimizer = adam(self, cfg, fused=self.trainer.precision != "16-mixed")
        if cfg.schedule == "plateau":
            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=1)
            return {"optimizer": optimizer,
                    "lr_scheduler": {"scheduler": plateau, "monitor": "val/loss", "interval": "epoch",
                                     "name": LR_METRIC}}
        factors = {"inverse_sqrt": inverse_sqrt_schedule(cfg.warmup_steps),
                   "constant": lambda step: min(1.0, (step + 1) / max(cfg.warmup_steps, 1)),
                   "cosine": cosine_schedule(cfg.warmup_steps, self.trainer.estimated_stepping_batches)}
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factors[cfg.schedule])
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step", "name": LR_METRIC}}
