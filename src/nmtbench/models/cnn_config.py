"""The convolutional family's config (ConvS2S, Gehring et al. 2017), the keys each of its halves reads and its
entry in the family table; its layers are in models/cnn.py. Nothing here imports torch: `nmtbench check` and the
comparison read model blocks without it.
"""
from __future__ import annotations

from nmtbench.models.family import Family, register
from nmtbench.models.vocabulary import ModelConfig
from nmtbench.param_blocks import ConfigError, choice

INITS = ("pytorch", "fairseq")  # how its weights are drawn (the model block's init): models/cnn.py draws each


class ConvConfig(ModelConfig):
    embed_dim: int = 256
    channels: int = 512
    encoder_layers: int = 2
    decoder_layers: int = 2
    kernel: int = 3  # odd, so the encoder's window is centred
    dropout: float = 0.1  # fairseq's fconv drops at one rate at each of the three sites below
    embedding_dropout: float | None = None  # word plus position embeddings, both sides; null: dropout
    convolution_dropout: float | None = None  # each convolution's input; null: dropout
    output_dropout: float | None = None  # the decoder's output before the vocabulary projection; null: dropout
    max_positions: int = 512

    def validate(self, where: str) -> None:
        if min(self.embed_dim, self.channels, self.encoder_layers, self.decoder_layers, self.max_positions) < 1:
            raise ConfigError(f"{where}: sizes and layer counts must be positive")
        if self.kernel < 1 or self.kernel % 2 == 0:
            raise ConfigError(f"{where}.kernel: must be odd and positive, got {self.kernel}")
        choice(f"{where}.init", self.init, INITS)
        self.check_dropout(where)

    @property
    def embedding_width(self) -> int:
        return self.embed_dim


FAMILY = register(Family(
    "cnn", ConvConfig, "nmtbench.models.cnn:ConvSeq2Seq", "nmtbench.models.cnn:ConvEncoder",
    "nmtbench.models.cnn:ConvDecoder",
    encoder_keys=("embed_dim", "channels", "encoder_layers", "kernel", "max_positions", "embedding_dropout",
                  "convolution_dropout"),
    decoder_keys=("embed_dim", "channels", "decoder_layers", "kernel", "max_positions", "embedding_dropout",
                  "convolution_dropout", "output_dropout"),
    mechanism="convolution"))
