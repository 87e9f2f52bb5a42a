"""Build any model variant from its `models.<name>` block: `family` picks the file, the rest its config."""
from __future__ import annotations

from nmtbench.config import ConfigError, choice, from_dict
from nmtbench.models.cnn import ConvConfig, ConvSeq2Seq
from nmtbench.models.decoder_only import DecoderOnlyConfig, DecoderOnlySeq2Seq
from nmtbench.models.interface import Seq2Seq
from nmtbench.models.rnn import RNNConfig, RNNSeq2Seq
from nmtbench.models.transformer import TransformerConfig, TransformerSeq2Seq

FAMILIES = {
    "rnn": (RNNConfig, RNNSeq2Seq),
    "transformer": (TransformerConfig, TransformerSeq2Seq),
    "decoder_only": (DecoderOnlyConfig, DecoderOnlySeq2Seq),
    "cnn": (ConvConfig, ConvSeq2Seq),
}


def model_config(name: str, block: dict):
    """Validate a params block and return its typed config; errors name the key and the valid choices."""
    where = f"models.{name}"
    if not isinstance(block, dict) or "family" not in block:
        raise ConfigError(f"{where}: missing 'family'; choose one of {', '.join(FAMILIES)}")
    family = choice(f"{where}.family", block["family"], FAMILIES)
    config_cls, _ = FAMILIES[family]
    cfg = from_dict(config_cls, {k: v for k, v in block.items() if k != "family"}, where)
    cfg.validate(where)
    return cfg


def build_model(name: str, block: dict, vocab_size: int, pad_id: int) -> Seq2Seq:
    cfg = model_config(name, block)
    _, model_cls = FAMILIES[block["family"]]
    return model_cls(cfg, vocab_size, pad_id)
