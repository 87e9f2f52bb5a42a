"""Build any model variant from its `models.<name>` block: `family` picks the file, the rest its config.

A family is one of the built-in families of the family table (models/family.py: each config file registers its
own), or the import path `package.module:ClassName` of a researcher's own
Seq2Seq subclass, which names its config class in `config_class` (a nmtbench.config.Block, like the built-ins'
configs, so unknown keys and bad values are refused the same way). docs/models.md, "Your own model".
Every model is built as model_cls(cfg, vocab), vocab the vocabularies' sizes (models/vocabulary.py).

A built-in block is checked without torch, which only building it imports (its family's model file): `nmtbench
check` and the comparison read every block but build none. An own model's module is imported to check its block,
since its config class is there.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from nmtbench.models import (  # noqa: F401  each registers its family
    cnn_config,
    decoder_only_config,
    hybrid_config,
    rnn_config,
    transformer_config,
)
from nmtbench.models.family import TABLE as FAMILIES
from nmtbench.models.family import loaded
from nmtbench.models.vocabulary import ModelConfig, Vocab, tying
from nmtbench.param_blocks import Block, ConfigError, choice, from_dict

if TYPE_CHECKING:
    from nmtbench.models.interface import Seq2Seq


def own(family) -> bool:
    """Whether a block's family is an own model's import path rather than a built-in family's name."""
    return isinstance(family, str) and ":" in family


def own_model(where: str, family: str) -> type[Seq2Seq]:
    """The Seq2Seq subclass an own model's import path names, refused in one line where it is not one or declares
    no config class."""
    module_name, _, class_name = family.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"{where}: cannot import {module_name} ({error}); put its folder on PYTHONPATH or install "
                          f"it, or choose one of {', '.join(FAMILIES)}") from None
    model_cls = getattr(module, class_name, None)
    from nmtbench.models.interface import Seq2Seq  # torch, which an own model's module imports anyway

    if not (isinstance(model_cls, type) and issubclass(model_cls, Seq2Seq)):
        found = "not found" if model_cls is None else "not a subclass of nmtbench.models.interface.Seq2Seq"
        raise ConfigError(f"{where}: {class_name} in {module_name} is {found}; name a Seq2Seq subclass as "
                          "package.module:ClassName")
    config_cls = getattr(model_cls, "config_class", None)
    if not (isinstance(config_cls, type) and issubclass(config_cls, Block)):
        raise ConfigError(f"{where}: {family} declares no config class; set its class attribute config_class to a "
                          "subclass of nmtbench.config.Block holding its keys")
    return model_cls


def model_config(name: str, block: dict, vocab: Vocab | None = None):
    """Validate a params block and return its typed config; errors name the key and the valid choices. With the
    vocabularies the model is for, a built-in family's tie_embeddings is resolved for them, or refused."""
    where = f"models.{name}"
    if not isinstance(block, dict) or "family" not in block:
        raise ConfigError(f"{where}: missing 'family'; choose one of {', '.join(FAMILIES)} or package.module:Class")
    family = block["family"]
    config_cls = (own_model(f"{where}.family", family).config_class if own(family) else
                  FAMILIES[choice(f"{where}.family", family, FAMILIES)].config)
    cfg = from_dict(config_cls, {k: v for k, v in block.items() if k != "family"}, where)
    cfg.validate(where)
    if vocab is not None and isinstance(cfg, ModelConfig):
        cfg = cfg.model_copy(update={"tie_embeddings": tying(cfg, vocab, where)})
    return cfg


def build_model(name: str, block: dict, vocab: Vocab) -> Seq2Seq:
    """The model of a params block for these vocabularies."""
    cfg = model_config(name, block, vocab)
    family = block["family"]
    build = own_model(f"models.{name}.family", family) if own(family) else loaded(FAMILIES[family].build)
    return build(cfg, vocab)
