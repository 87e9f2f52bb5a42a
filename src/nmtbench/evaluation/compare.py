"""The compare stage: cost and quality of every model side by side, over the runs of the models x seeds grid.

Per model and test set: the scores as mean +- sd over seeds, sacreBLEU's paired bootstrap resampling
against the baseline model (95% confidence interval, p-value), BLEU by source-length bucket, and a few
example translations. Per model, its tuning (tuned/<model>.yaml): trials spent, val BLEU untuned and tuned,
the winning values, and whether tuning changed the ranking. Last, the verdict (evaluation/verdict.py): the main
contrasts of the grid and the per-side contrasts of its encoders and decoders, each a BLEU difference with its
95% interval over seeds and test sets, and the published findings about the two halves, measured. It reads each
run's metrics (metrics/<model>/seed<seed>/) and translations (results/<model>/seed<seed>/<split>.txt); a translation
must match the hash its eval.json recorded, so depending on metrics/ is enough for DVC to see any changed
translation.
"""
from __future__ import annotations

import bisect
import hashlib
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import yaml

from nmtbench.config import BudgetConfig, CompareConfig, ConfigError
from nmtbench.evaluation.headline import BLEU_METRICS, bleu_metrics
from nmtbench.evaluation.published import beside_published
from nmtbench.evaluation.quality_vs_compute import (
    FLIP_DEFINITION,
    Curve,
    flops_curve,
    ranking_flip,
    swaps,
    write_flops_curves,
)
from nmtbench.evaluation.rendering import markdown
from nmtbench.evaluation.scoring import PUBLISHED, SCORES, bleu, score
from nmtbench.evaluation.significance import SIGNIFICANCE_LEVEL, holm, paired_bootstrap
from nmtbench.evaluation.verdict import by_length, findings, verdict
from nmtbench.files import read_json, write_json, write_text
from nmtbench.provenance import stamp
from nmtbench.run_paths import RESULTS, RunPaths, tuned_file
from nmtbench.tables import spread

TRAIN_KEYS = ("params", "train_seconds", "train_tokens_per_s", "best_val_loss", "steps", "target_tokens")
# Absent from runs trained before validation BLEU existed, null when it was switched off, and the training to the
# best checkpoint absent from runs trained before train.json recorded it: a dash in the tables.
OPTIONAL_TRAIN_KEYS = ("best_val_bleu", "epochs", "train_flops", "best_epoch", "best_step", "best_train_flops")
EVAL_KEYS = (*SCORES, *(f"{key}_signature" for key in SCORES), "sentences_per_s", "hypotheses_sha256")
BUDGET_FRACTIONS = (0.25, 0.5, 1.0)  # where the ranking across compute is read off the learning curves


def compare(model_names: list[str], seeds: list[int], cfg: CompareConfig, test_sets,
            root: Path = Path("."), blocks: dict[str, dict] | None = None, budget: BudgetConfig | None = None,
            lang: str | None = None, tokenized: bool = False) -> dict:
    """Write results/comparison.json, results/comparison.md and results/bleu.json (the DVC metrics) under root;
    return the json.

    test_sets maps every test split to its untouched "src" and "tgt" sentences (as data/tokenized does);
    the runs' metrics and translations are read where RunPaths puts them under root. blocks (each model's
    params block) names the families and attention of the verdict's contrasts; without them, no verdict.
    budget (train.budget) scales the ranking across compute; without a FLOP budget the largest run sets it.
    lang (the target language) scores outside systems by the published convention too (PUBLISHED), which the
    table shows when every run has it; tokenized (data.tokenized) says the references are the papers' tokens
    (scoring.score).
    """
    started = time.perf_counter()
    if not model_names:
        raise ValueError("compare: no models given; params.yaml must define at least one models.<name> block")
    grid = load_runs(model_names, seeds, Path(root))
    baseline = cfg.baseline or model_names[0]
    models = training_rows(grid, cfg.external)
    keys = score_keys(grid, cfg, lang)
    by_split = {split: score_split(grid, split, test_sets[split], cfg, baseline, keys, lang, tokenized)
                for split in grid.splits}
    for split, found in by_split.items():
        for name, row in found.rows.items():
            models[name][split] = row
    comparison = {"baseline": baseline, "seeds": seeds, "splits": grid.splits, "rerun_margin": cfg.rerun_margin,
                  "test_sets": {split: test_set_record(test_sets[split]["tgt"]) for split in grid.splits},
                  "length_buckets": bucket_labels(cfg.length_buckets), "tokenized": tokenized,
                  "signatures": signatures(by_split, keys), "models": models,
                  "examples": {split: found.examples for split, found in by_split.items()},
                  "tuning": tuning_summary(model_names, root), **compute_analysis(grid, budget, blocks)}
    if blocks is not None:
        translations = {split: found.translations for split, found in by_split.items()}
        references = {split: list(test_sets[split]["tgt"]) for split in grid.splits}
        comparison["verdict"] = verdict(models, blocks, seeds, baseline, translations, references, cfg)
        comparison["findings"] = findings(blocks, comparison["verdict"], seeds, translations, references, cfg)
        buckets = {split: [bucket_of(len(source.split()), cfg.length_buckets) for source in test_sets[split]["src"]]
                   for split in grid.splits}
        comparison["by_length"] = by_length(comparison["verdict"], seeds, translations, references, buckets,
                                            comparison["length_buckets"], cfg)
    if cfg.published:
        comparison["published"] = beside_published(models, cfg.published)
    comparison["provenance"] = {"compare": stamp(started), **grid.stamps}
    write_outputs(comparison, grid)
    return comparison


def test_set_record(references) -> dict:
    """What names a test set beyond its split's name, which smoke sizes and another corpus share: its sentence count
    and the sha256 of its references, a line each (nmtbench beside sets only equal ones side by side)."""
    text = "".join(f"{line}\n" for line in references)
    return {"sentences": len(references), "references_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


@dataclass(frozen=True)
class Grid:
    """The runs of the models x seeds grid as compare reads them, each (model, seed)'s metrics checked."""
    names: list[str]
    seeds: list[int]
    root: Path
    paths: dict[tuple[str, int], RunPaths]
    train: dict[tuple[str, int], dict]  # train.json, its provenance taken out
    evals: dict[tuple[str, int], dict]  # eval.json: split -> scores, its provenance taken out
    curves: dict[tuple[str, int], Curve]
    stamps: dict[str, dict[str, dict | None]]  # stage -> run folder -> what produced it
    splits: list[str]  # the test splits every run was scored on


def load_runs(model_names: list[str], seeds: list[int], root: Path) -> Grid:
    """Every run's metrics, learning curve and provenance, refused in one line naming the stage to rerun when a
    file is missing, incomplete or scores other test splits than the rest."""
    runs = {(name, seed): RunPaths(name, seed, root) for name in model_names for seed in seeds}
    train = {run: _load(paths.train_metrics, *run, "train", TRAIN_KEYS) for run, paths in runs.items()}
    evals = {run: _load(paths.eval_metrics, *run, "evaluate") for run, paths in runs.items()}
    curves = {run: flops_curve(paths.learning_curve) for run, paths in runs.items()}
    # what produced each run, taken out before _common_splits reads the splits off eval.json's keys; None for a run
    # written before provenance was recorded
    stamps = {stage: {paths.name.as_posix(): found[run].pop("provenance", None) for run, paths in runs.items()}
              for stage, found in (("train", train), ("evaluate", evals))}
    return Grid(model_names, seeds, root, runs, train, evals, curves, stamps, _common_splits(evals, runs))


def training_rows(grid: Grid, external: dict) -> dict[str, dict]:
    """Each model's size and training figures over seeds, then each outside system's row, which has none."""
    models = {name: {"params": grid.train[name, grid.seeds[0]]["params"], "external": False,
                     **{key: spread([grid.train[name, seed].get(key) for seed in grid.seeds], grid.seeds)
                        for key in (*TRAIN_KEYS[1:], *OPTIONAL_TRAIN_KEYS)},
                     # why each seed's run ended (train.json's stopped_by; None from before it was recorded)
                     "stopped_by": {str(seed): grid.train[name, seed].get("stopped_by") for seed in grid.seeds}}
              for name in grid.names}
    # an outside system is one run, the same against every seed's baseline: no size, cost or training to show
    models.update({name: {"params": None, "external": True,
                          **dict.fromkeys((*TRAIN_KEYS[1:], *OPTIONAL_TRAIN_KEYS, "stopped_by"))}
                   for name in external})
    return models


def score_keys(grid: Grid, cfg: CompareConfig, lang: str | None) -> tuple[str, ...]:
    """The scores each row shows: the published convention's BLEU too where every run has it and the outside
    systems, if any, can be scored by it (lang given)."""
    published = (all(PUBLISHED in grid.evals[run][split] for run in grid.paths for split in grid.splits)
                 and (lang is not None or not cfg.external))
    return (*SCORES, *((PUBLISHED,) if published else ()), "sentences_per_s")


class SplitScores(NamedTuple):
    """What compare keeps of one test split."""
    rows: dict[str, dict]  # model or outside system -> its scores over seeds, bootstrap and BLEU by length
    examples: list[dict]
    translations: dict[tuple[str, int], list[str]]  # each run's, which the verdict resamples
    scored: list[dict]  # the scores of every run, outside systems' included, whose signatures the comparison lists
    bootstrap_signatures: set[str]


def score_split(grid: Grid, split: str, test_set, cfg: CompareConfig, baseline: str, keys: tuple[str, ...],
                lang: str | None, tokenized: bool) -> SplitScores:
    """Every model's and outside system's scores on one test split: mean and sd over seeds, the paired bootstrap
    against the baseline, BLEU by source-length bucket; and the example sentences side by side."""
    sources, references = list(test_set["src"]), list(test_set["tgt"])
    outputs = {run: _translations(paths.translation(split), *run, split, grid.evals[run][split], len(references))
               for run, paths in grid.paths.items()}
    external = {name: external_translations(grid.root / files[split], name, split, references)
                for name, files in cfg.external.items()}
    examples = _examples(cfg.examples, split, sources, references,
                         {**{name: outputs[name, grid.seeds[0]] for name in grid.names}, **external})
    tests, bootstrap_signatures = {}, set()
    for seed in grid.seeds:  # runs of one seed against the baseline's run of that seed
        tests[seed], signature = paired_bootstrap({**{name: outputs[name, seed] for name in grid.names},
                                                   **external}, references,
                                                  baseline, cfg.bootstrap_resamples, cfg.bootstrap_seed)
        bootstrap_signatures.add(signature)
    lengths = [bucket_of(len(source.split()), cfg.length_buckets) for source in sources]
    buckets = bucket_labels(cfg.length_buckets)
    runs_of = {**{name: ([outputs[name, seed] for seed in grid.seeds], grid.seeds) for name in grid.names},
               **{name: ([hypotheses], ["external"]) for name, hypotheses in external.items()}}
    rows, scored = {}, []
    for name, (hypotheses, labels) in runs_of.items():
        per_run = ([grid.evals[name, seed][split] for seed in grid.seeds] if name in grid.names else
                   [{**score(hypotheses[0], references, lang, tokenized), "sentences_per_s": None}])
        scored += per_run
        rows[name] = {
            **{key: spread([scores[key] for scores in per_run], labels) for key in keys},
            "bootstrap": _significance({seed: tests[seed][name] for seed in grid.seeds},
                                       {seed: tests[seed][baseline]["bleu"] for seed in grid.seeds}),
            "length_buckets": {label: _bucket_bleu(hypotheses, references,
                                                   [i for i, b in enumerate(lengths) if b == bucket], labels)
                               for bucket, label in enumerate(buckets)},
        }
    tested = {name: row["bootstrap"] for name, row in rows.items() if row["bootstrap"]["p_value"] is not None}
    for name, p_holm in holm({name: test["p_value"] for name, test in tested.items()}).items():
        tested[name].update(p_holm=p_holm, significant_holm=tested[name]["significant"] and p_holm < SIGNIFICANCE_LEVEL)
    return SplitScores(rows, examples, outputs, scored, bootstrap_signatures)


def signatures(by_split: dict[str, SplitScores], keys: tuple[str, ...]) -> dict[str, list[str]]:
    """Every distinct signature of each score (keys but the speed) over all runs and splits, and of the bootstrap."""
    scored = [scores for found in by_split.values() for scores in found.scored]
    return {**{key: sorted({scores[f"{key}_signature"] for scores in scored}) for key in keys[:-1]},
            "paired_bootstrap": sorted(set().union(*(found.bootstrap_signatures for found in by_split.values())))}


def compute_analysis(grid: Grid, budget: BudgetConfig | None, blocks: dict[str, dict] | None) -> dict:
    """Quality against compute, off the learning curves: the ranking at fractions of the budget, and where models
    and families swap places."""
    return {"across_compute": across_compute(grid.curves, grid.seeds, budget),
            "swaps": quality_against_compute(grid.curves, blocks)}


def write_outputs(comparison: dict, grid: Grid) -> None:
    """Every run's FLOPs curve in one csv, comparison.json and .md, and the DVC metrics, under the grid's root."""
    write_flops_curves({f"{name}/seed{seed}": curve for (name, seed), curve in grid.curves.items()},
                       grid.root / RESULTS / "flops_curves.csv")
    write_json(grid.root / RESULTS / "comparison.json", comparison)
    write_text(grid.root / RESULTS / "comparison.md", markdown(comparison))
    write_json(grid.root / BLEU_METRICS, bleu_metrics(comparison))


def external_translations(path: Path, name: str, split: str, references: list[str]) -> list[str]:
    """An outside system's translation of split: UTF-8 text, one line per reference, no line empty where the
    reference has text (a lost line would shift every later one and score nonsense)."""
    where = f"compare.external.{name}.{split}"
    if not path.is_file():
        raise FileNotFoundError(f"{where}: {path} not found; put the system's translation there, one line per "
                                "test sentence")
    try:
        text = path.read_bytes().decode("utf-8-sig")  # a byte-order mark is no part of the first translation
    except UnicodeDecodeError as error:
        raise ValueError(f"{where}: {path} is not UTF-8 text (byte {error.start}); convert it, e.g. "
                         f"iconv -f LATIN1 -t UTF-8") from None
    lines = text.removesuffix("\n").split("\n")
    if len(lines) != len(references):
        raise ValueError(f"{where}: {path} has {len(lines)} lines for the {len(references)} sentences of {split}; "
                         "give one translation per line, in the test set's order")
    empty = next((i for i, (line, ref) in enumerate(zip(lines, references)) if not line.strip() and ref.strip()), None)
    if empty is not None:
        raise ValueError(f"{where}: {path} line {empty + 1} is empty where the reference has text; a line lost or "
                         "split in two shifts every later one: check the file against the test set")
    return [line.removesuffix("\r") for line in lines]


def tuning_summary(model_names: list[str], root: Path) -> dict | None:
    """Each model's tuned/<model>.yaml, and the ranking of models and of families (each by its best model) on
    val BLEU at the trial budget, untuned (trial 0) and tuned; None when no model was tuned."""
    found = {name: yaml.safe_load(path.read_text()) for name in model_names
             if (path := tuned_file(name, Path(root))).is_file()}
    tuned = {name: row for name, row in found.items() if row.get("trials")}
    if not tuned:
        return None
    rows = {name: {key: row.get(key) for key in ("family", "trials", "default_val_bleu", "tuned_val_bleu", "params")}
            for name, row in tuned.items()}
    rankings = {}
    for key in ("default", "tuned"):
        scores = {name: row[f"{key}_val_bleu"] for name, row in rows.items() if row[f"{key}_val_bleu"] is not None}
        families = {}
        for name, value in scores.items():
            families[rows[name]["family"]] = max(value, families.get(rows[name]["family"], value))
        rankings[key] = {"models": sorted(scores, key=lambda name: -scores[name]),
                         "families": sorted(families, key=lambda family: -families[family])}
    return {"models": rows, "ranking": {
        **rankings, "models_changed": rankings["default"]["models"] != rankings["tuned"]["models"],
        "families_changed": rankings["default"]["families"] != rankings["tuned"]["families"]}}


def across_compute(curves: dict[tuple[str, int], Curve], seeds: list[int], budget: BudgetConfig | None) -> dict | None:
    """Each model's best validation BLEU within 1/4, 1/2 and all of the training FLOPs: the ranking at smaller budgets.

    Read off the learning curves, so no extra run is needed: no schedule depends on train.budget (docs/training.md),
    so the first quarter of a run is what a run of a quarter of the budget trains, up to where that one stops. The
    budget is train.budget's FLOPs, or without a FLOP budget the most any run spent. None when a run's curve has no
    FLOPs or no validation BLEU (trained before the curves recorded them, or with train.val_bleu_sentences 0).
    """
    if not all(curves.values()):
        return None
    flops_budget = budget is not None and budget.kind == "flops"
    total = budget.value if flops_budget else max(rows[-1][0] for rows in curves.values())
    models = {}
    for name in dict.fromkeys(name for name, _ in curves):
        models[name] = {}
        for fraction in BUDGET_FRACTIONS:  # the whole run at 1: a FLOP budget stops on the step that crosses it
            within = [[bleu for flops, bleu in curves[name, seed] if fraction == 1 or flops <= fraction * total]
                      for seed in seeds]
            models[name][str(fraction)] = spread([max(found) if found else None for found in within], seeds)
    return {"flops": total, "budget": "train.budget" if flops_budget else "the largest run", "models": models}


def quality_against_compute(curves: dict[tuple[str, int], Curve], blocks: dict[str, dict] | None) -> dict | None:
    """Where models, and where the top two families, swap places for good as training FLOPs grow (compute.swap):
    a model's curve is every validation of its runs, a family's every validation of its models'. None when no run's
    curve has FLOPs and BLEU."""
    by_model: dict[str, Curve] = {}
    for (name, _), curve in curves.items():
        by_model.setdefault(name, []).extend(curve)
    if not any(by_model.values()):
        return None
    by_family: dict[str, Curve] = {}
    for name, curve in by_model.items():
        if blocks is not None:
            by_family.setdefault(str(blocks[name].get("family")), []).extend(curve)
    return {"families": ranking_flip(by_family) if by_family else None, "models": swaps(by_model),
            "definition": FLIP_DEFINITION}


def bucket_labels(bounds: list[int]) -> list[str]:
    """[8, 12] -> ["1-8", "9-12", "13+"]: source lengths in words, each bound the last length of its bucket."""
    lows = [1, *(bound + 1 for bound in bounds)]
    return [f"{low}-{high}" for low, high in zip(lows, bounds)] + [f"{lows[-1]}+"]


def bucket_of(length: int, bounds: list[int]) -> int:
    return bisect.bisect_left(bounds, length)


def _significance(per_seed: dict[int, dict], baseline_bleu: dict[int, float]) -> dict:
    """One verdict over seeds: the bootstrap interval averaged, the largest p-value (None for the baseline).

    A seed whose BLEU equals the baseline's is never a significant difference, whatever its p-value: sacreBLEU
    counts only resampled differences strictly above the observed one, so two systems at BLEU 0.0 on every
    resample get p = 1 / (resamples + 1).
    """
    p_values = [result["p_value"] for result in per_seed.values()]
    worst = None if None in p_values else max(p_values)
    differs = all(result["bleu"] != baseline_bleu[seed] for seed, result in per_seed.items())
    return {"mean": round(statistics.mean(r["mean"] for r in per_seed.values()), 2),
            "ci": round(statistics.mean(r["ci"] for r in per_seed.values()), 2),
            "p_value": worst, "significant": None if worst is None else differs and worst < SIGNIFICANCE_LEVEL,
            "per_seed": {str(seed): result for seed, result in per_seed.items()}}


def _bucket_bleu(outputs: list[list[str]], references: list[str], rows: list[int], seeds: list[int]) -> dict:
    """BLEU of one model on the sentences `rows` of a test set, per seed (None where the bucket is empty)."""
    if not rows:
        return {"sentences": 0, "bleu": None}
    scores = [bleu([hyps[i] for i in rows], [references[i] for i in rows]) for hyps in outputs]
    return {"sentences": len(rows), "bleu": spread(scores, seeds)}


def _examples(indices: list[int], split: str, sources: list[str], references: list[str],
              outputs: dict[str, list[str]]) -> list[dict]:
    for index in indices:
        if index >= len(references):
            raise ConfigError(f"compare.examples: sentence {index} is past the {len(references)} sentences of {split}; "
                              f"choose indices below {len(references)}")
    return [{"index": i, "source": sources[i], "reference": references[i],
             "outputs": {name: hyps[i] for name, hyps in outputs.items()}} for i in indices]


def _load(path: Path, name: str, seed: int, stage: str, keys: tuple[str, ...] = ()) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; run `dvc repro {stage}@{name}-{seed}` first")
    data = read_json(path, f"delete it and run `dvc repro {stage}@{name}-{seed}`")
    missing = [key for key in keys if key not in data]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}; re-run `dvc repro {stage}@{name}-{seed}`")
    return data


def _translations(path: Path, name: str, seed: int, split: str, scores: dict, sentences: int) -> list[str]:
    """The run's translation of split, refused unless it is the one its metrics scored."""
    stage = f"evaluate@{name}-{seed}"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; run `dvc repro {stage}` first")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != scores["hypotheses_sha256"]:
        raise ValueError(f"{path} is not the translation its metrics scored; re-run `dvc repro {stage}`")
    lines = data.decode("utf-8").split("\n")[:-1]  # every line, the last included, ends in a newline
    if len(lines) != sentences:
        raise ValueError(f"{path} has {len(lines)} lines for the {sentences} sentences of {split}; "
                         f"re-run `dvc repro {stage}`")
    return lines


def _common_splits(evals: dict[tuple[str, int], dict], runs: dict[tuple[str, int], RunPaths]) -> list[str]:
    """The test splits every run was scored on; differing sets mean a stale evaluation."""
    first, *others = evals
    splits = list(evals[first])
    for run in others:
        if list(evals[run]) != splits:
            raise ValueError(f"{runs[run].eval_metrics} scores "
                             f"{', '.join(evals[run]) or 'no splits'} "
                             f"but {runs[first].eval_metrics} scores {', '.join(splits)}; "
                             f"re-run `dvc repro evaluate@{run[0]}-{run[1]}`")
    for run, scores in evals.items():
        for split in splits:
            missing = [key for key in EVAL_KEYS if key not in scores[split]]
            if missing:
                raise ValueError(f"{runs[run].eval_metrics}: {split} lacks {', '.join(missing)}; "
                                 f"re-run `dvc repro evaluate@{run[0]}-{run[1]}`")
    return splits
