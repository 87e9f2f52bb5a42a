"""The decoder-only Transformer's config and its entry in the family table; its layers are in
models/decoder_only.py. Nothing here imports torch: `nmtbench check` and the comparison read model blocks without it.
"""
from __future__ import annotations

from nmtbench.models.family import Family, register
from nmtbench.models.transformer_config import TransformerConfig
from nmtbench.param_blocks import choice

POSITIONS = ("sinusoidal", "learned")  # relative distances are not implemented for one mixed stream


class DecoderOnlyConfig(TransformerConfig):
    norm: str = "pre"
    layers: int = 6  # one stack: about half the parameters of an encoder-decoder with 6 + 6
    prefix_attention: bool = False

    def validate(self, where: str) -> None:
        super().validate(where)
        choice(f"{where}.positions", self.positions, POSITIONS)
        choice(f"{where}.self_attention", self.self_attention, ("full",))  # one causal stream: no encoder to thin


FAMILY = register(Family("decoder_only", DecoderOnlyConfig, "nmtbench.models.decoder_only:DecoderOnlySeq2Seq",
                         mechanism="self-attention", embeddings="scaled"))
