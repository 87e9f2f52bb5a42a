"""Model blocks at a matched width: sizes written `d`, `2d`, `4d` in analyze.models are multiples of d,
so every family is measured at the same d and the parameter count can be taken at several widths."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from nmtbench.config import ConfigError
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab

if TYPE_CHECKING:
    from nmtbench.models.interface import Seq2Seq

MULTIPLE_OF_D = re.compile(r"(\d*)d")


def at_width(name: str, block: dict, width: int) -> dict:
    """The block with every `<k>d` value replaced by k * width, a hybrid's halves' too; other values are kept as
    written."""
    if not isinstance(block, dict):
        raise ConfigError(f"analyze.models.{name}: expected a model block like those of models:, got {block!r}")
    sized = {}
    for key, value in block.items():
        match = MULTIPLE_OF_D.fullmatch(value) if isinstance(value, str) else None
        sized[key] = (at_width(name, value, width) if isinstance(value, dict) else
                      int(match.group(1) or 1) * width if match else value)
    return sized


def build_at_width(name: str, block: dict, width: int, vocab: Vocab) -> Seq2Seq:
    return build_model(name, at_width(name, block, width), vocab)
