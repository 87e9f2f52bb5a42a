"""The Transformer family's config, the keys each of its halves reads and its entry in the family table; its layers
are in models/transformer.py (the decoder-only model's config extends this one: models/decoder_only_config.py).
Nothing here imports torch: `nmtbench check` and the comparison read model blocks without it.
"""
from __future__ import annotations

from nmtbench.models.family import Family, register
from nmtbench.models.vocabulary import ModelConfig
from nmtbench.param_blocks import ConfigError, choice

NORMS = ("post", "pre")
POSITIONS = ("sinusoidal", "learned", "relative")
SELF_ATTENTION = ("full", "linformer", "sparse")
SHARING = ("none", "headwise", "key_value", "layerwise")
INITS = ("pytorch", "fairseq")  # how its weights are drawn (the model block's init): models/transformer.py draws each
VARIANT_KEYS = {"linformer": ("linformer_k", "linformer_sharing"),
                "sparse": ("window", "global_tokens", "random_blocks", "block_size", "decoder_window")}


class TransformerConfig(ModelConfig):
    norm: str = "post"
    positions: str = "sinusoidal"
    d_model: int = 256
    heads: int = 4
    layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1  # the embeddings and every residual branch (fairseq's --dropout)
    attention_dropout: float | None = None  # the attention weights; null: dropout (fairseq's default is 0)
    activation_dropout: float | None = None  # the feed-forward's hidden layer; null: dropout (fairseq's default is 0)
    max_positions: int = 512  # size of the learned position table; sinusoids have no limit
    relative_clip: int = 16  # relative positions: distances beyond +-clip share one embedding
    self_attention: str = "full"  # the encoder's: full, linformer or sparse
    linformer_k: int = 32  # linformer: rows the keys and values are projected to
    linformer_sharing: str = "headwise"  # linformer: which heads and layers share E and F
    window: int = 3  # sparse: keys each side of a query
    global_tokens: int = 2  # sparse: first positions that attend to and are attended by all
    random_blocks: int = 2  # sparse: random key blocks per query block
    block_size: int = 3  # sparse: tokens per random block and per query block
    decoder_window: int = 0  # sparse: earlier target tokens a decoder query sees; 0 = all

    def validate(self, where: str) -> None:
        choice(f"{where}.norm", self.norm, NORMS)
        choice(f"{where}.positions", self.positions, POSITIONS)
        choice(f"{where}.self_attention", self.self_attention, SELF_ATTENTION)
        choice(f"{where}.linformer_sharing", self.linformer_sharing, SHARING)
        choice(f"{where}.init", self.init, INITS)
        for variant, keys in VARIANT_KEYS.items():
            for key in sorted(set(keys) & self.model_fields_set):
                if self.self_attention != variant:
                    raise ConfigError(f"{where}.{key}: only read when self_attention is {variant}; "
                                      f"remove it or set self_attention: {variant}")
        if self.self_attention != "full" and self.positions == "relative":
            raise ConfigError(f"{where}.positions: relative positions need self_attention full; "
                              "use sinusoidal or learned positions with linformer or sparse")
        if min(self.linformer_k, self.block_size) < 1 or min(self.window, self.global_tokens, self.random_blocks,
                                                             self.decoder_window) < 0:
            raise ConfigError(f"{where}: linformer_k and block_size must be positive, window, global_tokens, "
                              "random_blocks and decoder_window zero or more")
        if self.d_model % self.heads:
            raise ConfigError(f"{where}: d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        if min(self.d_model, self.heads, self.layers, self.d_ff, self.max_positions, self.relative_clip) < 1:
            raise ConfigError(f"{where}: d_model, heads, layers, d_ff, max_positions and relative_clip "
                              "must be positive")
        self.check_dropout(where)

    @property
    def embedding_width(self) -> int:
        return self.d_model


FAMILY = register(Family(
    "transformer", TransformerConfig, "nmtbench.models.transformer:TransformerSeq2Seq",
    "nmtbench.models.transformer:TransformerEncoder", "nmtbench.models.transformer:TransformerDecoder",
    encoder_keys=("norm", "positions", "d_model", "heads", "layers", "d_ff", "max_positions", "relative_clip",
                  "attention_dropout", "activation_dropout", "self_attention", "linformer_k", "linformer_sharing",
                  "window", "global_tokens", "random_blocks", "block_size"),
    decoder_keys=("norm", "positions", "d_model", "heads", "layers", "d_ff", "max_positions", "relative_clip",
                  "attention_dropout", "activation_dropout"),
    mechanism="self-attention", embeddings="scaled"))
