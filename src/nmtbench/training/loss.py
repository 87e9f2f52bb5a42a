"""Label-smoothed cross-entropy and the plain negative log-likelihood from one log-softmax, with a one-pass gradient.

F.cross_entropy(label_smoothing=e) equals this loss, but its backward is built from the pieces of its
forward: a dense zero gradient for the NLL term with the gold tokens scattered in, the smoothing
term's gradient added over the whole (tokens x vocabulary) matrix, then log-softmax's own backward.
The gradient has a closed form, softmax(logits) - ((1 - e) onehot(gold) + e / V) on every real target
token and 0 on padding, which is what `backward` computes: the exponential of the saved log-
probabilities and two in-place passes. The unsmoothed NLL (for validation loss and perplexity) is read
off the same log-probabilities. Computed in fp32 whatever the logits' precision.
"""
from __future__ import annotations

import torch


class LabelSmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, gold, smoothing: float, pad_id: int):
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (N, V)
        real = (gold != pad_id).to(log_probs.dtype)  # (N,)
        gold_log_prob = log_probs.gather(1, gold[:, None]).squeeze(1)  # padding's row is read and weighted 0
        nll = -(gold_log_prob * real).sum()
        uniform = -(log_probs.mean(dim=-1) * real).sum()  # cross-entropy with the uniform distribution
        ctx.save_for_backward(log_probs, gold, real)
        ctx.smoothing, ctx.dtype = smoothing, logits.dtype
        ctx.mark_non_differentiable(nll)
        return (1 - smoothing) * nll + smoothing * uniform, nll

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        log_probs, gold, real = ctx.saved_tensors
        grad = log_probs.exp().sub_(ctx.smoothing / log_probs.size(1))
        grad.scatter_add_(1, gold[:, None], grad.new_full((len(gold), 1), ctx.smoothing - 1))
        grad.mul_((real * grad_loss)[:, None])
        return grad.to(ctx.dtype), None, None, None


def label_smoothed_nll(logits: torch.Tensor, gold: torch.Tensor, smoothing: float,
                       pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (N, V), gold (N,) -> (label-smoothed cross-entropy, plain NLL), both summed over non-pad tokens.

    Equals F.cross_entropy(logits, gold, ignore_index=pad_id, label_smoothing=smoothing, reduction="sum")
    and the same with smoothing 0; only the first carries a gradient.
    """
    with torch.profiler.record_function("loss"):  # so a profile charges its passes to the loss
        return LabelSmoothedNLL.apply(logits, gold, smoothing, pad_id)
