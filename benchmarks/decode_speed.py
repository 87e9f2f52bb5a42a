"""Decoding speed of every trained model: sentences/s and target tokens/s at beam 1 and beam 5.

    python benchmarks/decode_speed.py [--models-dir models] [--split test_2016_flickr] [--beams 1 5]

Reads the trained runs under --models-dir (<model>/seed<seed>/, one row per run and beam) and the
tokenized split of data/tokenized, decodes it once untimed (warm-up) and then timed, and prints one row per model and beam. Figures depend on
the machine and on output lengths: compare models of similar quality.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch

from nmtbench.config import load_params
from nmtbench.data.tokenizer import load_tokenized
from nmtbench.decoding.translator import Translator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=Path("models"))
    parser.add_argument("--tokenized-dir", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--sentences", type=int, help="decode only the first N sentences")
    args = parser.parse_args()

    decode = load_params().evaluate
    split = load_tokenized(args.tokenized_dir)[args.split]
    sources = split["src_ids"][: args.sentences]
    print(f"{len(sources)} sentences of {args.split}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"{'model/run':36s} {'beam':>4s} {'seconds':>8s} {'sent/s':>8s} {'tgt tok/s':>10s} {'mean len':>8s}")
    for model_dir in sorted(p.parent for p in args.models_dir.glob("*/seed*/best.ckpt")):
        for beam in args.beams:
            translator = Translator.from_model_dir(model_dir, dataclasses.replace(decode, beam=beam))
            translator.translate_ids(sources[:64])  # warm-up: allocator, kernels
            started = time.perf_counter()
            found = translator.translate_ids(sources)
            seconds = time.perf_counter() - started
            tokens = sum(len(h[0].tokens) + 1 for h in found)
            run = model_dir.relative_to(args.models_dir).as_posix()
            print(f"{run:36s} {beam:4d} {seconds:8.2f} {len(sources) / seconds:8.1f} "
                  f"{tokens / seconds:10.0f} {tokens / len(sources):8.1f}")


if __name__ == "__main__":
    main()
