"""The training loss: F.cross_entropy's label-smoothed loss and plain NLL, from one log-softmax, with its gradient."""
import pytest
import torch
import torch.nn.functional as F

from nmtbench.training.loss import label_smoothed_nll

PAD = 0


def logits_and_gold(dtype=torch.float32):
    torch.manual_seed(0)
    logits = (3 * torch.randn(6, 11)).to(dtype).requires_grad_()
    gold = torch.tensor([3, 1, PAD, 10, 7, PAD])
    return logits, gold


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_loss_nll_and_gradient_equal_torchs_cross_entropy(smoothing):
    logits, gold = logits_and_gold()
    smoothed, nll = label_smoothed_nll(logits, gold, smoothing, PAD)
    smoothed.backward()
    reference = logits.detach().clone().requires_grad_()
    expected = F.cross_entropy(reference, gold, ignore_index=PAD, label_smoothing=smoothing, reduction="sum")
    expected.backward()
    assert torch.allclose(smoothed, expected, atol=1e-5, rtol=0)
    assert torch.allclose(nll, F.cross_entropy(reference, gold, ignore_index=PAD, reduction="sum"), atol=1e-5, rtol=0)
    assert torch.allclose(logits.grad, reference.grad, atol=1e-6, rtol=0)


def test_padding_gets_no_gradient_and_the_gradient_scales_with_the_loss():
    logits, gold = logits_and_gold()
    smoothed, _ = label_smoothed_nll(logits, gold, 0.1, PAD)
    (smoothed * 0.5).backward()
    assert torch.equal(logits.grad[gold == PAD], torch.zeros(2, 11))
    assert torch.allclose(logits.grad.sum(-1), torch.zeros(6), atol=1e-6)  # softmax minus a distribution: sums to 0
    reference = logits.detach().clone().requires_grad_()
    (0.5 * F.cross_entropy(reference, gold, ignore_index=PAD, label_smoothing=0.1, reduction="sum")).backward()
    assert torch.allclose(logits.grad, reference.grad, atol=1e-6, rtol=0)


def test_bf16_logits_get_an_fp32_loss_and_a_bf16_gradient():
    logits, gold = logits_and_gold(torch.bfloat16)
    smoothed, nll = label_smoothed_nll(logits, gold, 0.1, PAD)
    smoothed.backward()
    exact = F.cross_entropy(logits.detach().float(), gold, ignore_index=PAD, label_smoothing=0.1, reduction="sum")
    assert smoothed.dtype == nll.dtype == torch.float32 and logits.grad.dtype == torch.bfloat16
    assert torch.allclose(smoothed, exact, atol=1e-5, rtol=0)  # the loss of the bf16 logits, computed in fp32


def whole_matrix_loss(logits, gold, smoothing):
    """The loss and gradient from whole-matrix passes, as the blocks' arithmetic must reproduce them."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    real = (gold != PAD).float()
    nll = -(log_probs.gather(1, gold[:, None]).squeeze(1) * real).sum()
    smoothed = (1 - smoothing) * nll + smoothing * -(log_probs.mean(dim=-1) * real).sum()
    grad = log_probs.exp().sub_(smoothing / logits.size(1))
    grad.scatter_add_(1, gold[:, None], grad.new_full((len(gold), 1), smoothing - 1))
    return smoothed, nll, grad.mul_(real[:, None]).to(logits.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("block_floats", [11, 33, 1 << 18])  # one row a block, 3 rows (the last block short), all
def test_blocks_of_rows_give_the_whole_matrix_values_to_the_bit(monkeypatch, dtype, block_floats):
    monkeypatch.setattr("nmtbench.training.loss.ROW_BLOCK_FLOATS", block_floats)
    torch.manual_seed(1)
    logits = (3 * torch.randn(7, 11)).to(dtype).requires_grad_()
    gold = torch.tensor([3, 1, PAD, 10, 7, PAD, 2])
    smoothed, nll = label_smoothed_nll(logits, gold, 0.1, PAD)
    smoothed.backward()
    expected_smoothed, expected_nll, expected_grad = whole_matrix_loss(logits.detach(), gold, 0.1)
    assert torch.equal(smoothed, expected_smoothed) and torch.equal(nll, expected_nll)
    assert torch.equal(logits.grad, expected_grad)


def test_a_cpu_takes_cache_sized_blocks_of_rows_and_other_devices_one_block():
    from nmtbench.training.loss import row_blocks
    assert row_blocks(torch.empty(2059, 8000)) == range(0, 2059, 32)  # 32 x 8,000 fp32 = 1 MiB
    assert row_blocks(torch.empty(5, 1 << 20)) == range(0, 5, 1)  # a row wider than a block is a block
    assert row_blocks(torch.empty(2059, 8000, device="meta")) == range(0, 2059, 2059)
