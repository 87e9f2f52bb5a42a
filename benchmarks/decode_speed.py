"""Decoding speed of every trained model: sentences/s and target tokens/s at beam 1 and beam 5, fp32 or bf16.

    python benchmarks/decode_speed.py [--models-dir models] [--models transformer cnn]
                                      [--split SPLIT] [--beams 1 5] [--precisions 32 bf16] [--threads 2]

Finds every trained run (`<model>/seed<seed>/best.ckpt`) under --models-dir, decodes the tokenized split of
data/tokenized once untimed on its first 64 sentences (warm-up) and then whole, timed, and prints
one row per run, precision and beam: time, sentences/s, target tokens/s (eos included), mean output length
(eos excluded), BLEU, and the work done: decoder steps (calls of decode_step) and beam rows (rows fed to them).
--precisions decodes in fp32 (32) and/or bf16 autocast (bf16), as evaluate.precision does (default: its
value); bf16 translations may differ slightly, which the BLEU column shows.
Speed depends on output lengths, so compare models of similar quality (the BLEU column says).
"""
from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import torch

from nmtbench.config import load_params
from nmtbench.data.tokenizer import load_tokenized
from nmtbench.decoding.translator import Translator
from nmtbench.evaluation.scoring import score
from nmtbench.run_paths import MODELS


class WorkCounter:
    """Wraps a model's decode_step to count the calls and the rows they are given."""

    def __init__(self, model):
        self.steps = self.rows = 0
        self._decode_step = model.decode_step
        model.decode_step = self

    def __call__(self, state, y_prev):
        self.steps += 1
        self.rows += y_prev.size(0)
        return self._decode_step(state, y_prev)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=MODELS)
    parser.add_argument("--models", nargs="+", help="only these model folders (names under --models-dir)")
    parser.add_argument("--tokenized-dir", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--split", help="the split decoded (default: the first of data.eval_splits)")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--precisions", nargs="+", choices=["32", "bf16"],
                        help="decode in fp32 (32) and/or bf16 autocast (default: evaluate.precision)")
    parser.add_argument("--sentences", type=int, help="decode only the first N sentences")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    params = load_params()
    decode = params.evaluate
    args.split = args.split or params.data.eval_splits[0]
    split = load_tokenized(args.tokenized_dir)[args.split]
    sources, references = split["src_ids"][: args.sentences], split["tgt"][: args.sentences]
    model_dirs = sorted(p.parent for p in args.models_dir.rglob("best.ckpt"))
    if args.models:
        model_dirs = [d for d in model_dirs if d.relative_to(args.models_dir).parts[0] in args.models]
    if not model_dirs:
        raise SystemExit(f"decode_speed: no trained model (best.ckpt) under {args.models_dir}; run make repro first")
    print(f"{len(sources)} sentences of {args.split}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"batches of {decode.batch_size} sentences, length penalty {decode.length_penalty} alpha {decode.alpha:g}")
    print(f"{'model':28s} {'precision':>9s} {'beam':>4s} {'seconds':>8s} {'sent/s':>8s} {'tgt tok/s':>10s} "
          f"{'mean len':>8s} {'BLEU':>6s} {'steps':>6s} {'beam rows':>10s}")
    for model_dir, precision, beam in itertools.product(model_dirs, args.precisions or [decode.precision], args.beams):
        translator = Translator.from_model_dir(model_dir, decode.model_copy(update={"beam": beam,
                                                                                      "precision": precision}))
        translator.translate_ids(sources[:64])  # warm-up: allocator, kernels
        work = WorkCounter(translator.model)
        started = time.perf_counter()
        found = translator.translate_ids(sources)
        seconds = time.perf_counter() - started
        length = sum(len(h[0].tokens) for h in found)
        tokens = length + len(found)  # and one eos each
        bleu = score([translator.tokenizer.decode(h[0].tokens) for h in found], references)["bleu"]
        name = str(model_dir.relative_to(args.models_dir))
        print(f"{name:28s} {precision:>9s} {beam:4d} {seconds:8.2f} {len(sources) / seconds:8.1f} "
              f"{tokens / seconds:10.0f} {length / len(sources):8.1f} {bleu:6.2f} {work.steps:6d} {work.rows:10d}",
              flush=True)


if __name__ == "__main__":
    main()
