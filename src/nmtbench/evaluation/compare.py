"""The compare stage: one table of cost and quality for every model, from the per-model metrics files."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from nmtbench.config import run_dir
from nmtbench.files import write_json, write_text

TRAIN_KEYS = ("params", "train_seconds", "train_tokens_per_s", "best_val_loss")
SCORE_KEYS = ("bleu", "chrf", "bleu_signature", "chrf_signature")


def compare(model_names: list[str], seeds: list[int], metrics_dir: Path = Path("metrics"),
            out_dir: Path = Path("results")) -> dict:
    """Write results/comparison.json (for `dvc metrics show`) and results/comparison.md; return the json."""
    if not model_names:
        raise ValueError("compare: no models given; params.yaml must define at least one models.<name> block")
    runs = [(name, seed) for name in model_names for seed in seeds]
    train = {run: _load(Path(metrics_dir), *run, "train.json", "train", TRAIN_KEYS) for run in runs}
    evals = {run: _load(Path(metrics_dir), *run, "eval.json", "evaluate") for run in runs}
    splits = _common_splits(evals, Path(metrics_dir))

    comparison = {}
    for name in model_names:
        row = {key: statistics.mean(train[name, seed][key] for seed in seeds) for key in TRAIN_KEYS}
        for split in splits:
            for metric in ("bleu", "chrf"):
                row[f"{split}_{metric}"] = statistics.mean(evals[name, seed][split][metric] for seed in seeds)
        comparison[name] = row
    write_json(Path(out_dir) / "comparison.json", comparison)
    write_text(Path(out_dir) / "comparison.md", _markdown(comparison, evals, splits))
    return comparison


def _load(metrics_dir: Path, name: str, seed: int, filename: str, stage: str, keys: tuple[str, ...] = ()) -> dict:
    path = metrics_dir / run_dir(name, seed) / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; run `dvc repro {stage}@{name}-{seed}` first")
    data = json.loads(path.read_text())
    missing = [key for key in keys if key not in data]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}; re-run `dvc repro {stage}@{name}-{seed}`")
    return data


def _common_splits(evals: dict[tuple[str, int], dict], metrics_dir: Path) -> list[str]:
    """The test splits every run was scored on; differing sets mean a stale evaluation."""
    first, *others = evals
    splits = list(evals[first])
    for run in others:
        if list(evals[run]) != splits:
            raise ValueError(f"{metrics_dir / run_dir(*run) / 'eval.json'} scores {', '.join(evals[run]) or 'no splits'} "
                             f"but {metrics_dir / run_dir(*first) / 'eval.json'} scores {', '.join(splits)}; "
                             f"re-run `dvc repro evaluate@{run[0]}-{run[1]}`")
    for run, scores in evals.items():
        for split in splits:
            missing = [key for key in SCORE_KEYS if key not in scores[split]]
            if missing:
                raise ValueError(f"{metrics_dir / run_dir(*run) / 'eval.json'}: {split} lacks {', '.join(missing)}; "
                                 f"re-run `dvc repro evaluate@{run[0]}-{run[1]}`")
    return splits


def _markdown(comparison: dict[str, dict], evals: dict[str, dict], splits: list[str]) -> str:
    header = ["Model", "Parameters", "Training time", "Train tokens/s", "Best val loss"]
    header += [f"{split} {metric}" for split in splits for metric in ("BLEU", "chrF")]
    lines = ["| " + " | ".join(header) + " |", "|:---|" + "---:|" * (len(header) - 1)]
    for name, row in comparison.items():
        cells = [name, f"{row['params']:,}", _duration(row["train_seconds"]),
                 f"{row['train_tokens_per_s']:,.0f}", f"{row['best_val_loss']:.3f}"]
        cells += [f"{row[f'{split}_{metric}']:.2f}" for split in splits for metric in ("bleu", "chrf")]
        lines.append("| " + " | ".join(cells) + " |")

    # Scores are comparable only under one signature, so every distinct one is listed.
    lines += ["", "sacreBLEU signatures:", ""]
    for metric, label in (("bleu", "BLEU"), ("chrf", "chrF")):
        signatures = dict.fromkeys(evals[run][split][f"{metric}_signature"] for run in evals for split in splits)
        lines += [f"- {label}: `{signature}`" for signature in signatures]
    return "\n".join(lines) + "\n"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"
