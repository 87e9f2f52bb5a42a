"""Gradient probe (claim 4): how strongly the loss at step t reaches back to the input at step j < t.

The input at step j is the target embedding fed at step j (the vector the decoder's state at j is
built from), taken from whichever nn.Embedding reads the target tokens, so every model is probed the
same way through the shared interface.
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.analysis.fitting import train_probe
from nmtbench.analysis.sizing import at_width
from nmtbench.config import AnalyzeConfig
from nmtbench.data.datamodule import TranslationData
from nmtbench.data.subwords import BOS
from nmtbench.data.tokenized import TokenizedSplits
from nmtbench.loading import model_vocab, read_vocab
from nmtbench.models.interface import Seq2Seq
from nmtbench.models.registry import build_model


def gradient_map(model: Seq2Seq, src, src_mask, tgt_in, tgt_out) -> torch.Tensor:
    """(T, T) map G[t, j] = mean over rows of || d loss_t / d x_j ||, x_j the target embedding at step j."""
    embedded = []

    def keep(module, inputs, output):
        if inputs[0] is tgt_in:
            embedded.append(output)

    hooks = [m.register_forward_hook(keep) for m in model.modules() if isinstance(m, nn.Embedding)]
    try:
        logits = model(src, src_mask, tgt_in)  # (B, T, V)
    finally:
        for hook in hooks:
            hook.remove()
    if len(embedded) != 1:
        raise ValueError(f"{type(model).__name__}: expected one nn.Embedding reading the target tokens, found "
                         f"{len(embedded)}; the gradient probe needs the target embedding as a tensor of its own")
    losses = F.cross_entropy(logits.float().transpose(1, 2), tgt_out, reduction="none").sum(0)  # (T,)
    rows = []
    for t in range(tgt_in.size(1)):
        (grad,) = torch.autograd.grad(losses[t], embedded[0], retain_graph=True)  # (B, T, E)
        rows.append(grad.norm(dim=-1).mean(0))
    return torch.stack(rows)


def by_distance(gradients: torch.Tensor) -> list[float]:
    """Mean of G[t, t - k] over t, for every distance k = 0 .. T - 1."""
    T = gradients.size(0)
    return [float(gradients.diagonal(-k).mean()) for k in range(T)]


def span(curve: list[float], threshold: float) -> int | None:
    """The first distance at which the gradient falls below threshold times its value at distance 0;
    None if it never does within the probe."""
    return next((k for k, value in enumerate(curve) if value < threshold * curve[0]), None)


def probe_batch(tokenized_dir, rows: int, length: int) -> dict[str, torch.Tensor]:
    """Multi30k val sentences joined end to end and cut into rows of `length` tokens, so every row is
    long enough for the probe (single sentences are mostly shorter)."""
    val = TokenizedSplits(tokenized_dir)["val"]
    src_stream = [token for ids in val["src_ids"] for token in ids]
    tgt_stream = [token for ids in val["tgt_ids"] for token in ids]
    if min(len(src_stream), len(tgt_stream)) < rows * length:
        raise ValueError(f"the val split has too few tokens for {rows} rows of {length}; "
                         "lower analyze.probe_rows or analyze.probe_length")
    cut = lambda stream: torch.tensor(stream[: rows * length]).view(rows, length)  # noqa: E731
    src, tgt = cut(src_stream), cut(tgt_stream)
    tgt_in = torch.cat([torch.full((rows, 1), BOS), tgt[:, :-1]], dim=1)
    return {"src": src, "src_mask": torch.ones_like(src, dtype=torch.bool), "tgt_in": tgt_in, "tgt_out": tgt}


def probe(cfg: AnalyzeConfig, tokenized_dir: Path) -> dict:
    """Per gradient model: the curve by distance at initialisation and after probe_steps of training on
    Multi30k with and without clipping, with each run's pre-clipping gradient norms and losses."""
    vocab = read_vocab(tokenized_dir)
    batch = {key: value.to(cfg.device)
             for key, value in probe_batch(tokenized_dir, cfg.probe_rows, cfg.probe_length).items()}
    curve = lambda model: by_distance(gradient_map(model.to(cfg.device).eval(), **batch))  # noqa: E731
    result = {}
    for name in cfg.gradient_models:
        block = at_width(name, cfg.models[name], cfg.width)
        torch.manual_seed(cfg.seed)
        runs = {"init": {"curve": curve(build_model(name, block, model_vocab(vocab)))}}
        for run, clip in (("clipped", cfg.clip), ("unclipped", 0.0)):
            data = TranslationData(tokenized_dir, cfg.batch_tokens, cfg.seed)
            module, recorder = train_probe(name, block, vocab, cfg, cfg.probe_steps, clip, data)
            runs[run] = {"curve": curve(module.model), "gradient_norms": recorder.gradient_norms,
                         "losses": recorder.losses}
        for run in runs.values():
            run["span"] = span(run["curve"], cfg.span_threshold)
        result[name] = runs
    return result
