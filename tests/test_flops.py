"""FLOP counts of tiny layers against hand-computed values, the fused CPU kernels included."""
import torch
import torch.nn.functional as F
from torch import nn

from helpers.models import TINY_VARIANTS, make_tiny_model
from nmtbench.models.flops import flop_counter, training_step_flops


def counted(fn) -> int:
    with flop_counter() as counter:
        fn()
    return counter.get_total_flops()


def test_linear_counts_two_flops_per_multiply_add():
    layer, x = nn.Linear(3, 4), torch.randn(5, 3)
    assert counted(lambda: layer(x)) == 2 * 5 * 3 * 4


def test_fused_lstm_layer_counts_both_projections_per_step():
    lstm, x = nn.LSTM(3, 4, batch_first=True), torch.randn(2, 5, 3)  # (B, T, I), H = 4, 4 gates
    assert counted(lambda: lstm(x)) == 2 * (2 * 5) * (4 * 4) * (3 + 4)
    output, _ = lstm(x)
    assert counted(lambda: output.sum().backward()) == 2 * 2 * (2 * 5) * (4 * 4) * (3 + 4)


def test_cpu_attention_counts_scores_and_weighted_sum():
    q = k = v = torch.randn(1, 2, 3, 4, requires_grad=True)  # (B, heads, T, d)
    scores_and_sum = 2 * (2 * 2 * 3 * 3 * 4)
    assert counted(lambda: F.scaled_dot_product_attention(q, k, v)) == scores_and_sum
    out = F.scaled_dot_product_attention(q, k, v)
    assert counted(lambda: out.sum().backward()) == 5 * scores_and_sum // 2


def test_every_variant_counts_backward_at_least_forward_and_scales_with_batch():
    for name in TINY_VARIANTS:
        model = make_tiny_model(name).train()
        src = torch.randint(4, 20, (2, 7))
        tgt = torch.randint(4, 20, (2, 5))
        forward, backward = training_step_flops(model, src, src != 0, tgt)
        assert forward > 0 and backward >= forward, name
        double = training_step_flops(model, src.repeat(2, 1), src.repeat(2, 1) != 0, tgt.repeat(2, 1))
        assert double == (2 * forward, 2 * backward), name
        assert all(p.grad is None for p in model.parameters()), name
