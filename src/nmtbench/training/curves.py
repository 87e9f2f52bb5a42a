"""What training records at each validation: greedy BLEU on the val split, and one learning-curve row.

The learning curve is `learning_curve.csv` beside `train.json`, one row per validation, with the
columns of CURVE_COLUMNS (read by reports and by `dvc plots show`; keep the names stable):

    step           optimiser updates so far
    epoch          epochs so far, fractional within an epoch (1.0: the end of the first)
    wall_seconds   seconds since training started, validation time included
    target_tokens  non-pad target tokens trained on so far, summed over every process
    train_flops    training FLOPs spent so far (train.budget's count), summed over every process
    train_loss     mean label-smoothed training loss of the batches since the previous validation
    val_loss       unsmoothed per-token NLL on the val split; val_ppl is exp(val_loss)
    val_bleu       greedy BLEU on the val split (empty when train.val_bleu_sentences is 0)
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import lightning as L
import torch

from nmtbench.config import DecodeConfig
from nmtbench.data.subwords import Tokenizer
from nmtbench.decoding.translator import Translator
from nmtbench.evaluation.scoring import bleu
from nmtbench.files import write_text
from nmtbench.training.budget import FlopBudget

CURVE_COLUMNS = ("step", "epoch", "wall_seconds", "target_tokens", "train_flops", "train_loss", "val_loss", "val_ppl",
                 "val_bleu")
# beam 1 of the shared search is exactly greedy decoding; the length budget is the evaluate block's
# default, fixed here so that val BLEU does not depend on the evaluate params
GREEDY = DecodeConfig(beam=1)


def best_validation(rows: list[dict], metric: str) -> dict:
    """The curve's row of the validation the best checkpoint holds: the first with the highest val BLEU (metric
    "bleu") or the lowest val loss ("loss"), as ModelCheckpoint keeps the first of equal scores. Read off the rows'
    rounded scores (2 decimals of BLEU, 4 of loss): two validations equal there but not unrounded name the first."""
    column, sign = {"bleu": ("val_bleu", -1), "loss": ("val_loss", 1)}[metric]
    return min((row for row in rows if row[column] != ""), key=lambda row: sign * float(row[column]))


def epochs_done(trainer: L.Trainer) -> float:
    """Epochs trained so far, fractional within an epoch: 1.0 at the end of the first."""
    loop = trainer.fit_loop.epoch_loop.batch_progress.current
    return round(trainer.current_epoch + loop.completed / max(trainer.num_training_batches, 1), 4)


class ValidationBleu(L.Callback):
    """Greedy translations of the given val sources, scored with sacreBLEU against the raw references.

    Rank 0 decodes and broadcasts the score, so under data parallelism every rank logs the same
    `val/bleu`, and early stopping and the best checkpoint agree on every rank. The score is cased 13a BLEU
    alone, whatever data.tokenized: the papers' setting changes only the signatures and the extra BLEU lc tok
    of scoring.score, neither of which a learning curve records.
    """

    def __init__(self, tokenizer: Tokenizer, sources: list[list[int]], references: list[str]):
        self.tokenizer, self.sources, self.references = tokenizer, sources, references

    def on_validation_epoch_end(self, trainer, pl_module):
        val_bleu = None
        if trainer.is_global_zero:
            found = Translator(pl_module.model, self.tokenizer, GREEDY).translate_ids(self.sources)
            val_bleu = bleu([self.tokenizer.decode(hyps[0].tokens) for hyps in found], self.references)
        pl_module.log("val/bleu", float(trainer.strategy.broadcast(val_bleu, src=0)))


class LearningCurve(L.Callback):
    """Appends a row to the learning curve at every validation; rank 0 rewrites the file atomically.

    Its rows, clock and loss sums travel in every checkpoint, so a run resumed from one continues
    its curve instead of overwriting it with the rows after the restart. `flops` is the run's FLOP
    counter, read at each validation. `clock` (seconds, any origin) is time.perf_counter unless a
    test passes one it controls.
    """

    def __init__(self, path: Path, flops: FlopBudget, clock: Callable[[], float] = time.perf_counter):
        self.path, self.rows, self.flops, self._clock = Path(path), [], flops, clock
        self._loss_sum, self._batches, self._elapsed = 0.0, 0, 0.0
        self._started: float | None = None  # clock() at which training, resumed or not, began

    @property
    def elapsed(self) -> float:
        """Seconds since training began, validations included, and the processes it resumed from too."""
        return self._elapsed if self._started is None else self._clock() - self._started

    def state_dict(self) -> dict:
        return {"rows": self.rows, "elapsed": self.elapsed, "loss_sum": float(self._loss_sum), "batches": self._batches}

    def load_state_dict(self, state: dict) -> None:
        self.rows, self._elapsed = list(state["rows"]), state["elapsed"]
        self._loss_sum, self._batches = state["loss_sum"], state["batches"]

    def on_train_start(self, trainer, pl_module):
        self._started = self._clock() - self._elapsed

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._loss_sum += outputs["batch_loss"]
        self._batches += 1

    def on_validation_end(self, trainer, pl_module):
        # under data parallelism: the mean over every process' batches since the last validation
        totals = torch.tensor([float(self._loss_sum), self._batches], dtype=torch.float64, device=pl_module.device)
        loss_sum, batches = trainer.strategy.reduce(totals, reduce_op="sum").tolist()
        self._loss_sum, self._batches = 0.0, 0
        logged = trainer.callback_metrics
        row = {
            "step": trainer.global_step,
            "epoch": epochs_done(trainer),
            "wall_seconds": round(self._clock() - self._started, 2),
            "target_tokens": int(logged["train/target_tokens"]),
            "train_flops": self.flops.settle(trainer, pl_module),
            "train_loss": round(loss_sum / batches, 4) if batches else "",
            "val_loss": round(float(logged["val/loss"]), 4),
            "val_ppl": round(float(logged["val/ppl"]), 2),
            "val_bleu": round(float(logged["val/bleu"]), 2) if "val/bleu" in logged else "",
        }
        self.rows.append(row)
        self.write(trainer)

    def on_fit_end(self, trainer, pl_module):
        # a run resumed from its final checkpoint (one that reached max_epochs or its budget, rerun) ends with no
        # validation (Lightning skips its training loop, on_train_end too), after dvc deleted the curve with the
        # stage's other outputs: the rows the checkpoint carried are written back
        if self.rows:
            self.write(trainer)

    def write(self, trainer) -> None:
        if trainer.is_global_zero:
            lines = [",".join(CURVE_COLUMNS)] + [",".join(str(r[c]) for c in CURVE_COLUMNS) for r in self.rows]
            write_text(self.path, "\n".join(lines) + "\n")
