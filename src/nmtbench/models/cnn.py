"""Convolutional encoder-decoder in the manner of ConvS2S (Gehring et al. 2017).

Everything for the family's forward pass is in this file, as an encoder half and a decoder half that the family
pairs and a hybrid (models/hybrid.py) pairs with another family's; its config, the keys each half reads and its
entry in the family table are in models/cnn_config.py. Both sides stack gated convolutions
(GLU) with residual connections; every decoder layer attends to the encoder output z with keys z and
values z + e (e: the source embeddings). The decoder's convolutions see only the past: padded on the
left by kernel - 1 in teacher forcing, and fed from a cache of the last kernel - 1 inputs per layer
when decoding one token at a time.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.models.attention import attend
from nmtbench.models.cnn_config import ConvConfig
from nmtbench.models.dropout import dropout
from nmtbench.models.interface import DecoderState, smallest
from nmtbench.models.vocabulary import TIED_OUTPUT, Vocab
from nmtbench.models.vocabulary_layers import VocabularySeq2Seq

RESIDUAL_SCALE = math.sqrt(0.5)  # keeps the variance of a sum of two unit-variance terms at one


def gated_conv(channels: int, kernel: int) -> nn.Conv1d:
    return nn.Conv1d(channels, 2 * channels, kernel)  # twice the channels: values and gates for the GLU


class ConvPart(VocabularySeq2Seq):
    """What both convolutional halves share: token embeddings plus learned positions of one side."""

    def build_conv_positions(self, cfg: ConvConfig, name: str) -> None:
        """The position table `name` (src_positions or tgt_positions), unless the model has it already."""
        if not hasattr(self, name):
            setattr(self, name, nn.Embedding(cfg.max_positions, cfg.embed_dim))

    def _conv_embed(self, cfg: ConvConfig, words, tokens, table: nn.Embedding, offset: int = 0):
        """tokens (B, T) of one side (words: embed_source or embed_target), from position offset on."""
        end = offset + tokens.size(1)
        if end > cfg.max_positions:  # checked on the host: reading positions[-1] back would wait for a GPU
            raise ValueError(f"sequence of {end} tokens exceeds max_positions {cfg.max_positions}; raise "
                             "max_positions in the model block")
        positions = torch.arange(offset, end, device=tokens.device)
        return dropout(words(tokens) + table(positions), cfg.dropout_at("embedding"), self.training)  # (B, T, E)


class ConvEncoder(ConvPart):
    """The encoder half: gated convolutions over the source. Its layers are the model's own attributes, named as
    the family always named them, so a whole ConvSeq2Seq keeps its checkpoint keys and a hybrid
    (models/hybrid.py) takes this half alone."""

    @staticmethod
    def memory_width(cfg: ConvConfig) -> int:
        return cfg.embed_dim

    def longest_source(self) -> int | None:
        return smallest(self.encoder_cfg.max_positions, super().longest_source())

    def build_encoder(self, cfg: ConvConfig) -> None:
        self.encoder_cfg = cfg
        self.build_conv_positions(cfg, "src_positions")
        self.enc_in, self.enc_out = nn.Linear(cfg.embed_dim, cfg.channels), nn.Linear(cfg.channels, cfg.embed_dim)
        self.enc_convs = nn.ModuleList(gated_conv(cfg.channels, cfg.kernel) for _ in range(cfg.encoder_layers))

    def encode(self, src, src_mask):
        """Memory: enc (B, S, E), the attention's keys z, and values, ConvS2S's z + e (e: the source embeddings)."""
        cfg = self.encoder_cfg
        e = self._conv_embed(cfg, self.embed_source, src, self.src_positions)  # (B, S, E)
        keep = src_mask.unsqueeze(1)  # (B, 1, S)
        h = self.enc_in(e).transpose(1, 2)  # (B, C, S)
        for conv in self.enc_convs:
            # zeroing padding before each convolution makes extra padding look like the conv's own zeros
            x = dropout(h * keep, cfg.dropout_at("convolution"), self.training)
            x = F.pad(x, ((conv.kernel_size[0] - 1) // 2,) * 2)
            h = (F.glu(conv(x), dim=1) + h) * RESIDUAL_SCALE
        z = self.enc_out(h.transpose(1, 2))  # (B, S, E)
        return {"enc": z, "values": (z + e) * RESIDUAL_SCALE}


class ConvDecoder(ConvPart):
    """The decoder half: causal gated convolutions, each layer attending to the encoder's states. After another
    family's encoder, which has no z + e, the values are the states themselves."""

    @staticmethod
    def attended_width(cfg: ConvConfig) -> int:
        return cfg.embed_dim  # each layer's query d is E wide

    @staticmethod
    def output_width(cfg: ConvConfig) -> int:
        return cfg.embed_dim

    def longest_source(self) -> int | None:
        return smallest(self.decoder_cfg.max_positions, super().longest_source())

    def longest_target(self, source_length: int) -> int | None:
        return self.decoder_cfg.max_positions

    def build_decoder(self, cfg: ConvConfig) -> None:
        self.decoder_cfg = cfg
        E, C, k = cfg.embed_dim, cfg.channels, cfg.kernel
        self.build_conv_positions(cfg, "tgt_positions")
        self.dec_in, self.dec_out = nn.Linear(E, C), nn.Linear(C, E)
        self.dec_convs = nn.ModuleList(gated_conv(C, k) for _ in range(cfg.decoder_layers))
        self.att_in = nn.ModuleList(nn.Linear(C, E) for _ in range(cfg.decoder_layers))
        self.att_out = nn.ModuleList(nn.Linear(E, C) for _ in range(cfg.decoder_layers))

    def _decoder_layer(self, i, h, g, memory, src_mask, window):
        """h (B, C, T) with its left context window (B, C, k-1) -> new h (B, C, T) and attention weights."""
        h_in = dropout(h, self.decoder_cfg.dropout_at("convolution"), self.training)
        y = F.glu(self.dec_convs[i](torch.cat([window, h_in], dim=2)), dim=1)  # (B, C, T)
        d = (self.att_in[i](y.transpose(1, 2)) + g) * RESIDUAL_SCALE  # (B, T, E)
        values = memory.get("values", memory["enc"])
        context, weights = attend(d @ memory["enc"].transpose(1, 2), values, src_mask)
        y = (y + self.att_out[i](context).transpose(1, 2)) * RESIDUAL_SCALE
        return (y + h) * RESIDUAL_SCALE, weights

    def _decode(self, memory, src_mask, g, windows):
        """Target embeddings g (B, T, E) -> logits (B, T, V), the new windows, last layer's weights."""
        h = self.dec_in(g).transpose(1, 2)  # (B, C, T)
        new_windows = []
        for i, window in enumerate(windows):
            new_windows.append(torch.cat([window, h], dim=2)[:, :, -window.size(2):] if window.size(2) else window)
            h, weights = self._decoder_layer(i, h, g, memory, src_mask, window)
        out = dropout(self.dec_out(h.transpose(1, 2)), self.decoder_cfg.dropout_at("output"), self.training)
        return self.logits(out), new_windows, weights

    def _empty_windows(self, batch: int, like: torch.Tensor):
        cfg = self.decoder_cfg
        return [like.new_zeros(batch, cfg.channels, cfg.kernel - 1) for _ in self.dec_convs]

    def teacher_forced(self, memory, src_mask, tgt_in):
        g = self._conv_embed(self.decoder_cfg, self.embed_target, tgt_in, self.tgt_positions)
        logits, _, _ = self._decode(memory, src_mask, g, self._empty_windows(tgt_in.size(0), g))
        return logits

    def init_state(self, memory, src_mask):
        windows = self._empty_windows(src_mask.size(0), memory["enc"])
        return DecoderState({**memory, "mask": src_mask, "windows": tuple(windows)})

    def decode_step(self, state, y_prev):
        s = state.tensors
        g = self._conv_embed(self.decoder_cfg, self.embed_target, y_prev[:, None], self.tgt_positions,
                             offset=state.step)  # (B, 1, E)
        logits, windows, weights = self._decode(s, s["mask"], g, s["windows"])
        state = DecoderState({**s, "windows": tuple(windows)}, state.step + 1, weights[:, 0])
        return torch.log_softmax(logits[:, 0].float(), dim=-1), state


class ConvSeq2Seq(ConvEncoder, ConvDecoder):
    """The convolutional family: both halves of one config."""

    def __init__(self, cfg: ConvConfig, vocab: Vocab):
        super().__init__()
        self.cfg = cfg
        self.build_embeddings(vocab, cfg.embed_dim, cfg.tie_embeddings)
        # both position tables before any layer: the order the family always drew its weights in
        self.build_conv_positions(cfg, "src_positions")
        self.build_conv_positions(cfg, "tgt_positions")
        self.build_encoder(cfg)
        self.build_decoder(cfg)
        self.build_output(vocab, cfg.embed_dim)
        INITIALISATIONS[cfg.init](self)


def fairseq_initialisation(model: ConvSeq2Seq) -> None:
    """fairseq's fconv draw (models/fconv.py Embedding, PositionalEmbedding, Linear, ConvTBC): embeddings and
    position tables N(0, 0.1) with the padding row zero; a layer fed by a dropout site N(0, sqrt((1 - p) / fan_in)),
    a convolution N(0, sqrt(4 (1 - p) / (kernel fan_in))) (the GLU halves the variance twice over), and the
    attention's projections, fed by no dropout, with p = 0; every bias zero. Its keeping of the activations' variance
    is why its rates enter the draw."""
    cfg = model.cfg
    fed = {id(layer): cfg.dropout_at("embedding") for layer in (model.enc_in, model.dec_in)}
    fed.update({id(conv): cfg.dropout_at("convolution") for conv in (*model.enc_convs, *model.dec_convs)})
    fed[id(model.output)] = cfg.dropout_at("output")
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.1)
            if module.padding_idx is not None:
                nn.init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.Conv1d):
            fan_in = module.in_channels * module.kernel_size[0]
            nn.init.normal_(module.weight, std=math.sqrt(4 * (1 - fed[id(module)]) / fan_in))
        elif isinstance(module, nn.Linear) and (module is not model.output or model.tie not in TIED_OUTPUT):
            nn.init.normal_(module.weight, std=math.sqrt((1 - fed.get(id(module), 0.0)) / module.in_features))
        if isinstance(module, (nn.Conv1d, nn.Linear)) and module.bias is not None:
            nn.init.zeros_(module.bias)


# how a convolutional model's weights are drawn (the model block's init): after PyTorch's draw; a new draw's name
# goes in cnn_config.INITS too
INITIALISATIONS = {"pytorch": lambda model: None, "fairseq": fairseq_initialisation}

