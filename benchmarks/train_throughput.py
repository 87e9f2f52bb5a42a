"""Training throughput per model family, fp32 and bf16-mixed: target tokens/s and the fraction of matmul peak.

    python benchmarks/train_throughput.py [--models transformer cnn ...] [--precisions 32-true bf16-mixed]
                                          [--target-tokens 1809 | --batch-tokens 4096] [--steps 5] [--warmup 2]
                                          [--tokenized-dir data/tokenized] [--profile]

Times training steps (forward, label-smoothed loss, backward, gradient clipping, Adam) as training
runs them (the training module's loss, optimiser and precision plugin) on real Multi30k batches from
--tokenized-dir, drawn the way training draws them (TokenBatchSampler, seed 42); every model and
precision sees the same batches. The timed steps run once untimed first (warm_up): a long run's steady state.

--profile runs the same steps under torch.profiler instead of timing them and prints, per model and
precision, the share of the steps' wall time taken by matrix products, dropout, casts, softmax and
loss, normalisation, the optimiser (with gradient clipping) and the rest ("outside ops": Python and
the framework between operators). The grouping is the CATEGORIES table below. The profiler's own cost
makes the steps slower than timed ones; the shares are what it is for.

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
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
import yaml

from nmtbench.config import TrainConfig, load_params
from nmtbench.data.batching import PairDataset, TokenBatchSampler
from nmtbench.data.subwords import PAD
from nmtbench.data.tokenized import TokenizedSplits
from nmtbench.models.flops import training_step_flops
from nmtbench.training.allocator import reuse_freed_memory
from nmtbench.training.module import TranslationModule, adam
from nmtbench.training.precision import precision_plugin

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


# The parts of a training step a profile reports, each named by prefixes of profiler event names. An
# operator counts in the first category whose prefix starts its own name or the name of an event it
# ran inside (an operator, or a labelled range: the shared dropout and loss label theirs, and the steps
# below label the optimiser's), so a cast made inside dropout is dropout's and a matrix product
# inside the optimiser the optimiser's. Operators of no category are "other ops".
CATEGORIES = {
    "optimizer": ("optimizer",),
    "dropout": ("dropout", "aten::bernoulli_", "aten::native_dropout", "aten::dropout"),
    "casts": ("aten::_to_copy",),
    "softmax/loss": ("loss", "autograd::engine::evaluate_function: LabelSmoothedNLLBackward", "aten::_softmax",
                     "aten::_log_softmax", "aten::nll_loss", "aten::cross_entropy_loss"),
    "normalisation": ("aten::native_layer_norm",),
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::convolution",
                        "aten::mkldnn_rnn_layer", "aten::_scaled_dot_product_flash_attention_for_cpu"),
}
COLUMNS = [*CATEGORIES, "other ops", "outside ops"]


def category(event) -> str:
    """The CATEGORIES entry of a profiler event, from its own name and those of the events around it."""
    names = []
    while event is not None:
        names.append(event.name)
        event = event.cpu_parent
    for name, prefixes in CATEGORIES.items():
        if any(n.startswith(prefixes) for n in names):
            return name
    return "other ops"


class Steps:
    """Training steps of one model as Lightning runs them: the precision plugin's forward context, the
    module's loss, backward, gradient clipping and the module's Adam."""

    def __init__(self, module: TranslationModule):
        self.module, self.optimizer = module.train(), adam(module, TrainConfig(lr=1e-4))

    def __call__(self, batches: list[dict], precision: str) -> None:
        plugin = precision_plugin(precision, "cpu")
        for batch in batches:
            batch = self.module.on_before_batch_transfer(batch, 0)  # as Lightning calls it before each step
            with plugin.forward_context():
                loss, _, _ = self.module.loss(batch)
            loss.backward()
            with torch.profiler.record_function("optimizer"):
                torch.nn.utils.clip_grad_norm_(self.module.parameters(), 1.0)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)


def warm_up(steps: Steps, batches: list[dict], warmup: int, precision: str) -> None:
    """warmup untimed steps, then the timed steps once untimed: a long run's steady state, where the memory of its
    largest batch is the process's already. The first step of a batch larger than any before page-faults its
    fresh logits (a tenth of a second for 2,000 x 8,000 floats), which a long run pays once."""
    steps(batches[:warmup], precision)
    steps(batches[warmup:], precision)


def time_steps(steps: Steps, batches: list[dict], warmup: int, precision: str) -> float:
    """Seconds of len(batches) - warmup training steps, after warm_up."""
    warm_up(steps, batches, warmup, precision)
    started = time.perf_counter()
    steps(batches[warmup:], precision)
    return time.perf_counter() - started


def profile_steps(steps: Steps, batches: list[dict], warmup: int, precision: str) -> dict[str, float]:
    """Seconds per COLUMNS entry of len(batches) - warmup steps under torch.profiler, after warm_up."""
    warm_up(steps, batches, warmup, precision)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        started = time.perf_counter()
        steps(batches[warmup:], precision)
        wall = time.perf_counter() - started
    seconds = defaultdict(float)
    for event in profile.events():
        seconds[category(event)] += event.self_cpu_time_total / 1e6
    seconds["outside ops"] = wall - sum(seconds.values())
    return {column: seconds[column] for column in COLUMNS}


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
    parser.add_argument("--profile", action="store_true",
                        help="print where the steps' time goes (matrix products, dropout, casts, ...) instead")
    args = parser.parse_args()

    reuse_freed_memory()  # as training does
    params = load_params()
    blocks = {name: PEER_BLOCKS.get(name) or params.model_block(name) for name in args.models}
    train = PairDataset.from_disk(TokenizedSplits(args.tokenized_dir).folder / "train")
    src_lens, tgt_lens = train.src_lens, train.tgt_lens
    batch_tokens = args.batch_tokens or budget_for(args.target_tokens, src_lens, tgt_lens)
    sampler = TokenBatchSampler(src_lens, tgt_lens, batch_tokens, shuffle=True, seed=SEED)
    chosen = sampler.batches()[: args.warmup + args.steps]
    batches = [train[batch] for batch in chosen]
    timed = batches[args.warmup:]
    tokens = sum(int((b["tgt_out"] != PAD).sum()) for b in timed)
    vocab = json.loads((args.tokenized_dir / "vocab.json").read_text())

    def models():
        for name, block in blocks.items():
            torch.manual_seed(SEED)
            yield name, TranslationModule(name, block, vocab, {"label_smoothing": 0.1})

    if args.profile:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {len(timed)} profiled steps of "
              f"{tokens / len(timed):.0f} target tokens each; share of the steps' wall time:")
        print(f"{'model':24s} {'precision':>10s} {'s/step':>7s} " + " ".join(f"{c:>15s}" for c in COLUMNS))
        for name, module in models():
            steps = Steps(module)
            for precision in args.precisions:
                seconds = profile_steps(steps, batches, args.warmup, precision)
                wall = sum(seconds.values())
                print(f"{name:24s} {precision:>10s} {wall / len(timed):7.2f} "
                      + " ".join(f"{seconds[c] / wall:15.1%}" for c in COLUMNS), flush=True)
        return

    peaks = {"32-true": matmul_peak(torch.float32), "bf16-mixed": matmul_peak(torch.bfloat16)}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; matmul peak: "
          f"fp32 {peaks['32-true'] / 1e9:.0f} GFLOP/s, bf16 {peaks['bf16-mixed'] / 1e9:.0f} GFLOP/s")
    print(f"batch_tokens {batch_tokens} (padded source + target): "
          f"{target_tokens_per_batch(sampler, tgt_lens):.0f} real target tokens per batch over the epoch, "
          f"{tokens / len(timed):.0f} in the {len(timed)} timed batches")
    print(f"{'model':24s} {'params':>10s} {'precision':>10s} {'seconds':>8s} {'tgt tok/s':>10s} "
          f"{'GFLOP/s':>8s} {'of peak':>8s}")
    for name, module in models():
        flops = sum(sum(training_step_flops(module.model, b["src"], b["src_mask"], b["tgt_in"])) for b in timed)
        steps = Steps(module)
        for precision in args.precisions:
            seconds = time_steps(steps, batches, args.warmup, precision)
            print(f"{name:24s} {module.model.num_parameters():10,d} {precision:>10s} {seconds:8.2f} "
                  f"{tokens / seconds:10.0f} {flops / seconds / 1e9:8.1f} {flops / seconds / peaks[precision]:8.1%}")


if __name__ == "__main__":
    try:
        main()
    except (ValueError, FileNotFoundError) as error:  # an unknown model, no data/tokenized: one line, as the CLI
        sys.exit(f"train_throughput: error: {error}")
