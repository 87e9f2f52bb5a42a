"""The compare stage: one table of cost and quality for every model, from the per-model metrics files."""
from __future__ import annotations

import json
from pathlib import Path

from nmtbench.files import write_json, write_text

TRAIN_KEYS = ("params", "train_seconds", "train_tokens_per_s", "best_val_loss")
SCORE_KEYS = ("bleu", "chrf", "bleu_signature", "chrf_signature")


def compare(model_names: list[str], metrics_dir: Path = Path("metrics"), out_dir: Path = Path("results")) -> dict:
    """Write results/comparison.json (for `dvc metrics show`) and results/comparison.md; return the json."""
    if not model_names:
        raise ValueError("compare: no models given; params.yaml must define at least one models.<name> block")
    train = {name: _load(Path(metrics_dir), name, "train.json", "train", TRAIN_KEYS) for name in model_names}
    evals = {name: _load(Path(metrics_dir), name, "eval.json", "evaluate") for name in model_names}
    splits = _common_splits(evals, Path(metrics_dir))

    comparison = {}
    for name in model_names:
        row = {key: train[name][key] for key in TRAIN_KEYS}
        for split in splits:
            row[f"{split}_bleu"] = evals[name][split]["bleu"]
            row[f"{split}_chrf"] = evals[name][split]["chrf"]
        comparison[name] = row
    write_json(Path(out_dir) / "comparison.json", comparison)
    write_text(Path(out_dir) / "comparison.md", _markdown(comparison, evals, splits))
    return comparison


def _load(metrics_dir: Path, name: str, filename: str, stage: str, keys: tuple[str, ...] = ()) -> dict:
    path = metrics_dir / name / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; run `dvc repro {stage}@{name}` first")
    data = json.loads(path.read_text())
    missing = [key for key in keys if key not in data]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}; re-run `dvc repro {stage}@{name}`")
    return data


def _common_splits(evals: dict[str, dict], metrics_dir: Path) -> list[str]:
    """The test splits every model was scored on; differing sets mean a stale evaluation."""
    first, *others = evals
    splits = list(evals[first])
    for name in others:
        if list(evals[name]) != splits:
            raise ValueError(f"{metrics_dir / name / 'eval.json'} scores {', '.join(evals[name]) or 'no splits'} but "
                             f"{metrics_dir / first / 'eval.json'} scores {', '.join(splits)}; "
                             f"re-run `dvc repro evaluate@{name}`")
    for name, scores in evals.items():
        for split in splits:
            missing = [key for key in SCORE_KEYS if key not in scores[split]]
            if missing:
                raise ValueError(f"{metrics_dir / name / 'eval.json'}: {split} lacks {', '.join(missing)}; "
                                 f"re-run `dvc repro evaluate@{name}`")
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
        signatures = dict.fromkeys(evals[name][split][f"{metric}_signature"] for name in evals for split in splits)
        lines += [f"- {label}: `{signature}`" for signature in signatures]
    return "\n".join(lines) + "\n"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"
