"""Dropout for every model, with masks that cost a fraction of torch's on a CPU.

On a CPU, torch's dropout (nn.Dropout, F.dropout and the dropout inside scaled_dot_product_attention)
draws its mask with `bernoulli_`, whose CPU kernel takes a 64-bit uniform double, two Mersenne
Twister words, for every element, one element at a time, then divides the mask by 1 - p in a second
pass. Here one 64-bit draw gives the random bytes of eight elements, and a byte is kept when it is
at least round(256 p): four times fewer words, and the comparison, conversion and scaling are
vectorised passes.

Same semantics as torch's dropout, with one difference: the drop rate is quantised to 1/256. An
element is dropped with probability q = round(256 p) / 256 (p = 0.1 drops 10.16%, 0.2 drops 19.92%,
0.3 drops 30.08%) and kept values are scaled by exactly 1 / (1 - q), so the expected output still
equals the input. Rates within 1/512 of 0 or 1, which a byte cannot tell from 0 or 1, use torch's
dropout as it is. Masks come from torch's default generator, so they are fixed by the seed
(torch.manual_seed, Lightning's seed_everything) and restored with its state when a run resumes.
Off in eval mode. On a GPU, torch's fused dropout kernel is already cheap and is used as it is, and so
is torch's dropout in a model under torch.compile (train.compile), which generates its masks itself.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

LEVELS = 256  # one random byte per element
WORD_BYTES = 8  # random_ over the full int64 range fills all 64 bits of a word from two generator draws


def drop_threshold(p: float) -> int:
    """Bytes below this are dropped: round(256 p)."""
    return round(p * LEVELS)


def quantisable(p: float) -> bool:
    """Whether a byte threshold drops some but not every element at rate p."""
    return 0 < drop_threshold(p) < LEVELS


def keep_scale(p: float) -> float:
    """1 / (1 - q), q the quantised drop rate: the expected output equals the input."""
    return LEVELS / (LEVELS - drop_threshold(p))


def random_bytes(shape: torch.Size, device: torch.device) -> torch.Tensor:
    """Uniform random uint8 of `shape`, from torch's default generator."""
    count = math.prod(shape)
    words = torch.empty(-(-count // WORD_BYTES), dtype=torch.int64, device=device)
    words.random_(torch.iinfo(torch.int64).min, None)  # the full 64-bit range: every byte uniform
    return words.view(torch.uint8)[:count].view(shape)


# the integer type of each float type's width: a kept element's mask is the bit pattern of the scale
SAME_WIDTH_INT = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
                  torch.float64: torch.int64}


@functools.cache
def scale_bits(dtype: torch.dtype, p: float) -> int:
    """keep_scale(p) in dtype, rounded as a float multiply would round it, read as SAME_WIDTH_INT's integer."""
    return torch.ones((), dtype=dtype).mul_(keep_scale(p)).view(SAME_WIDTH_INT[dtype]).item()


def dropout_mask(like: torch.Tensor, p: float) -> torch.Tensor:
    """A mask of like's shape and dtype: 0 where dropped, keep_scale(p) where kept."""
    kept = random_bytes(like.shape, like.device) >= drop_threshold(p)
    # bool -> float is a slow scalar loop on CPU, and uint8 -> float then a float multiply two passes of float
    # arithmetic: 0 or 1 times the scale's bit pattern in integers is the same mask (0 is +0.0), a third faster
    integer = kept.view(torch.uint8).to(SAME_WIDTH_INT[like.dtype])
    return integer.mul_(scale_bits(like.dtype, p)).view(like.dtype)


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Zero each element of x with probability p (quantised as above) and scale the rest by 1 / (1 - p)."""
    if not training or p == 0:
        return x
    if not 0 < p < 1:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if x.device.type != "cpu" or not quantisable(p) or torch.compiler.is_compiling():
        return F.dropout(x, p, True)  # under torch.compile, fused with the compiler's own random numbers
    with torch.profiler.record_function("dropout"):  # so a profile charges the mask's passes to dropout
        return x * dropout_mask(x, p)


class Dropout(nn.Module):
    """nn.Dropout with the masks above; a drop-in replacement (no parameters, same state dict)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
