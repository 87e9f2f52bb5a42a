"""Equal-cost training: the FLOPs of every training batch, counted exactly and cheaply, and the budget.

`train.budget` stops every model at the same cost: `time` hands the seconds to Lightning's timer,
`flops` is the callback below. Either way the FLOPs spent are counted and reported.
"""
from __future__ import annotations

import copy
from datetime import timedelta
from fractions import Fraction

import lightning as L
import torch

from nmtbench.config import BudgetConfig, ConfigError
from nmtbench.data.subwords import BOS, PAD
from nmtbench.models.flops import training_step_flops

GRID = (2, 5, 8)  # source and target lengths at which one pair's cost is counted
CHECKS = ((11, 3), (3, 11))  # lengths off the grid where the interpolation must equal the count


def lagrange(x: int, points: tuple[int, ...], i: int) -> Fraction:
    """The i-th Lagrange basis polynomial through points, at x: 1 at points[i], 0 at the others."""
    value = Fraction(1)
    for j, p in enumerate(points):
        if j != i:
            value *= Fraction(x - p, points[i] - p)
    return value


class TrainingFlops:
    """Forward + backward FLOPs of a teacher-forced batch of B pairs padded to S source and T target tokens.

    Counting every step under FlopCounterMode would cost about as much as the step. But the count is
    B times a polynomial of degree at most 2 in S and in T (projections grow with the length, attention
    scores with S*T, S^2 or T^2), so nine counts of a single pair on a 3x3 grid of lengths fix it,
    and interpolating through them is exact. Two counts off the grid check that; a model whose cost
    does not pass is counted once per (S, T) instead. Counting runs on a CPU copy of the model, so a
    model costs the same on every device (FlopCounterMode does not know the GPU recurrent kernels).
    """

    def __init__(self, model: torch.nn.Module):
        self.model = copy.deepcopy(model).float().cpu().train()
        self.grid = {(s, t): self.count(s, t) for s in GRID for t in GRID}
        self.per_shape = {}
        self.interpolates = all(self.interpolate(s, t) == self.count(s, t) for s, t in CHECKS)

    def count(self, src_len: int, tgt_len: int) -> int:
        src, tgt = torch.full((1, src_len), BOS), torch.full((1, tgt_len), BOS)
        return sum(training_step_flops(self.model, src, src != PAD, tgt))

    def interpolate(self, src_len: int, tgt_len: int) -> Fraction:
        return sum(flops * lagrange(src_len, GRID, GRID.index(s)) * lagrange(tgt_len, GRID, GRID.index(t))
                   for (s, t), flops in self.grid.items())

    def __call__(self, batch_size: int, src_len: int, tgt_len: int) -> int:
        if self.interpolates:
            return batch_size * int(self.interpolate(src_len, tgt_len))
        if (src_len, tgt_len) not in self.per_shape:
            self.per_shape[src_len, tgt_len] = self.count(src_len, tgt_len)
        return batch_size * self.per_shape[src_len, tgt_len]


class FlopBudget(L.Callback):
    """Adds up the training FLOPs of every rank's batches; sets trainer.should_stop once limit is spent.

    Under a limit every rank adds the same all-reduced total each step, so all stop after the same
    step. Without one nothing is decided per step, so each rank counts its own batches and the ranks
    are summed only at validations and when training ends: no collective and no device sync on the hot path. The total
    is saved in checkpoints, so a resumed run goes on counting from where it stopped.
    """

    def __init__(self, limit: float | None, cost: TrainingFlops):
        self.limit, self.cost, self.spent, self.unshared = limit, cost, 0, 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        flops = self.cost(batch["src"].size(0), batch["src"].size(1), batch["tgt_in"].size(1))
        if self.limit is None:
            self.unshared += flops
            return
        self.spent += self._sum_over_ranks(trainer, pl_module, flops)
        if self.spent >= self.limit:
            trainer.should_stop = True

    @property
    def exhausted(self) -> bool:
        """Whether a FLOP limit is set and spent."""
        return self.limit is not None and self.spent + self.unshared >= self.limit

    def on_train_end(self, trainer, pl_module):
        self.settle(trainer, pl_module)

    def settle(self, trainer, pl_module) -> int:
        """The FLOPs spent so far by every rank; a collective, so every rank calls it at the same point."""
        self.spent += self._sum_over_ranks(trainer, pl_module, self.unshared)
        self.unshared = 0
        return self.spent

    @staticmethod
    def _sum_over_ranks(trainer, pl_module, flops: int) -> int:
        count = torch.tensor(flops, dtype=torch.int64, device=pl_module.device)
        return int(trainer.strategy.reduce(count, reduce_op="sum"))

    def state_dict(self) -> dict:
        return {"spent": self.spent + self.unshared}

    def load_state_dict(self, state: dict) -> None:
        self.spent, self.unshared = state["spent"], 0


def budget_limits(budget: BudgetConfig, model: torch.nn.Module) -> tuple[timedelta | None, FlopBudget]:
    """(Lightning's max_time, the FLOP counter) for a budget: one of them limits, the counter always counts.

    The model's cost is counted here, before training, so the seconds it takes do not come out of a
    time budget.
    """
    max_time = timedelta(seconds=budget.value) if budget.kind == "time" else None
    cost = TrainingFlops(model)
    if budget.kind == "flops" and not any(cost.grid.values()):  # an own model whose kernels torch cannot count
        raise ConfigError(f"train.budget: torch's FLOP counter finds no matrix product in the training step of "
                          f"{type(model).__name__}, so a flops budget would never stop it; give it train.budget.kind "
                          "time or train.max_steps instead")
    return max_time, FlopBudget(budget.value if budget.kind == "flops" else None, cost)


class ValidateLastStep(L.Callback):
    """A run that max_steps ends mid-epoch validates its last step too.

    Lightning validates when a callback asks the trainer to stop (the time and FLOP budgets do), but
    max_steps ends the epoch without asking, so the steps since the last validation were never
    validated and could never become best.ckpt. Asking to stop at that step makes Lightning validate it.
    """

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True
