"""The T sweep: parameters, FLOPs, activation memory, step time, sequential steps and path length; and
the long sweep of the attention variants: FLOPs, memory and time of an encoder of up to thousands of tokens.

Sequential steps and path length are read off the computation itself, never typed in: a dispatch mode
follows every tensor op of a run and counts chains of dependent ops (`DependencyTracker`). The
sequential steps of a model are the longest such chain in one teacher-forced forward pass (what a
parallel machine must still do one after another); its maximum path length is the shortest chain from
the first target token to the prediction at the last position, running the decoder one step at a time
through the shared interface, so whatever a model carries from step to step (RNN state, cached keys and
values, convolution windows) is the route.
"""
from __future__ import annotations

import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakTensorKeyDictionary

from nmtbench.analysis.sizing import build_at_width
from nmtbench.config import AnalyzeConfig
from nmtbench.data.subwords import BOS, PAD
from nmtbench.models.efficient_attention import LengthProjection
from nmtbench.models.flops import training_step_flops
from nmtbench.models.interface import Seq2Seq
from nmtbench.models.vocabulary import Vocab

aten = torch.ops.aten
# fused kernels that run a whole sequence: step t needs step t - 1, so each counts its time steps
RECURRENT_KERNELS = (aten.mkldnn_rnn_layer, aten.mkldnn_rnn_layer_backward, aten._cudnn_rnn)
# ops that only move or gather values compute nothing a later op must wait for
DATA_MOVEMENT = (aten.stack, aten.clone, aten.copy_, aten._to_copy, aten.index_select, aten.index,
                 aten.detach, aten.lift_fresh, aten.constant_pad_nd)


def sequential_cost(func, args) -> int:
    """Steps an op adds to a chain: its time steps for a fused recurrence, 0 for views and data
    movement, 1 for any other op (a matrix product, a nonlinearity, a gate, a norm)."""
    packet = func.overloadpacket
    if packet in RECURRENT_KERNELS:
        if packet is aten._cudnn_rnn:  # (input, ..., batch_first at 10, ..., batch_sizes at 14)
            batch_sizes, batch_first = args[14], args[10]
            return len(batch_sizes) if len(batch_sizes) else args[0].shape[1 if batch_first else 0]
        return args[0].shape[0]  # mkldnn: input (T, B, I)
    return 0 if func.is_view or packet in DATA_MOVEMENT else 1


class DependencyTracker(TorchDispatchMode):
    """Chains of dependent ops through a computation, tensor by tensor.

    depth[t]: the longest chain that ends in t; distance[t]: the shortest chain from a tensor passed to
    `mark_source`, absent where t does not depend on one. Concatenation and slicing keep track of which
    stretch of a tensor came from where, so a sliding window (a cache that drops its oldest entries)
    forgets what it dropped.
    """

    def __init__(self):
        super().__init__()
        self.depth, self.distance = WeakTensorKeyDictionary(), WeakTensorKeyDictionary()
        self.stretches = WeakTensorKeyDictionary()  # t -> (dim, [(start, end, distance, depth)]) along dim

    def mark_source(self, tensor: torch.Tensor) -> None:
        self.distance[tensor] = 0

    def _along(self, t: torch.Tensor, dim: int) -> list[tuple]:
        if t in self.stretches and self.stretches[t][0] == dim:
            return self.stretches[t][1]
        return [(0, t.shape[dim], self.distance.get(t), self.depth.get(t, 0))]

    def _stretches(self, func, args) -> tuple[int, list[tuple]] | None:
        """Where each stretch of a concatenation's or a slice's output came from; None for other ops."""
        if func.overloadpacket is aten.cat:
            dim, stretches, offset = (args[1] if len(args) > 1 else 0) % args[0][0].dim(), [], 0
            for t in args[0]:
                if t.dim() == args[0][0].dim():  # cat skips legacy empty (0,) tensors
                    stretches += [(lo + offset, hi + offset, d, depth) for lo, hi, d, depth in self._along(t, dim)]
                    offset += t.shape[dim]
            return dim, stretches
        if func.overloadpacket is aten.slice and args[0] in self.stretches:
            source, dim = args[0], (args[1] if len(args) > 1 else 0) % args[0].dim()
            kept_dim, stretches = self.stretches[source]
            if dim != kept_dim:
                return kept_dim, stretches
            size = source.shape[dim]
            start, end = (args[2] if len(args) > 2 else None) or 0, args[3] if len(args) > 3 else size
            start, end = start + size if start < 0 else start, min(end + size if end < 0 else end, size)
            return dim, [(max(lo, start) - start, min(hi, end) - start, d, depth)
                         for lo, hi, d, depth in stretches if lo < end and hi > start]
        return None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        stretches = self._stretches(func, args)
        if stretches is not None:  # data movement: the output is its stretches
            self.stretches[out] = stretches
            reached = [d for _, _, d, _ in stretches[1] if d is not None]
            self.depth[out] = max((depth for *_, depth in stretches[1]), default=0)
            if reached:
                self.distance[out] = min(reached)
            return out
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        cost = sequential_cost(func, args)
        depth = cost + max((self.depth.get(t, 0) for t in inputs), default=0)
        reached = [self.distance[t] for t in inputs if t in self.distance]
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.depth[t] = depth
                if reached:
                    self.distance[t] = cost + min(reached)
        return out


def sequential_steps(model: Seq2Seq, src, src_mask, tgt_in) -> int:
    """Longest chain of dependent ops in one teacher-forced forward pass."""
    with torch.no_grad(), DependencyTracker() as tracker:
        logits = model(src, src_mask, tgt_in)  # (B, T, V)
    return tracker.depth[logits]


def path_length(model: Seq2Seq, src, src_mask, tgt_in) -> int | None:
    """Shortest chain of dependent ops from the first target token to the last position's prediction,
    decoding step by step; None where the last prediction does not depend on the first token at all."""
    with torch.no_grad(), DependencyTracker() as tracker:
        state = model.init_state(model.encode(src, src_mask), src_mask)
        first = tgt_in[:, 0].clone()
        tracker.mark_source(first)
        for t in range(tgt_in.size(1)):
            log_probs, state = model.decode_step(state, first if t == 0 else tgt_in[:, t])  # (B, V)
        return tracker.distance.get(log_probs)


def activation_bytes(model: Seq2Seq, src, src_mask, tgt_in) -> int:
    """Bytes of the tensors autograd keeps for the backward pass (parameters excluded), each storage once."""
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        logits = model(src, src_mask, tgt_in)
    del logits
    return sum(kept.values())


def step_seconds(model: Seq2Seq, src, src_mask, tgt_in, repeats: int) -> float:
    """Median wall time of a forward and backward pass (after one untimed warm-up)."""
    def step():
        model(src, src_mask, tgt_in).float().sum().backward()
        model.zero_grad(set_to_none=True)
        if src.is_cuda:
            torch.cuda.synchronize()

    step()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def peak_bytes(model: Seq2Seq, src, src_mask, tgt_in) -> int | None:
    """The CUDA allocator's peak over a forward and backward pass; None on CPU, which keeps no such count."""
    if not src.is_cuda:
        return None
    torch.cuda.reset_peak_memory_stats()
    model(src, src_mask, tgt_in).float().sum().backward()
    model.zero_grad(set_to_none=True)
    return torch.cuda.max_memory_allocated()


def layer_parameters(model: Seq2Seq) -> int:
    """Parameters outside embedding and position tables (the output projection tied to the embedding
    included, Linformer's length projections too: they grow with the length, not with d): the layers'
    own, which the O(d^2) claim is about."""
    tables = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    tables |= {id(p) for m in model.modules() if isinstance(m, LengthProjection) for p in m.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in tables)


def symbols(cfg: AnalyzeConfig) -> Vocab:
    """The vocabulary of the random symbols: one joint vocabulary of analyze.vocab_size."""
    return Vocab.of(cfg.vocab_size, pad_id=PAD)


def random_batch(cfg: AnalyzeConfig, generator: torch.Generator, src_len: int, tgt_len: int) -> tuple:
    """(src, src_mask, tgt_in) of random symbols, no padding, the target starting with bos."""
    src = torch.randint(BOS + 2, cfg.vocab_size, (cfg.batch_size, src_len), generator=generator).to(cfg.device)
    tgt_in = torch.randint(BOS + 2, cfg.vocab_size, (cfg.batch_size, tgt_len), generator=generator).to(cfg.device)
    tgt_in[:, 0] = BOS
    return src, src != PAD, tgt_in


def costs(model: Seq2Seq, batch: tuple, cfg: AnalyzeConfig) -> dict:
    """FLOPs, activation memory and time of a training step on batch."""
    forward, backward = training_step_flops(model, *batch)
    return {"forward_flops": forward, "backward_flops": backward, "activation_bytes": activation_bytes(model, *batch),
            "peak_bytes": peak_bytes(model, *batch), "step_seconds": step_seconds(model, *batch, cfg.repeats)}


def measure(model: Seq2Seq, length: int, cfg: AnalyzeConfig, generator: torch.Generator) -> dict:
    """Every figure of one model at one sequence length (source and target both `length` tokens)."""
    batch = random_batch(cfg, generator, length, length)
    return {"length": length, **costs(model, batch, cfg), "sequential_steps": sequential_steps(model, *batch),
            "path_length": path_length(model, *batch)}


def measured_model(name: str, cfg: AnalyzeConfig) -> Seq2Seq:
    torch.manual_seed(cfg.seed)
    return build_at_width(name, cfg.models[name], cfg.width, symbols(cfg)).to(cfg.device).eval()


LONG_ROLES = ("transformer", "linformer", "sparse")


def sweep(cfg: AnalyzeConfig) -> dict:
    """{model: {"params": count, "layer_params_by_width": {d: count}, "rows": [measure() per length]}} of every
    model but those that only the long sweep measures (roles linformer and sparse: with the decoder's full
    attention on a target of T tokens, this sweep would measure the decoder)."""
    variants = {cfg.roles["linformer"], cfg.roles["sparse"]}
    others = {name for role, name in cfg.roles.items() if role not in ("linformer", "sparse")}
    result = {}
    for name, block in cfg.models.items():
        if name in variants - others:
            continue
        by_width = {d: layer_parameters(build_at_width(name, block, d, symbols(cfg))) for d in cfg.param_widths}
        model, generator = measured_model(name, cfg), torch.Generator().manual_seed(cfg.seed)
        rows = [measure(model, length, cfg, generator) for length in cfg.lengths]
        result[name] = {"params": model.num_parameters(), "layer_params_by_width": by_width, "rows": rows}
    return result


def long_sweep(cfg: AnalyzeConfig) -> dict:
    """{model: {"rows": [costs per length]}} of the roles transformer, linformer and sparse at
    analyze.long_lengths: a source of T tokens and a one-token target, so what grows is the encoder's
    self-attention (the decoder's and the cross-attention stay full in every variant)."""
    result = {}
    for name in (cfg.roles[role] for role in LONG_ROLES):
        model, generator = measured_model(name, cfg), torch.Generator().manual_seed(cfg.seed)
        result[name] = {"rows": [{"length": T, **costs(model, random_batch(cfg, generator, T, 1), cfg)}
                                 for T in cfg.long_lengths]}
    return result
