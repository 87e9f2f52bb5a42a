"""Search written once against the Seq2Seq interface, so every model decodes the same way."""
from __future__ import annotations

import torch

from nmtbench.models.interface import Seq2Seq


def max_lengths(src_mask: torch.Tensor, a: float, b: int) -> torch.Tensor:
    """Per-sentence output budget a * source length + b, in target tokens (end-of-sentence excluded)."""
    return (src_mask.sum(1).float() * a + b).long()  # (B,)


@torch.no_grad()
def greedy(model: Seq2Seq, src: torch.Tensor, src_mask: torch.Tensor, bos: int, eos: int,
           max_len: torch.Tensor) -> list[list[int]]:
    """Pick the most probable token at each step; a sentence stops at eos or at its own max_len.

    Finished sentences leave the batch (their rows are dropped from the cache), so a sentence's
    output never depends on which other sentences share its batch.
    """
    B = src.size(0)
    state = model.init_state(model.encode(src, src_mask), src_mask)
    alive = torch.arange(B, device=src.device)  # original row of each cache row
    y = torch.full((B,), bos, dtype=torch.long, device=src.device)
    outputs: list[list[int]] = [[] for _ in range(B)]
    step = 0
    while alive.numel():
        keep = max_len[alive] > step
        if not keep.all():
            alive, y, state = alive[keep], y[keep], state.reorder(keep.nonzero().squeeze(1))
            if not alive.numel():
                break
        log_probs, state = model.decode_step(state, y)  # (B_alive, V)
        y = log_probs.argmax(-1)
        for row, token in zip(alive.tolist(), y.tolist()):
            if token != eos:
                outputs[row].append(token)
        running = y != eos
        if not running.all():
            alive, y, state = alive[running], y[running], state.reorder(running.nonzero().squeeze(1))
        step += 1
    return outputs
