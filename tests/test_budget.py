"""Training FLOPs per batch shape against direct counts, and the FLOP budget's stopping step."""
from datetime import timedelta
from types import SimpleNamespace

import pytest
import torch

from helpers.models import TINY_VARIANTS, make_tiny_model
from nmtbench.config import BudgetConfig
from nmtbench.models.flops import training_step_flops
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab
from nmtbench.training.budget import FlopBudget, TrainingFlops, budget_limits, lagrange

SHAPES = [(1, 1, 1), (3, 7, 9), (2, 13, 4), (5, 4, 12)]  # (B, S, T), off the interpolation grid too


def counted(model, batch, src_len, tgt_len):
    src, tgt = torch.randint(4, 20, (batch, src_len)), torch.randint(4, 20, (batch, tgt_len))
    return sum(training_step_flops(model, src, src != 0, tgt))


@pytest.mark.parametrize("name", TINY_VARIANTS)
def test_interpolated_flops_equal_the_direct_count(name):
    model = make_tiny_model(name).train()
    flops = TrainingFlops(model)
    assert flops.interpolates, name
    for shape in SHAPES:
        assert flops(*shape) == counted(model, *shape), (name, shape)


def test_a_cost_that_does_not_interpolate_is_counted_per_shape(monkeypatch):
    model = make_tiny_model("transformer_post").train()
    def cubic(self, src_len, tgt_len):  # a cost the quadratic grid cannot fit
        return src_len ** 3 + tgt_len
    monkeypatch.setattr(TrainingFlops, "count", cubic)
    flops = TrainingFlops(model)
    assert not flops.interpolates
    assert flops(2, 10, 3) == 2 * (1000 + 3) and flops.per_shape == {(10, 3): 1003}


def test_lagrange_basis_is_one_at_its_point_and_zero_at_the_others():
    assert [lagrange(x, (2, 5, 8), 1) for x in (2, 5, 8)] == [0, 1, 0]


class FakeTrainer:
    should_stop = False
    strategy = SimpleNamespace(reduce=lambda tensor, reduce_op: tensor)


def test_the_budget_stops_after_the_step_that_spends_it():
    model = make_tiny_model("lstm_additive").train()
    cost, trainer = TrainingFlops(model), FakeTrainer()
    step = cost(2, 5, 6)
    budget = FlopBudget(2.5 * step, cost)
    batch = {"src": torch.zeros(2, 5), "tgt_in": torch.zeros(2, 6)}
    stopped_at = []
    for i in range(4):
        budget.on_train_batch_end(trainer, SimpleNamespace(device="cpu"), None, batch, i)
        stopped_at.append(trainer.should_stop)
    assert stopped_at == [False, False, True, True] and budget.spent == 4 * step
    restored = FlopBudget(None, cost)
    restored.load_state_dict(budget.state_dict())
    assert restored.spent == 4 * step  # a resumed run counts on from here


def test_without_a_limit_the_ranks_are_summed_once_at_the_end():
    model = make_tiny_model("lstm_additive").train()
    cost, reduced = TrainingFlops(model), []
    trainer = SimpleNamespace(should_stop=False, strategy=SimpleNamespace(
        reduce=lambda tensor, reduce_op: reduced.append(int(tensor)) or tensor * 2))  # two ranks alike
    counter, batch = FlopBudget(None, cost), {"src": torch.zeros(2, 5), "tgt_in": torch.zeros(2, 6)}
    for i in range(3):
        counter.on_train_batch_end(trainer, SimpleNamespace(device="cpu"), None, batch, i)
    assert reduced == [] and counter.state_dict() == {"spent": 3 * cost(2, 5, 6)}
    counter.on_train_end(trainer, SimpleNamespace(device="cpu"))
    assert reduced == [3 * cost(2, 5, 6)] and counter.spent == 6 * cost(2, 5, 6) and not trainer.should_stop


def test_budget_limits_map_each_kind():
    model = make_tiny_model("cnn")
    max_time, counter = budget_limits(BudgetConfig(kind="time", value=90), model)
    assert max_time == timedelta(seconds=90) and counter.limit is None
    max_time, counter = budget_limits(BudgetConfig(kind="flops", value=2e9), model)
    assert max_time is None and counter.limit == 2e9
    max_time, counter = budget_limits(BudgetConfig(), model)
    assert max_time is None and counter.limit is None and counter.cost(1, 2, 2) == counter.cost.grid[2, 2]


@pytest.mark.parametrize("block, width", [
    ({"family": "transformer", "d_model": 16, "heads": 2, "layers": 1, "d_ff": 32}, 16),
    ({"family": "decoder_only", "d_model": 16, "heads": 2, "layers": 1, "d_ff": 32}, 16),
    ({"family": "rnn", "embed_dim": 12, "hidden_dim": 16}, 12),
    ({"family": "cnn", "embed_dim": 12, "channels": 16}, 12),
])
def test_training_flops_grow_with_the_target_vocabulary_alone(block, width):
    """An embedding is a lookup and the output projection is computed however it is tied: neither the tying nor
    the source vocabulary changes the cost; 3 more target pieces add 3 x width multiply-adds per target token,
    forward (2 FLOPs each) and backward (twice that)."""
    def cost(tie, vocab):
        torch.manual_seed(0)
        return TrainingFlops(build_model("m", {**block, "tie_embeddings": tie}, vocab).train()).grid[5, 5]

    joint = cost("all", Vocab.of(20))
    assert [cost("target_output", Vocab.of(20)), cost("none", Vocab.of(20)), cost("none", Vocab.of(23, 20))] == [
        joint] * 3
    assert cost("none", Vocab.of(20, 23)) - joint == 3 * 2 * 5 * width * 3
