"""Convolutional encoder-decoder in the manner of ConvS2S (Gehring et al. 2017).

Everything for the family's forward pass is in this file. Both sides stack gated convolutions
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

from nmtbench.config import ConfigError
from nmtbench.models.attention import attend
from nmtbench.models.dropout import Dropout
from nmtbench.models.interface import DecoderState
from nmtbench.models.vocabulary import ModelConfig, Vocab, VocabularySeq2Seq

RESIDUAL_SCALE = math.sqrt(0.5)  # keeps the variance of a sum of two unit-variance terms at one


class ConvConfig(ModelConfig):
    embed_dim: int = 256
    channels: int = 512
    encoder_layers: int = 2
    decoder_layers: int = 2
    kernel: int = 3  # odd, so the encoder's window is centred
    dropout: float = 0.1
    max_positions: int = 512

    def validate(self, where: str) -> None:
        if min(self.embed_dim, self.channels, self.encoder_layers, self.decoder_layers, self.max_positions) < 1:
            raise ConfigError(f"{where}: sizes and layer counts must be positive")
        if self.kernel < 1 or self.kernel % 2 == 0:
            raise ConfigError(f"{where}.kernel: must be odd and positive, got {self.kernel}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout: must be in [0, 1), got {self.dropout}")


def gated_conv(channels: int, kernel: int) -> nn.Conv1d:
    return nn.Conv1d(channels, 2 * channels, kernel)  # twice the channels: values and gates for the GLU


class ConvSeq2Seq(VocabularySeq2Seq):
    def __init__(self, cfg: ConvConfig, vocab: Vocab):
        super().__init__()
        self.cfg = cfg
        E, C, k = cfg.embed_dim, cfg.channels, cfg.kernel
        self.build_embeddings(vocab, E, cfg.tie_embeddings)
        self.src_positions, self.tgt_positions = nn.Embedding(cfg.max_positions, E), nn.Embedding(cfg.max_positions, E)
        self.dropout = Dropout(cfg.dropout)
        self.enc_in, self.enc_out = nn.Linear(E, C), nn.Linear(C, E)
        self.enc_convs = nn.ModuleList(gated_conv(C, k) for _ in range(cfg.encoder_layers))
        self.dec_in, self.dec_out = nn.Linear(E, C), nn.Linear(C, E)
        self.dec_convs = nn.ModuleList(gated_conv(C, k) for _ in range(cfg.decoder_layers))
        self.att_in = nn.ModuleList(nn.Linear(C, E) for _ in range(cfg.decoder_layers))
        self.att_out = nn.ModuleList(nn.Linear(E, C) for _ in range(cfg.decoder_layers))
        self.build_output(vocab, E)

    def _embed(self, words, tokens, table: nn.Embedding, offset: int = 0):
        """tokens (B, T) of one side (words: embed_source or embed_target), from position offset on."""
        positions = torch.arange(offset, offset + tokens.size(1), device=tokens.device)
        if positions[-1] >= self.cfg.max_positions:
            raise ValueError(f"sequence of {positions[-1] + 1} tokens exceeds max_positions "
                             f"{self.cfg.max_positions}; raise max_positions in the model block")
        return self.dropout(words(tokens) + table(positions))  # (B, T, E)

    def encode(self, src, src_mask):
        e = self._embed(self.embed_source, src, self.src_positions)  # (B, S, E)
        keep = src_mask.unsqueeze(1)  # (B, 1, S)
        h = self.enc_in(e).transpose(1, 2)  # (B, C, S)
        for conv in self.enc_convs:
            # zeroing padding before each convolution makes extra padding look like the conv's own zeros
            x = F.pad(self.dropout(h * keep), ((conv.kernel_size[0] - 1) // 2,) * 2)
            h = (F.glu(conv(x), dim=1) + h) * RESIDUAL_SCALE
        z = self.enc_out(h.transpose(1, 2))  # (B, S, E)
        return {"keys": z, "values": (z + e) * RESIDUAL_SCALE}

    def _decoder_layer(self, i, h, g, memory, src_mask, window):
        """h (B, C, T) with its left context window (B, C, k-1) -> new h (B, C, T) and attention weights."""
        y = F.glu(self.dec_convs[i](torch.cat([window, self.dropout(h)], dim=2)), dim=1)  # (B, C, T)
        d = (self.att_in[i](y.transpose(1, 2)) + g) * RESIDUAL_SCALE  # (B, T, E)
        context, weights = attend(d @ memory["keys"].transpose(1, 2), memory["values"], src_mask)
        y = (y + self.att_out[i](context).transpose(1, 2)) * RESIDUAL_SCALE
        return (y + h) * RESIDUAL_SCALE, weights

    def _decode(self, memory, src_mask, g, windows):
        """Target embeddings g (B, T, E) -> logits (B, T, V), the new windows, last layer's weights."""
        h = self.dec_in(g).transpose(1, 2)  # (B, C, T)
        new_windows = []
        for i, window in enumerate(windows):
            new_windows.append(torch.cat([window, h], dim=2)[:, :, -window.size(2):] if window.size(2) else window)
            h, weights = self._decoder_layer(i, h, g, memory, src_mask, window)
        return self.output(self.dropout(self.dec_out(h.transpose(1, 2)))), new_windows, weights

    def _empty_windows(self, batch: int, like: torch.Tensor):
        return [like.new_zeros(batch, self.cfg.channels, self.cfg.kernel - 1) for _ in self.dec_convs]

    def teacher_forced(self, memory, src_mask, tgt_in):
        g = self._embed(self.embed_target, tgt_in, self.tgt_positions)
        logits, _, _ = self._decode(memory, src_mask, g, self._empty_windows(tgt_in.size(0), g))
        return logits

    def init_state(self, memory, src_mask):
        windows = self._empty_windows(src_mask.size(0), memory["keys"])
        return DecoderState({**memory, "mask": src_mask, "windows": tuple(windows)})

    def decode_step(self, state, y_prev):
        s = state.tensors
        g = self._embed(self.embed_target, y_prev[:, None], self.tgt_positions, offset=state.step)  # (B, 1, E)
        logits, windows, weights = self._decode(s, s["mask"], g, s["windows"])
        state = DecoderState({**s, "windows": tuple(windows)}, state.step + 1, weights[:, 0])
        return torch.log_softmax(logits[:, 0].float(), dim=-1), state
