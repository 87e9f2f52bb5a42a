"""Data pipeline cost at WMT scale: wall time and peak memory of each step, from raw text to batches.

    python benchmarks/data_scale.py [--sizes 29000 290000 2900000 4500000] [--work-dir runs/data-scale]
                                    [--batch-tokens 8192] [--num-workers 0] [--keep]

For each size N, a deterministic synthetic en-de corpus of N training pairs (plus 3,000-pair val and test
splits) is written as <split>.<lang>.gz files, each pair the concatenation of a geometric number (mean 2)
of randomly drawn Multi30k training pairs: about 25 words a side on average, with a long tail past 100
words, like WMT news text. It needs the Multi30k mirror (NMTBENCH_DATA_MIRROR). Then the
pipeline runs on it with the default params, except `data.max_length: 250` (WMT-style filtering, so the
tail survives) and the files source:

  corpus    writing the synthetic corpus (set-up, not a pipeline step)
  prepare   the prepare stage through `data.source: {kind: files}`
  tokenize  the tokenize stage: sentencepiece on a sample of tokenize.sample_sentences, every split encoded
  plan      one epoch's batch plan of train (TokenBatchSampler, shuffled, --batch-tokens)
  load      one epoch of train batches read and padded by the training DataLoader (no model)

Each step runs in a process of its own, so its memory is its own. Columns: `step s`, the step's own wall time;
`cpu s`, the CPU time of its processes (user + system; steady on a shared machine where wall time is not);
`process s`, wall time with the interpreter's start and imports; `peak GiB`, the peak resident memory of the
step's process and its workers together (their Pss summed, sampled every 0.1 s: summing RSS instead would
count the memory forked workers share with their parent once per worker), and `anon GiB`, the peak of its
anonymous part, which leaves out the file pages a memory-mapped dataset brings in (page cache, which the
kernel reclaims under pressure). For load, `data_anon_GiB` is the anonymous memory above what the process
held after importing torch, Lightning and datasets: what a training process spends on data besides the model.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import datasets
import numpy as np
import psutil

from nmtbench.config import DataConfig, TokenizeConfig
from nmtbench.data.prepare import prepare
from nmtbench.data.tokenized import TokenizedSplits
from nmtbench.data.tokenizer import tokenize

SEED = 12345
EVAL_PAIRS = 3_000
LANGS = ("en", "de")
GIB = 2**30
SHOWN = ("step_s", "cpu_s", "process_s", "peak_mem", "peak_anon", "baseline_anon")  # the table's columns


# --- the steps, each run as `data_scale.py --step <name> <folder>` in a child process -----------------------------

def write_corpus(folder: Path, pairs: int) -> dict:
    """train/val/test .en.gz and .de.gz of recombined Multi30k training pairs."""
    mirror = Path(os.environ.get("NMTBENCH_DATA_MIRROR", ""))
    if not (mirror / "train.en.gz").is_file():
        sys.exit("data_scale: set NMTBENCH_DATA_MIRROR to a folder holding the Multi30k raw files")
    sentences = {lang: gzip.open(mirror / f"train.{lang}.gz", "rt", encoding="utf-8").read().splitlines()
                 for lang in LANGS}
    words = np.array([len(s.split()) for s in sentences["en"]])
    rng = np.random.default_rng(SEED)
    folder.mkdir(parents=True, exist_ok=True)
    lengths = []
    for split, n in (("train", pairs), ("val", EVAL_PAIRS), ("test", EVAL_PAIRS)):
        files = {lang: gzip.open(folder / f"{split}.{lang}.gz", "wt", encoding="utf-8", compresslevel=1)
                 for lang in LANGS}
        for first in range(0, n, 100_000):
            parts = rng.geometric(0.5, min(100_000, n - first))  # Multi30k pairs per pair, mean 2
            drawn = rng.integers(0, len(words), parts.sum())
            ends = np.cumsum(parts).tolist()
            if split == "train":
                lengths.append(np.add.reduceat(words[drawn], np.r_[0, ends[:-1]]))
            drawn = drawn.tolist()
            for lang, file in files.items():
                pick = sentences[lang].__getitem__
                file.write("".join(" ".join(map(pick, drawn[start:end])) + "\n"
                                   for start, end in zip([0, *ends[:-1]], ends)))
        for file in files.values():
            file.close()
    lengths = np.concatenate(lengths)
    return {"train_pairs": pairs, "mean_en_words": round(float(lengths.mean()), 2),
            "p99_en_words": int(np.percentile(lengths, 99)), "max_en_words": int(lengths.max())}


def data_params(folder: Path) -> DataConfig:
    return DataConfig(source={"kind": "files", "path": str(folder / "corpus")}, eval_splits=["test"], max_length=250)


def run_prepare(folder: Path) -> dict:
    stats = prepare(data_params(folder), None, folder / "prepared", folder / "stats.json", folder / "raw")
    return {"train_pairs": stats["splits"]["train"]["pairs"]}


def run_tokenize(folder: Path) -> dict:
    return {"vocab": tokenize(TokenizeConfig(), folder / "prepared", folder / "tokenized").source.size}


def train_pairs(folder: Path):
    from nmtbench.data.batching import PairDataset

    return PairDataset.from_disk(TokenizedSplits(folder / "tokenized").folder / "train")


def run_plan(folder: Path, batch_tokens: int) -> dict:
    from nmtbench.data.batching import TokenBatchSampler

    data = train_pairs(folder)
    started = time.perf_counter()
    batches = len(TokenBatchSampler(data.src_lens, data.tgt_lens, batch_tokens, shuffle=True, seed=SEED))
    return {"plan_s": round(time.perf_counter() - started, 3), "batches": batches}


def run_load(folder: Path, batch_tokens: int, num_workers: int) -> dict:
    from nmtbench.data.batching import TokenBatchSampler, batch_loader

    baseline = memory(os.getpid())["Pss_Anon"]
    data = train_pairs(folder)
    sampler = TokenBatchSampler(data.src_lens, data.tgt_lens, batch_tokens, shuffle=True, seed=SEED)
    tokens = batches = 0
    for batch in batch_loader(data, sampler, num_workers):
        tokens += int(batch["src_mask"].sum()) + int(batch["tgt_out"].numel())
        batches += 1
    return {"baseline_anon": baseline, "batches": batches, "padded_tokens": tokens}


STEPS = {"corpus": lambda folder, args: write_corpus(folder / "corpus", args.pairs),
         "prepare": lambda folder, args: run_prepare(folder),
         "tokenize": lambda folder, args: run_tokenize(folder),
         "plan": lambda folder, args: run_plan(folder, args.batch_tokens),
         "load": lambda folder, args: run_load(folder, args.batch_tokens, args.num_workers)}


# --- the parent: one child per step, its memory sampled --------------------------------------------------------

def memory(pid: int) -> dict[str, int]:
    """Bytes of a process's proportional set size (Pss: a page shared by k processes counts 1/k in each, so
    the Pss of a process tree adds up to its real memory) and of its anonymous part (Pss_Anon)."""
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        fields = dict(line.split()[:2] for line in rollup if line.startswith(("Pss:", "Pss_Anon:")))
    return {"Pss": int(fields["Pss:"]) * 1024, "Pss_Anon": int(fields["Pss_Anon:"]) * 1024}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(command: list[str]) -> dict:
    """Run command; its wall time and CPU time, its JSON result line, and the peak memory (total and anonymous)
    of its process tree."""
    peak = {"Pss": 0, "Pss_Anon": 0}
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample():
        root = psutil.Process(child.pid)
        while not done.wait(0.1):
            try:
                tree = [memory(p.pid) for p in [root, *root.children(recursive=True)]]
            except (psutil.Error, OSError):  # a worker came or went mid-read: sample again
                continue
            for key in peak:
                peak[key] = max(peak[key], sum(process[key] for process in tree))

    sampler = threading.Thread(target=sample, daemon=True)
    started, cpu = time.perf_counter(), children_cpu()
    sampler.start()
    out, _ = child.communicate()
    wall, cpu = time.perf_counter() - started, children_cpu() - cpu
    done.set()
    sampler.join()
    if child.returncode:
        sys.exit(f"data_scale: {' '.join(command[-3:])} failed with exit status {child.returncode}")
    return {"process_s": round(wall, 2), "cpu_s": round(cpu, 1), "peak_mem": peak["Pss"], "peak_anon": peak["Pss_Anon"],
            **json.loads(out.strip().splitlines()[-1])}


def growth(rows: list[dict], step: str, key: str) -> str:
    """How a figure grows from one size to the next, against how N grows (1.0: linear)."""
    points = [(row["pairs"], row["steps"][step][key]) for row in rows]
    return ", ".join(f"x{b / a:.2f} for N x{m / n:.3g}" for (n, a), (m, b) in zip(points, points[1:]) if a > 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[29_000, 290_000, 2_900_000, 4_500_000])
    parser.add_argument("--work-dir", type=Path, default=Path("runs/data-scale"))
    parser.add_argument("--batch-tokens", type=int, default=8192, help="padded tokens per batch (default 8192)")
    parser.add_argument("--num-workers", type=int, default=0, help="data-loader workers of the load step")
    parser.add_argument("--keep", action="store_true", help="keep each size's corpus and datasets in --work-dir")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--pairs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("folder", type=Path, nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    datasets.disable_progress_bars()
    if args.step:  # a child: run one step, print its result, with the step's own time, as the last line
        if args.step in ("plan", "load"):  # torch and Lightning, loaded as in a training process, before the clock
            import nmtbench.data.batching  # noqa: F401
        started = time.perf_counter()
        result = STEPS[args.step](args.folder, args)
        print(json.dumps({"step_s": round(time.perf_counter() - started, 2), **result}))
        return

    rows = []
    print(f"{'pairs':>10s} {'step':9s} {'step s':>8s} {'cpu s':>8s} {'process s':>9s} {'peak GiB':>8s} "
          f"{'anon GiB':>8s}  notes", flush=True)
    for pairs in args.sizes:
        folder = args.work_dir / f"n{pairs}"
        shutil.rmtree(folder, ignore_errors=True)
        row = {"pairs": pairs, "steps": {}}
        for step in STEPS:
            command = [sys.executable, __file__, "--step", step, "--pairs", str(pairs), "--batch-tokens",
                       str(args.batch_tokens), "--num-workers", str(args.num_workers), str(folder)]
            result = row["steps"][step] = measure(command)
            notes = {k: v for k, v in result.items() if k not in SHOWN}
            if step == "load":
                notes["data_anon_GiB"] = round((result["peak_anon"] - result["baseline_anon"]) / GIB, 3)
            print(f"{pairs:10,d} {step:9s} {result['step_s']:8.1f} {result['cpu_s']:8.1f} {result['process_s']:9.1f} "
                  f"{result['peak_mem'] / GIB:8.2f} {result['peak_anon'] / GIB:8.2f}  {json.dumps(notes)}", flush=True)
        rows.append(row)
        if not args.keep:
            shutil.rmtree(folder)
    if len(rows) > 1:
        print("\ngrowth from each size to the next (step time; CPU time; peak memory):")
        for step in STEPS:
            print(f"  {step:9s} {growth(rows, step, 'step_s')}; {growth(rows, step, 'cpu_s')}; "
                  f"{growth(rows, step, 'peak_mem')}")
    args.work_dir.mkdir(parents=True, exist_ok=True)
    (args.work_dir / "results.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
