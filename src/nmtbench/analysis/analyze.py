"""Stage `analyze`: measure, judge every claim, and write results/claims.md, results/claims.json and
the plots in results/claims/."""
from __future__ import annotations

import time
from pathlib import Path

import torch

from nmtbench import figures
from nmtbench.analysis.claims import table, verdicts
from nmtbench.analysis.complexity import long_sweep, sweep
from nmtbench.analysis.gradients import probe
from nmtbench.analysis.sizing import at_width
from nmtbench.analysis.synthetic import run_tasks
from nmtbench.config import ConfigError, Params
from nmtbench.files import atomic_dir, write_bytes, write_json, write_text
from nmtbench.loading import model_vocab, read_vocab
from nmtbench.models.registry import model_config
from nmtbench.provenance import stamp
from nmtbench.run_paths import RESULTS


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    return f"CPU, {torch.get_num_threads()} thread{'s' if torch.get_num_threads() > 1 else ''}"


def analyze(params: Params, tokenized_dir: Path = Path("data/tokenized"),
            out_dir: Path = RESULTS) -> list[dict]:
    started = time.perf_counter()
    cfg = params.analyze
    if cfg is None:
        raise ConfigError("analyze: params.yaml has no analyze block; add one (see docs/claims.md)")
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("analyze.device: cuda, but no GPU is visible; set analyze.device: cpu")
    for name, block in cfg.models.items():  # refuse a bad block before any work
        model_config(name, at_width(name, block, cfg.width))
    vocab = model_vocab(read_vocab(tokenized_dir))
    for name in cfg.gradient_models:  # the gradient probe trains on data/tokenized, the other measures on symbols
        model_config(name, at_width(name, cfg.models[name], cfg.width), vocab)
    measurements = {"width": cfg.width, "device": device_name(cfg.device), "train_length": cfg.train_length,
                    "min_length": cfg.min_length, "span_threshold": cfg.span_threshold, "roles": cfg.roles,
                    "complexity": sweep(cfg), "long": long_sweep(cfg), "gradients": probe(cfg, tokenized_dir),
                    "synthetic": run_tasks(cfg)}
    rows = verdicts(measurements)
    with atomic_dir(out_dir / "claims") as plot_dir:
        write_bytes(plot_dir / "complexity.png", figures.complexity(measurements["complexity"], cfg.width))
        write_bytes(plot_dir / "long_attention.png", figures.long_attention(measurements["long"], cfg.width))
        write_bytes(plot_dir / "gradients.png", figures.gradients(measurements["gradients"]))
        write_bytes(plot_dir / "synthetic.png", figures.synthetic(measurements["synthetic"], cfg.train_length))
    write_json(out_dir / "claims.json", {"verdicts": rows, "measurements": measurements,
                                         "provenance": stamp(started)})  # the timings are this machine's
    write_text(out_dir / "claims.md", table(rows, measurements))
    return rows
