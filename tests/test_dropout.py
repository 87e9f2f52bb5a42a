"""The shared dropout: torch's semantics (rate, scaling, eval, seed, gradient) with cheaper masks, in every model."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.models import PAD, TINY_VARIANTS, V
from nmtbench.models.attention import scaled_dot_product
from nmtbench.models.dropout import Dropout, drop_threshold, dropout, dropout_mask, keep_scale, random_bytes
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab

LARGE = 1_000_000  # a drop rate off by 0.0015 is five standard deviations of its estimate here


@pytest.mark.parametrize(("p", "quantised"), [(0.1, 26 / 256), (0.3, 77 / 256), (0.5, 0.5)])
def test_drop_rate_is_p_quantised_to_a_256th(p, quantised):
    torch.manual_seed(0)
    dropped = (dropout(torch.ones(LARGE), p) == 0).float().mean().item()
    assert abs(dropped - quantised) < 0.0015


def test_a_rate_a_byte_cannot_express_is_dropped_at_its_own_rate():
    torch.manual_seed(0)
    dropped = (dropout(torch.ones(LARGE), 0.001) == 0).float().mean().item()  # round(0.256) would be 0
    assert abs(dropped - 0.001) < 0.0002


def test_kept_values_are_scaled_by_exactly_one_over_the_kept_share():
    torch.manual_seed(0)
    x = torch.randn(1000)
    out = dropout(x, 0.1)
    kept = out != 0
    assert torch.equal(out[kept], x[kept] * torch.tensor(256 / 230))
    assert 850 < kept.sum() < 950


def test_eval_mode_and_rate_zero_return_the_input_itself():
    x = torch.randn(4, 5)
    assert Dropout(0.3).eval()(x) is x
    assert dropout(x, 0.0) is x


def test_the_same_seed_draws_the_same_mask_and_another_seed_another():
    x = torch.ones(64, 64)
    torch.manual_seed(7)
    first = dropout(x, 0.2)
    torch.manual_seed(7)
    again = dropout(x, 0.2)
    torch.manual_seed(8)
    other = dropout(x, 0.2)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_the_gradient_is_masked_and_scaled_like_the_output():
    torch.manual_seed(0)
    x = torch.ones(50, 40, requires_grad=True)
    out = dropout(x, 0.1)
    out.backward(torch.ones_like(out))
    assert torch.equal(x.grad, out.detach())  # d out / d x: the mask itself, 0 or 256/230
    assert torch.equal(out.unique(), torch.tensor([0.0, 256 / 230]))


def test_bf16_input_gives_a_bf16_output():
    torch.manual_seed(0)
    assert dropout(torch.ones(100, dtype=torch.bfloat16), 0.1).dtype == torch.bfloat16


def test_written_out_attention_equals_torchs_fused_kernel_without_dropout():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 7, 4), torch.randn(2, 2, 7, 4)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 4:] = False
    out, weights = scaled_dot_product(q, k, v, mask, need_weights=True)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6)
    assert torch.equal(weights[1, ..., 4:], torch.zeros(2, 5, 3))


def test_attention_dropout_drops_weights_and_keeps_their_scale():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 200, 4), torch.randn(1, 1, 200, 4)
    v = torch.eye(200)[None, None]  # the output is the dropped weights themselves
    out, weights = scaled_dot_product(q, k, v, None, 0.5)
    kept = out != 0
    assert 0.45 < kept.float().mean() < 0.55
    assert torch.allclose(out[kept], 2 * weights[kept])


def every_family_with_dropout():
    # one variant of each family, dropout on; the recurrent one with one layer (see the next test)
    names = ["lstm_additive", "transformer_relative", "transformer_sparse", "transformer_linformer",
             "decoder_only", "cnn", "own_bag_gru", "hybrid_transformer_rnn", "hybrid_rnn_transformer"]
    return {name: {**TINY_VARIANTS[name], "dropout": 0.3} for name in names}


@pytest.mark.parametrize(("name", "block"), every_family_with_dropout().items())
def test_no_family_draws_masks_with_bernoulli(name, block):
    torch.manual_seed(0)
    model = build_model(name, block, Vocab.of(V, pad_id=PAD)).train()
    assert not any(isinstance(module, nn.Dropout) for module in model.modules())
    src, tgt = torch.randint(4, V, (3, 7)), torch.randint(4, V, (3, 6))
    with torch.profiler.profile() as profile:
        model(src, src != PAD, tgt).sum().backward()
    ops = {event.key for event in profile.key_averages()}
    assert "dropout" in ops  # the shared dropout ran, under its profiler label
    assert not {"aten::bernoulli_", "aten::native_dropout"} & ops


def test_stacked_recurrent_layers_keep_torchs_own_dropout_between_them():
    # nn.LSTM applies it inside its fused kernel; the default grid's recurrent models have one layer
    block = {**TINY_VARIANTS["lstm_uni_no_feeding"], "dropout": 0.3}
    model = build_model("lstm", block, Vocab.of(V, pad_id=PAD)).train()
    assert model.encoder.dropout == 0.3 and model.decoder.dropout == 0.3


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_the_integer_built_mask_is_the_float_arithmetic_mask_to_the_bit(dtype, p):
    like = torch.empty(3, 5, 64, dtype=dtype)
    torch.manual_seed(7)
    mask = dropout_mask(like, p)
    torch.manual_seed(7)
    kept = random_bytes(like.shape, like.device) >= drop_threshold(p)
    assert mask.dtype == dtype and torch.equal(mask, kept.to(dtype) * torch.ones((), dtype=dtype).mul_(keep_scale(p)))
    assert mask[kept].sub(keep_scale(p)).abs().max() <= 1e-2 * keep_scale(p) and not mask[~kept].any()
