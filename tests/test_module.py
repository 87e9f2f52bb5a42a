import sys

import pytest
import torch
from torch.overrides import TorchFunctionMode

from helpers.models import PAD, SEPARATE, TINY_VARIANTS, V_SOURCE, V
from nmtbench.config import TrainConfig
from nmtbench.data.batching import PairDataset
from nmtbench.training.module import TranslationModule, adam, cosine_schedule, inverse_sqrt_schedule


def test_inverse_sqrt_warms_up_linearly_then_decays():
    factor = inverse_sqrt_schedule(4)
    assert [factor(step) for step in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert factor(15) == pytest.approx(0.5)  # sqrt(4 / 16)
    assert inverse_sqrt_schedule(0)(10) == 1.0


def test_cosine_warms_up_then_reaches_zero_at_the_last_step():
    factor = cosine_schedule(2, 10)
    assert [factor(0), factor(1)] == [0.5, 1.0]
    assert factor(5) == pytest.approx(0.5)  # half way from step 2 to step 10
    assert factor(9) == pytest.approx(0.0) and factor(20) == pytest.approx(0.0)


class HostReads(TorchFunctionMode):
    """Records every read of a tensor's value by the host: on a GPU each one waits for the device to catch up."""

    READS = {torch.Tensor.cpu, torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__bool__,
             torch.Tensor.__int__, torch.Tensor.__float__, torch.Tensor.__index__}
    # where torch reads a tensor it keeps on the host whatever the device: a packed sequence's batch sizes
    OF_HOST_TENSORS = {"get_expected_hidden_size"}

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.READS and sys._getframe(1).f_code.co_name not in self.OF_HOST_TENSORS:
            self.reads.append(func.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", sorted(TINY_VARIANTS))
def test_a_training_step_reads_nothing_back_from_the_device(name):
    """Forward, loss and backward of every variant without one host read (the GPU lane checks the same on a GPU
    with torch.cuda's sync debug mode; this CPU check catches the code that would trip it)."""
    src_ids, tgt_ids = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]], [[6, 7, 8], [9, 10, 11, 12], [13]]
    batch = PairDataset.from_lists(src_ids, tgt_ids)[[0, 1, 2]]
    module = TranslationModule(name, TINY_VARIANTS[name], {"size": V_SOURCE if name in SEPARATE else V, "pad": PAD,
                                                         **({"target_size": V} if name in SEPARATE else {})},
                               TrainConfig().model_dump())
    assert batch["src_lengths"] == [5, 2, 3]
    batch = module.on_before_batch_transfer(batch, 0)  # on the host, before Lightning moves the batch
    with HostReads() as reads:
        loss, _, _ = module.loss(batch)
        loss.backward()
    assert reads.reads == []


def test_weight_decay_leaves_the_biases_out_and_adams_constants_are_the_recipes():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    plain = adam(model, TrainConfig(lr=0.1))
    assert len(plain.param_groups) == 1 and plain.defaults["betas"] == (0.9, 0.98) and plain.defaults["eps"] == 1e-9
    decayed = adam(model, TrainConfig(lr=0.1, weight_decay=1e-5, adam_betas=(0.9, 0.999), adam_eps=1e-8))
    groups = [(group["weight_decay"], [tuple(p.shape) for p in group["params"]]) for group in decayed.param_groups]
    assert groups == [(1e-5, [(2, 3), (1, 2)]), (0.0, [(2,), (1,)])]
    assert decayed.defaults["betas"] == (0.9, 0.999) and decayed.defaults["eps"] == 1e-8
