"""Training throughput per model family, fp32 and bf16-mixed: target tokens/s and the fraction of matmul peak.

    python benchmarks/train_throughput.py [--models transformer cnn ...] [--precisions 32-true bf16-mixed]
                                          [--target-tokens 1809 | --batch-tokens 4096] [--steps 5] [--warmup 2]

Times training steps (forward, label-smoothed loss, backward, gradient clipping, Adam) of the
training module's own loss on real Multi30k batches from data/tokenized, drawn the way training
draws them (TokenBatchSampler, seed 42); every model and precision sees the same batches.

Batches: `--batch-tokens` is our budget of padded source + target tokens. JoeyNMT counts its budget
otherwise (sentences x max(source + 1, target + 1) padded positions), so equal budgets are not equal
batches; `--target-tokens T` (the default, 1,809: the real target tokens per update JoeyNMT's
4,096-position batches held on Multi30k) picks the budget whose batches hold T real target tokens
(end of sentence included) on average, which is what a tokens/s figure counts.

Peak: the best of repeated fp32 and bf16 square matrix products (512 to 2048) on this machine,
with the same threads. The fraction reported is model FLOPs per second (nmtbench.models.flops:
forward and backward, a multiply-add is 2) over the peak of the precision trained in. Run it on a
quiet machine: other work inflates the step times, and the fraction with them.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from nmtbench.config import load_params
from nmtbench.data.batching import PairDataset, TokenBatchSampler
from nmtbench.data.tokenizer import PAD, load_tokenized
from nmtbench.models.flops import training_step_flops
from nmtbench.training.module import TranslationModule

FAMILIES = ["lstm_attention_additive", "transformer", "transformer_prenorm", "decoder_only", "cnn", "joeynmt_rnn"]
# JoeyNMT's RNN as its peer benchmark configures it, from the profile the decoding benchmark's models train with
PEER_BLOCKS = yaml.safe_load((Path(__file__).resolve().parents[1] / "profiles" / "peer.yaml").read_text())["models"]
SEED = 42


def matmul_peak(dtype: torch.dtype, repeats: int = 10) -> float:
    """Best FLOP/s of square matrix products in dtype, over sizes from cache-resident to memory-bound."""
    best = 0.0
    for size in (512, 1024, 2048):
        a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
        a @ b  # warm-up
        for _ in range(repeats):
            started = time.perf_counter()
            a @ b
            best = max(best, 2 * size ** 3 / (time.perf_counter() - started))
    return best


def target_tokens_per_batch(sampler: TokenBatchSampler, tgt_lens: np.ndarray) -> float:
    """Mean real target tokens (end of sentence included) per batch; one process's batches hold every pair."""
    return float((tgt_lens + 1).sum()) / len(sampler)


def budget_for(target_tokens: float, src_lens: np.ndarray, tgt_lens: np.ndarray) -> int:
    """The smallest batch_tokens whose batches hold at least target_tokens real target tokens on average."""
    low, high = 1, 64 * int(target_tokens)
    while low < high:
        middle = (low + high) // 2
        sampler = TokenBatchSampler(src_lens, tgt_lens, middle, shuffle=True, seed=SEED)
        if target_tokens_per_batch(sampler, tgt_lens) < target_tokens:
            low = middle + 1
        else:
            high = middle
    return low


def time_steps(module: TranslationModule, batches: list[dict], warmup: int, precision: str) -> float:
    """Seconds of len(batches) - warmup training steps, after warmup untimed ones."""
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    module.train()
    started = 0.0
    for i, batch in enumerate(batches):
        if i == warmup:
            started = time.perf_counter()
        autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16-mixed"
                    else contextlib.nullcontext())
        with autocast:
            loss, _, _ = module.loss(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenized-dir", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--models", nargs="+", default=FAMILIES,
                        help=f"model blocks of params.yaml, or {', '.join(PEER_BLOCKS)} "
                             f"(default: {' '.join(FAMILIES)})")
    parser.add_argument("--precisions", nargs="+", default=["32-true", "bf16-mixed"], choices=["32-true", "bf16-mixed"])
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--target-tokens", type=float, default=1809.0,
                        help="choose the budget so batches hold this many real target tokens on average (default 1809)")
    budget.add_argument("--batch-tokens", type=int, help="our budget of padded source + target tokens per batch")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per model and precision")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    args = parser.parse_args()

    params = load_params()
    blocks = {name: PEER_BLOCKS.get(name) or params.model_block(name) for name in args.models}
    train = PairDataset(load_tokenized(args.tokenized_dir)["train"])
    src_lens, tgt_lens = train.src_lens, train.tgt_lens
    batch_tokens = args.batch_tokens or budget_for(args.target_tokens, src_lens, tgt_lens)
    sampler = TokenBatchSampler(src_lens, tgt_lens, batch_tokens, shuffle=True, seed=SEED)
    chosen = sampler.batches()[: args.warmup + args.steps]
    batches = [train[batch] for batch in chosen]
    timed = batches[args.warmup:]
    tokens = sum(int((b["tgt_out"] != PAD).sum()) for b in timed)
    vocab = json.loads((args.tokenized_dir / "vocab.json").read_text())
    peaks = {"32-true": matmul_peak(torch.float32), "bf16-mixed": matmul_peak(torch.bfloat16)}

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; matmul peak: "
          f"fp32 {peaks['32-true'] / 1e9:.0f} GFLOP/s, bf16 {peaks['bf16-mixed'] / 1e9:.0f} GFLOP/s")
    print(f"batch_tokens {batch_tokens} (padded source + target): "
          f"{target_tokens_per_batch(sampler, tgt_lens):.0f} real target tokens per batch over the epoch, "
          f"{tokens / len(timed):.0f} in the {len(timed)} timed batches")
    print(f"{'model':24s} {'params':>10s} {'precision':>10s} {'seconds':>8s} {'tgt tok/s':>10s} "
          f"{'GFLOP/s':>8s} {'of peak':>8s}")
    for name, block in blocks.items():
        torch.manual_seed(SEED)
        module = TranslationModule(name, block, vocab, {"label_smoothing": 0.1})
        flops = sum(sum(training_step_flops(module.model, b["src"], b["src_mask"], b["tgt_in"])) for b in timed)
        for precision in args.precisions:
            seconds = time_steps(module, batches, args.warmup, precision)
            print(f"{name:24s} {module.model.num_parameters():10,d} {precision:>10s} {seconds:8.2f} "
                  f"{tokens / seconds:10.0f} {flops / seconds / 1e9:8.1f} {flops / seconds / peaks[precision]:8.1%}")


if __name__ == "__main__":
    try:
        main()
    except (ValueError, FileNotFoundError) as error:  # an unknown model, no data/tokenized: one line, as the CLI
        sys.exit(f"train_throughput: error: {error}")
