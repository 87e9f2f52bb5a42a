"""The hybrid's config: a model block of family `hybrid` names its two halves, each written like a model block of
its family and checked against that family's entry in the family table (the keys its half reads, what its decoder
needs of another family's encoder, the width of its embeddings); and `halves`, which half of which family a model
block holds, as the verdict reads it. The pairs' layers, and how the halves meet, are in models/hybrid.py. Nothing
here imports torch: `nmtbench check` and the comparison read model blocks without it.
"""
from __future__ import annotations

from nmtbench.models.family import TABLE, Family, register, with_halves
from nmtbench.models.vocabulary import SHARED_EMBEDDING, ModelConfig
from nmtbench.param_blocks import Block, ConfigError, choice, from_dict

WHOLE = ("tie_embeddings", "dropout")  # the hybrid's own keys, not a half's
EXAMPLES = {"encoder": "{family: transformer, layers: 6}", "decoder": "{family: rnn, cell: lstm, attention: general}"}


class HybridConfig(ModelConfig):
    encoder: dict = {}  # a block of family rnn, transformer or cnn: the encoder half's keys
    decoder: dict = {}
    dropout: float = 0.1

    def half(self, side: str, where: str = "models.hybrid") -> Block:
        """The typed config of the encoder or decoder half, refused in one line where it cannot be one."""
        block, model, where = dict(getattr(self, side)), where, f"{where}.{side}"
        family, halves = block.pop("family", None), with_halves()
        if not block and family is None:  # absent, or given empty
            raise ConfigError(f"{where}: missing; a hybrid needs both halves, each a block of its family's keys, e.g. "
                              f"{side}: {EXAMPLES[side]}")
        if family is None:
            raise ConfigError(f"{where}: missing 'family'; choose one of {', '.join(halves)}")
        if family in TABLE and family not in halves:
            raise ConfigError(f"{where}.family: {family} has no encoder and decoder halves of its own to pair; "
                              f"choose one of {', '.join(halves)}, or family: {family} "
                              "for the whole model")
        entry = halves[choice(f"{where}.family", family, halves)]
        read = entry.keys_read(side)
        for key in sorted(block):
            if key in WHOLE:
                raise ConfigError(f"{where}.{key}: set once for the whole model, as {model}.{key}; remove it here")
            if key not in read:
                raise ConfigError(f"{where}.{key}: not a key of the {family} family's {side}; remove it (it reads "
                                  f"{', '.join(read)})")
        cfg = from_dict(entry.config, {**block, "tie_embeddings": self.tie_embeddings, "dropout": self.dropout}, where)
        cfg.validate(where)
        return cfg

    def validate(self, where: str) -> None:
        self.check_dropout(where)
        if self.init != "pytorch":  # each family's draw is its own; nothing says how the projection between is drawn
            raise ConfigError(f"{where}.init: {self.init} is a family's own draw, and a hybrid's halves come from two; "
                              "leave init unset (pytorch) for a hybrid")
        encoder, decoder = self.half("encoder", where), self.half("decoder", where)
        families = self.encoder["family"], self.decoder["family"]
        if families[0] == families[1]:
            others = ", ".join(family for family in with_halves() if family != families[0])
            raise ConfigError(f"{where}.decoder.family: {families[0]} is the encoder's family too, which is family: "
                              f"{families[0]} itself; choose one of {others}, or family: {families[0]}")
        decoder.check_after(families[0], f"{where}.decoder")
        widths = encoder.embedding_width, decoder.embedding_width
        if widths[0] != widths[1] and self.tie_embeddings in (None, *SHARED_EMBEDDING):
            tie = self.tie_embeddings or "unset (all, with one joint vocabulary)"
            raise ConfigError(f"{where}.tie_embeddings: {tie} makes the source and the target embedding one matrix, "
                              f"but the encoder reads {widths[0]}-wide embeddings and the decoder {widths[1]}-wide; "
                              "give both halves one width, or set tie_embeddings: target_output or none")


def halves(block: dict) -> tuple[tuple[str, dict], tuple[str, dict]] | None:
    """The encoder and the decoder of a model block, each as (its family, the values of the keys it reads with the
    family's defaults filled in): the same for a family's own model and for a hybrid with that half, so two models
    share a half exactly when these are equal. None for a model without two halves (decoder_only, an own class).
    What the whole model sets (tie_embeddings, dropout) is no half's, nor how a half meets the other (its
    joining_keys: a recurrent decoder's init_hidden)."""
    sides = (block.get("encoder", {}), block.get("decoder", {})) if block.get("family") == "hybrid" else (block,) * 2
    halves = with_halves()
    if not all(side.get("family") in halves for side in sides):
        return None
    found = []
    for side, half in zip(sides, ("encoder", "decoder")):
        family = halves[side["family"]]
        read = family.keys_read(half)
        cfg = family.config(**{key: value for key, value in side.items() if key in read})
        joining = family.joining_keys if half == "decoder" else ()
        found.append((side["family"], {key: getattr(cfg, key) for key in read if key not in joining}))
    return found[0], found[1]


FAMILY = register(Family("hybrid", HybridConfig, "nmtbench.models.hybrid:build_hybrid"))
