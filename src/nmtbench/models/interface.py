"""The one interface every model implements, so training and decoding never ask which model they hold.

    forward(src, src_mask, tgt_in[, src_lengths]) -> logits (B, T, V)   teacher forcing
    encode(src, src_mask)            -> memory                      model-specific, opaque to callers
    init_state(memory, src_mask)     -> DecoderState
    decode_step(state, y_prev)       -> (log_probs (B, V), state)   one target token, with a cache
    longest_source()                 -> most source tokens it translates, None for any number
    longest_target(source_length)    -> most target tokens its decoder places after such a source, None for any

A DecoderState is a dict-like bag of tensors whose first dimension is the batch (or beam) row,
so `reorder` can prune and grow hypotheses for any model by indexing that dimension.

A model that packs its source by length (packs_source: a recurrent encoder) takes them as encode's third argument,
SourceLengths that the batch carries: read off a GPU tensor, they would make every step wait for the GPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class SourceLengths:
    """A batch's source lengths as packing for an RNN needs them, made on the host before the batch moves: the
    lengths longest first, a host list, and the rows in that order (B,), a tensor that moves with the batch."""
    longest_first: list[int]
    order: torch.Tensor

    @classmethod
    def of(cls, lengths) -> SourceLengths:
        """From the lengths in row order (a host list or tensor), sorted as pack_padded_sequence sorts them."""
        longest_first, order = torch.sort(torch.as_tensor(lengths, dtype=torch.int64), descending=True)
        return cls(longest_first.tolist(), order)


@dataclass
class DecoderState:
    tensors: dict[str, torch.Tensor | tuple] = field(default_factory=dict)
    step: int = 0  # number of target tokens already consumed
    attention: torch.Tensor | None = None  # (B, S) source attention of the last step, where the model has one

    def reorder(self, index: torch.Tensor) -> DecoderState:
        """Keep rows `index` (B',) of every cached tensor, e.g. the surviving beams."""
        def pick(value):
            if isinstance(value, tuple):
                return tuple(pick(v) for v in value)
            return value.index_select(0, index)

        return DecoderState(
            {key: pick(value) for key, value in self.tensors.items()},
            self.step,
            None if self.attention is None else self.attention.index_select(0, index),
        )


class Seq2Seq(nn.Module):
    """Base class: subclasses implement encode, init_state, decode_step and teacher_forced."""

    pad_id: int
    packs_source = False  # whether encode takes SourceLengths as its third argument

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor,
                src_lengths: SourceLengths | None = None) -> torch.Tensor:
        packs = self.packs_source and src_lengths is not None
        memory = self.encode(src, src_mask, src_lengths) if packs else self.encode(src, src_mask)
        return self.teacher_forced(memory, src_mask, tgt_in)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor):
        raise NotImplementedError

    def teacher_forced(self, memory, src_mask: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def init_state(self, memory, src_mask: torch.Tensor) -> DecoderState:
        raise NotImplementedError

    def decode_step(self, state: DecoderState, y_prev: torch.Tensor) -> tuple[torch.Tensor, DecoderState]:
        raise NotImplementedError

    def longest_source(self) -> int | None:
        """The most source tokens the model translates; None for any number. A half with a position table bounds
        it: an encoder's by the table's size, a decoder's too, since a translation runs about as long as its source.
        Each half that has one bounds it through super(), so a hybrid, whose class is its two halves, has both."""
        return None

    def longest_target(self, source_length: int) -> int | None:
        """The most target tokens the decoder can place after a source of source_length tokens; None for any."""
        return None

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def smallest(*limits: int | None) -> int | None:
    """The tightest of some limits, None standing for no limit."""
    return min((limit for limit in limits if limit is not None), default=None)
