"""Label-smoothed cross-entropy and the plain negative log-likelihood from one log-softmax, with a one-pass gradient.

F.cross_entropy(label_smoothing=e) equals this loss, but its backward is built from the pieces of its
forward: a dense zero gradient for the NLL term with the gold tokens scattered in, the smoothing
term's gradient added over the whole (tokens x vocabulary) matrix, then log-softmax's own backward.
The gradient has a closed form, softmax(logits) - ((1 - e) onehot(gold) + e / V) on every real target
token and 0 on padding, which is what `backward` computes: the exponential of the log-probabilities and
two in-place passes. The unsmoothed NLL (for validation loss and perplexity) is read off the same
log-probabilities. Computed in fp32 whatever the logits' precision.

Backward recomputes the log-probabilities from the logits instead of keeping them, so no fp32
(tokens x vocabulary) matrix is made besides the gradient of fp32 logits (65 MB at 2,000 tokens and 8,000
words, 1 GB at 8,000 tokens and 32,000 words): at its peak the loss held the logits, their fp32 copy and
the log-probabilities (10 bytes an entry under bf16, 8 under fp32), and now the logits and their gradient
(4 under bf16, 8 under fp32). On a CPU both directions run over blocks of rows
small enough to stay in a core's cache (ROW_BLOCK_FLOATS fp32 values a block), so bf16 logits are read
from memory once each way instead of in whole-matrix passes (their fp32 copy, log-softmax, the
exponential, the in-place passes, the cast of the gradient back); a GPU takes the matrix as one block,
since its kernels are cheap only when large. Every row's arithmetic is the whole-matrix version's, so
the values are the same to the bit.
"""
from __future__ import annotations

import torch

ROW_BLOCK_FLOATS = 1 << 18  # 1 MiB of fp32 a block: inside a core's L2 cache with room to spare


def row_blocks(logits: torch.Tensor) -> range:
    """The first row of each block: rows whose fp32 copy holds about ROW_BLOCK_FLOATS values on a CPU, all elsewhere."""
    rows, width = logits.shape
    return range(0, rows, max(1, ROW_BLOCK_FLOATS // width) if logits.device.type == "cpu" else max(1, rows))


class LabelSmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, gold, smoothing: float, pad_id: int):
        rows = len(logits)  # logits (N, V)
        blocks = row_blocks(logits)
        real = (gold != pad_id).float()  # (N,)
        gold_log_prob = logits.new_empty(rows, dtype=torch.float32)  # padding's row is read and weighted 0
        mean_log_prob = logits.new_empty(rows, dtype=torch.float32)
        for start in blocks:
            block = slice(start, start + blocks.step)
            log_probs = torch.log_softmax(logits[block].float(), dim=-1)  # (n, V)
            gold_log_prob[block] = log_probs.gather(1, gold[block, None]).squeeze(1)
            mean_log_prob[block] = log_probs.mean(dim=-1)
        nll = -(gold_log_prob * real).sum()
        uniform = -(mean_log_prob * real).sum()  # cross-entropy with the uniform distribution
        ctx.save_for_backward(logits, gold, real)
        ctx.smoothing = smoothing
        ctx.mark_non_differentiable(nll)
        return (1 - smoothing) * nll + smoothing * uniform, nll

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        logits, gold, real = ctx.saved_tensors
        blocks, width = row_blocks(logits), logits.size(1)
        weight = real * grad_loss  # (N,)
        grad = torch.empty_like(logits)
        for start in blocks:
            block = slice(start, start + blocks.step)
            block_grad = torch.log_softmax(logits[block].float(), dim=-1).exp().sub_(ctx.smoothing / width)
            block_grad.scatter_add_(1, gold[block, None], block_grad.new_full((len(block_grad), 1), ctx.smoothing - 1))
            grad[block] = block_grad.mul_(weight[block, None])  # cast to the logits' precision as it is written
        return grad, None, None, None


def label_smoothed_nll(logits: torch.Tensor, gold: torch.Tensor, smoothing: float,
                       pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (N, V), gold (N,) -> (label-smoothed cross-entropy, plain NLL), both summed over non-pad tokens.

    Equals F.cross_entropy(logits, gold, ignore_index=pad_id, label_smoothing=smoothing, reduction="sum")
    and the same with smoothing 0; only the first carries a gradient.
    """
    with torch.profiler.record_function("loss"):  # so a profile charges its passes to the loss
        return LabelSmoothedNLL.apply(logits, gold, smoothing, pad_id)
