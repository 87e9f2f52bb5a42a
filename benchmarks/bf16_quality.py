"""Does bf16 keep the quality fp32 reaches? Val BLEU after an equal FLOP budget, both precisions, several seeds.

    python benchmarks/bf16_quality.py [--models transformer_prenorm ...] [--seeds 42 43 44]
                                      [--precisions 32-true bf16-mixed] [--flops 3.3e13] [--jobs 2]
                                      [--params params.yaml] [--tokenized-dir data/tokenized] [--out DIR]

Each model, precision and seed trains as its `train@<model>-<seed>` stage does (nmtbench.training.train: the
model's recipe from --params, with its tuned values where tuned/<model>.yaml holds them), to the same FLOP budget
(train.budget's, or --flops). FLOPs are counted on an fp32 copy of the model whatever the precision, so both
precisions stop at the same step. The runs write under --out (default runs/bf16-quality), never over a
workspace's own runs; a run already there with its train.json is read, not trained again, so an interrupted
benchmark resumes.

It prints, per model and precision, every seed's best greedy val BLEU, their mean and standard deviation and the
training tokens/s, then the verdict per model: bf16's mean val BLEU within fp32's rerun spread (the range of its
seeds: what changing only the seed moves) or outside it. Both precisions train in one run of the benchmark, side by
side, --jobs at a time with one torch thread each by default: tokens/s compare only between runs that shared
the machine the same way.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from nmtbench.provenance import cpu_model
from nmtbench.training.precision import cpu_flags

PRECISIONS = ["32-true", "bf16-mixed"]


def train_one(params_path: str, model: str, precision: str, seed: int, flops: float | None, threads: int,
              tokenized_dir: str, out: str) -> dict:
    """One run, in a process of its own: train.json's figures (read back when the run finished before)."""
    root = Path(out) / precision
    done = root / "metrics" / model / f"seed{seed}" / "train.json"
    if done.is_file():
        return json.loads(done.read_text())
    from nmtbench.config import load_params
    from nmtbench.training.train import train
    from nmtbench.training.tuning import tuned_params, with_values

    params = tuned_params(load_params(params_path).for_model(model), model, Path(tokenized_dir))
    train_values = {"precision": precision, "num_threads": threads}
    if flops is not None:
        train_values["budget"] = params.train.budget.model_copy(update={"kind": "flops", "value": flops})
    params = with_values(params, model, {"train": train_values})
    params = params.model_copy(update={"wandb": params.wandb.model_copy(update={"mode": "disabled"})})
    root.mkdir(parents=True, exist_ok=True)
    return train(params, model, seed, Path(tokenized_dir), root)


def within_spread(reference: list[float], other: list[float]) -> bool:
    """Whether other's mean lies within the range of reference's runs (at least two, or there is no spread)."""
    if len(reference) < 2:
        raise ValueError("fp32's rerun spread needs at least two seeds (--seeds 42 43 44)")
    return min(reference) <= statistics.fmean(other) <= max(reference)


def summary(runs: dict[str, dict[int, dict]]) -> dict[str, dict]:
    """Per precision: each seed's best val BLEU, their mean and sd, and the mean training tokens/s."""
    rows = {}
    for precision, by_seed in runs.items():
        bleus = [by_seed[seed]["best_val_bleu"] for seed in sorted(by_seed)]
        rows[precision] = {
            "val_bleu": bleus,
            "mean": statistics.fmean(bleus),
            "sd": statistics.stdev(bleus) if len(bleus) > 1 else 0.0,
            "tokens_per_s": statistics.fmean(by_seed[seed]["train_tokens_per_s"] for seed in by_seed),
            "steps": sorted({by_seed[seed]["steps"] for seed in by_seed}),
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["transformer_prenorm", "lstm_attention_additive"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[42, 43, 44])
    parser.add_argument("--precisions", nargs="+", default=PRECISIONS, choices=PRECISIONS)
    parser.add_argument("--flops", type=float, help="the FLOP budget of every run (default: train.budget's)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--tokenized-dir", default="data/tokenized")
    parser.add_argument("--out", default="runs/bf16-quality")
    args = parser.parse_args()
    if "32-true" not in args.precisions:
        sys.exit("bf16_quality: error: the verdict compares with fp32; keep 32-true in --precisions")
    if not (Path(args.tokenized_dir) / "vocab.json").is_file():
        sys.exit(f"bf16_quality: error: no tokenized data in {args.tokenized_dir}; run `dvc repro tokenize` first")

    flags = sorted(cpu_flags() & {"amx_bf16", "avx512_bf16", "avx512f"}) or ["no AVX-512 or AMX"]
    print(f"{cpu_model()} ({', '.join(flags)}), {len(os.sched_getaffinity(0))} cores usable, "
          f"{args.jobs} runs at once of {args.threads} thread(s) each", flush=True)
    keys = [(m, p, s) for m in args.models for s in args.seeds for p in args.precisions]
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        futures = {key: pool.submit(train_one, args.params, *key, args.flops, args.threads, args.tokenized_dir,
                                    args.out) for key in keys}
        results = {key: future.result() for key, future in futures.items()}

    print(f"{'model':40s} {'precision':>10s} {'steps':>7s} {'val BLEU per seed':>24s} {'mean':>6s} {'sd':>5s} "
          f"{'tgt tok/s':>9s}")
    report = {}
    for model in args.models:
        runs = {p: {s: results[(model, p, s)] for s in args.seeds} for p in args.precisions}
        rows = summary(runs)
        for precision, row in rows.items():
            print(f"{model:40s} {precision:>10s} {'/'.join(map(str, row['steps'])):>7s} "
                  f"{' '.join(f'{b:.2f}' for b in row['val_bleu']):>24s} {row['mean']:6.2f} {row['sd']:5.2f} "
                  f"{row['tokens_per_s']:9.0f}")
        fp32 = rows["32-true"]["val_bleu"]
        for precision in [p for p in args.precisions if p != "32-true"]:
            inside = within_spread(fp32, rows[precision]["val_bleu"])
            rows[precision]["within_fp32_spread"] = inside
            print(f"  {precision}: mean {rows[precision]['mean'] - rows['32-true']['mean']:+.2f} BLEU against fp32, "
                  f"{'within' if inside else 'OUTSIDE'} fp32's seeds' range [{min(fp32):.2f}, {max(fp32):.2f}]; "
                  f"{rows[precision]['tokens_per_s'] / rows['32-true']['tokens_per_s']:.2f}x its tokens/s")
        report[model] = rows
    (Path(args.out) / "summary.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    try:
        main()
    except (ValueError, FileNotFoundError) as error:  # an unknown model, a bad budget: one line, as the CLI
        sys.exit(f"bf16_quality: error: {error}")
