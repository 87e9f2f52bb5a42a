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
import csv
import hashlib
import json
import statistics
import time
from pathlib import Path

import yaml

from nmtbench.config import BudgetConfig, CompareConfig, ConfigError
from nmtbench.evaluation.headline import BLEU_METRICS, bleu_metrics
from nmtbench.evaluation.published import beside_published, published_table
from nmtbench.evaluation.scoring import PUBLISHED, SCORES, bleu, score
from nmtbench.evaluation.significance import paired_bootstrap
from nmtbench.evaluation.tables import Table, visible
from nmtbench.evaluation.verdict import findings, verdict
from nmtbench.files import write_json, write_text
from nmtbench.provenance import code_text, stamp
from nmtbench.runs import RESULTS, RunPaths, tuned_file

TRAIN_KEYS = ("params", "train_seconds", "train_tokens_per_s", "best_val_loss", "steps", "target_tokens")
# Absent from runs trained before validation BLEU existed, null when it was switched off: a dash in the table.
OPTIONAL_TRAIN_KEYS = ("best_val_bleu",)
EVAL_KEYS = (*SCORES, *(f"{key}_signature" for key in SCORES), "sentences_per_s", "hypotheses_sha256")
SIGNIFICANCE_LEVEL = 0.05  # a p-value below this marks a difference to the baseline (95% confidence)
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
    table shows when every run has it; tokenized says the references are the papers' tokens (scoring.score).
    """
    started = time.perf_counter()
    if not model_names:
        raise ValueError("compare: no models given; params.yaml must define at least one models.<name> block")
    baseline = cfg.baseline or model_names[0]
    runs = {(name, seed): RunPaths(name, seed, Path(root)) for name in model_names for seed in seeds}
    train = {run: _load(paths.train_metrics, *run, "train", TRAIN_KEYS) for run, paths in runs.items()}
    evals = {run: _load(paths.eval_metrics, *run, "evaluate") for run, paths in runs.items()}
    # what produced each run; None for a run written before provenance was recorded
    stamps = {stage: {paths.name.as_posix(): found[run].pop("provenance", None) for run, paths in runs.items()}
              for stage, found in (("train", train), ("evaluate", evals))}
    splits = _common_splits(evals, runs)
    buckets = bucket_labels(cfg.length_buckets)

    models = {name: {"params": train[name, seeds[0]]["params"], "external": False,
                     **{key: _spread([train[name, seed].get(key) for seed in seeds], seeds)
                        for key in (*TRAIN_KEYS[1:], *OPTIONAL_TRAIN_KEYS)}}
              for name in model_names}
    # an outside system is one run, the same against every seed's baseline: no size, cost or training to show
    models.update({name: {"params": None, "external": True, **dict.fromkeys((*TRAIN_KEYS[1:], *OPTIONAL_TRAIN_KEYS))}
                   for name in cfg.external})
    examples, bootstrap_signatures, translations, scored = {}, set(), {}, []
    published = (all(PUBLISHED in evals[run][split] for run in runs for split in splits)
                 and (lang is not None or not cfg.external))
    keys = (*SCORES, *((PUBLISHED,) if published else ()), "sentences_per_s")
    for split in splits:
        sources, references = list(test_sets[split]["src"]), list(test_sets[split]["tgt"])
        outputs = {run: _translations(paths.translation(split), *run, split, evals[run][split], len(references))
                   for run, paths in runs.items()}
        external = {name: external_translations(Path(root) / files[split], name, split, references)
                    for name, files in cfg.external.items()}
        examples[split] = _examples(cfg.examples, split, sources, references,
                                    {**{name: outputs[name, seeds[0]] for name in model_names}, **external})
        translations[split] = outputs
        tests = {}
        for seed in seeds:  # runs of one seed against the baseline's run of that seed
            tests[seed], signature = paired_bootstrap({**{name: outputs[name, seed] for name in model_names},
                                                       **external}, references,
                                                      baseline, cfg.bootstrap_resamples, cfg.bootstrap_seed)
            bootstrap_signatures.add(signature)
        lengths = [bucket_of(len(source.split()), cfg.length_buckets) for source in sources]
        runs_of = {**{name: ([outputs[name, seed] for seed in seeds], seeds) for name in model_names},
                   **{name: ([hypotheses], ["external"]) for name, hypotheses in external.items()}}
        for name, (hypotheses, labels) in runs_of.items():
            per_run = ([evals[name, seed][split] for seed in seeds] if name in model_names else
                     [{**score(hypotheses[0], references, lang, tokenized), "sentences_per_s": None}])
            scored += per_run
            models[name][split] = {
                **{key: _spread([scores[key] for scores in per_run], labels) for key in keys},
                "bootstrap": _significance({seed: tests[seed][name] for seed in seeds},
                                           {seed: tests[seed][baseline]["bleu"] for seed in seeds}),
                "length_buckets": {label: _bucket_bleu(hypotheses, references,
                                                       [i for i, b in enumerate(lengths) if b == bucket], labels)
                                   for bucket, label in enumerate(buckets)},
            }

    signatures = {key: sorted({scores[f"{key}_signature"] for scores in scored}) for key in keys[:-1]}
    comparison = {"baseline": baseline, "seeds": seeds, "splits": splits, "length_buckets": buckets,
                  "signatures": {**signatures, "paired_bootstrap": sorted(bootstrap_signatures)},
                  "models": models, "examples": examples, "tuning": tuning_summary(model_names, root),
                  "across_compute": across_compute(runs, seeds, budget)}
    if blocks is not None:
        references = {split: list(test_sets[split]["tgt"]) for split in splits}
        comparison["verdict"] = verdict(models, blocks, seeds, baseline, translations, references, cfg)
        comparison["findings"] = findings(blocks, comparison["verdict"], seeds, translations, references, cfg)
    if cfg.published:
        comparison["published"] = beside_published(models, cfg.published)
    comparison["provenance"] = {"compare": stamp(started), **stamps}
    write_flops_curves(runs, Path(root) / RESULTS / "flops_curves.csv")
    write_json(Path(root) / RESULTS / "comparison.json", comparison)
    write_text(Path(root) / RESULTS / "comparison.md", markdown(comparison))
    write_json(Path(root) / BLEU_METRICS, bleu_metrics(comparison))
    return comparison


def external_translations(path: Path, name: str, split: str, references: list[str]) -> list[str]:
    """An outside system's translation of split: UTF-8 text, one line per reference, no line empty where the
    reference has text (a lost line would shift every later one and score nonsense)."""
    where = f"compare.external.{name}.{split}"
    if not path.is_file():
        raise FileNotFoundError(f"{where}: {path} not found; put the system's translation there, one line per "
                                "test sentence")
    try:
        text = path.read_bytes().decode("utf-8")
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


def across_compute(runs: dict[tuple[str, int], RunPaths], seeds: list[int], budget: BudgetConfig | None) -> dict | None:
    """Each model's best validation BLEU within 1/4, 1/2 and all of the training FLOPs: the ranking at smaller budgets.

    Read off the learning curves, so no extra run is needed: no schedule depends on train.budget (docs/training.md),
    so the first quarter of a run is what a run of a quarter of the budget trains, up to where that one stops. The
    budget is train.budget's FLOPs, or without a FLOP budget the most any run spent. None when a run's curve has no
    FLOPs or no validation BLEU (trained before the curves recorded them, or with train.val_bleu_sentences 0).
    """
    curves = {run: _flops_curve(paths.learning_curve) for run, paths in runs.items()}
    if not all(curves.values()):
        return None
    flops_budget = budget is not None and budget.kind == "flops"
    total = budget.value if flops_budget else max(rows[-1][0] for rows in curves.values())
    models = {}
    for name in dict.fromkeys(name for name, _ in runs):
        models[name] = {}
        for fraction in BUDGET_FRACTIONS:  # the whole run at 1: a FLOP budget stops on the step that crosses it
            within = [[bleu for flops, bleu in curves[name, seed] if fraction == 1 or flops <= fraction * total]
                      for seed in seeds]
            models[name][str(fraction)] = _spread([max(found) if found else None for found in within], seeds)
    return {"flops": total, "budget": "train.budget" if flops_budget else "the largest run", "models": models}


def write_flops_curves(runs: dict[tuple[str, int], RunPaths], path: Path) -> None:
    """Every run's (training FLOPs, val BLEU) in one long CSV, a row per validation and the run in a column: the
    one file DVC's top-level plot (dvc.yaml) draws as a line per run, whatever the models and seeds."""
    lines = ["run,train_flops,val_bleu", *(f"{name}/seed{seed},{flops:g},{bleu:g}"
                                           for (name, seed), paths in runs.items()
                                           for flops, bleu in _flops_curve(paths.learning_curve))]
    write_text(path, "\n".join(lines) + "\n")


def _flops_curve(path: Path) -> list[tuple[float, float]]:
    """(training FLOPs, val BLEU) at each validation of a learning_curve.csv that has both; [] otherwise."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if "train_flops" not in (reader.fieldnames or ()):
            return []
        return [(float(row["train_flops"]), float(row["val_bleu"])) for row in reader if row["val_bleu"]]


def bucket_labels(bounds: list[int]) -> list[str]:
    """[8, 12] -> ["1-8", "9-12", "13+"]: source lengths in words, each bound the last length of its bucket."""
    lows = [1, *(bound + 1 for bound in bounds)]
    return [f"{low}-{high}" for low, high in zip(lows, bounds)] + [f"{lows[-1]}+"]


def bucket_of(length: int, bounds: list[int]) -> int:
    return bisect.bisect_left(bounds, length)


def _spread(values: list[float | None], seeds: list[int]) -> dict | None:
    """Mean and sample standard deviation over seeds (None for one seed), and every seed's value.

    None when a run has no value (an optional train key: see OPTIONAL_TRAIN_KEYS).
    """
    if None in values:
        return None
    return {"mean": round(statistics.mean(values), 4),
            "sd": round(statistics.stdev(values), 4) if len(values) > 1 else None,
            "per_seed": {str(seed): value for seed, value in zip(seeds, values)}}


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
    return {"sentences": len(rows), "bleu": _spread(scores, seeds)}


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
    data = json.loads(path.read_text())
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


def markdown(comparison: dict) -> str:
    """The comparison as Markdown: the main table, BLEU by source length, example translations, signatures."""
    splits, seeds = comparison["splits"], comparison["seeds"]
    seeds_line, *notes = comparison_notes(comparison)
    lines = [main_table(comparison).markdown(), "", seeds_line, "", *(f"- {note}" for note in notes)]
    for split in splits:
        lines += ["", f"## BLEU by source length in words: {split}", "", length_table(comparison, split).markdown()]

    for split, examples in comparison["examples"].items():
        lines += ["", f"## Example translations: {split}" + (f" (seed {seeds[0]})" if len(seeds) > 1 else "")]
        for example in examples:
            lines += ["", f"Sentence {example['index']}:", "", f"- source: {visible(example['source'])}",
                      f"- reference: {visible(example['reference'])}"]
            lines += [f"- {name}: {visible(text)}" for name, text in example["outputs"].items()]

    lines += ["", "## sacreBLEU signatures", "", *(f"- {signature}" for signature in signatures(comparison))]
    if comparison.get("tuning"):
        lines += ["", "## Tuning on validation", "", tuning_table(comparison).markdown(), "",
                  *(f"- {note}" for note in tuning_notes(comparison))]
    if comparison.get("published"):
        lines += ["", "## Beside the published figures", "", published_table(comparison["published"], _cell).markdown(),
                  "", "- Published: lowercased BLEU on Moses tokens as each paper reports it (quoted, not recomputed); "
                  "ours: BLEU lc tok of the same test set (docs/evaluation.md)."]
    if comparison.get("verdict") is not None:
        lines += ["", "## Verdict", "", *(f"- {line}" for line in verdict_lines(comparison))]
    if comparison.get("across_compute"):
        lines += ["", "## Validation BLEU across compute", "", compute_table(comparison).markdown(), "",
                  f"- {compute_note(comparison)}"]
    lines += ["", "## Produced by", "", *(f"- {line}" for line in provenance_lines(comparison))]
    return "\n".join(lines) + "\n"


# The tables and notes below are shared by comparison.md and the report page (nmtbench.evaluation.report).

def headline_table(comparison: dict) -> Table:
    """Per model: size, training time, BLEU cased (with its 95% interval) and lowercased on every test set, and
    decoding speed on the first."""
    splits = comparison["splits"]
    rows = [[_model(name, comparison), _number(row["params"]), _mean_duration(row["train_seconds"]),
             *(cell for split in splits for cell in (*_bleu_cells(row[split]), _cell(row[split]["bleu_lc"]))),
             _cell(row[splits[0]]["sentences_per_s"], 1)]
            for name, row in comparison["models"].items()]
    header = ["Model", "Parameters", "Training time", *(column for split in splits
                                                        for column in (f"{split} BLEU", "95% CI", "BLEU lc")),
              "Decoding sentences/s"]
    return Table(header, rows, "l" + "r" * (len(header) - 1))


def main_table(comparison: dict) -> Table:
    """Per model: cost, validation figures and every score on every test set."""
    splits = comparison["splits"]
    header = ["Model", "Parameters", "Training time", "Train tokens/s", "Best val loss", "Best val BLEU"]
    published = PUBLISHED in comparison["signatures"]
    columns = ("BLEU", "95% CI", "BLEU lc", *(("BLEU lc tok",) if published else ()), "chrF", "TER")
    header += [f"{split} {column}" for split in splits for column in columns]
    rows = []
    for name, row in comparison["models"].items():
        cells = [_model(name, comparison), _number(row["params"]), _mean_duration(row["train_seconds"]),
                 _number(row["train_tokens_per_s"] and round(row["train_tokens_per_s"]["mean"])),
                 _cell(row["best_val_loss"], 3), _cell(row["best_val_bleu"])]
        for split in splits:
            cells += [*_bleu_cells(row[split]), _cell(row[split]["bleu_lc"]),
                      *((_cell(row[split][PUBLISHED]),) if published else ()), _cell(row[split]["chrf"]),
                      _cell(row[split]["ter"])]
        rows.append(cells)
    return Table(header, rows, "l" + "r" * (len(header) - 1))


def comparison_notes(comparison: dict) -> list[str]:
    """How to read the main table: the seeds it averages, then what each column means (Markdown inline code)."""
    seeds, baseline = comparison["seeds"], comparison["baseline"]
    several = len(seeds) > 1
    bootstrap = "`, `".join(comparison["signatures"]["paired_bootstrap"])
    return [f"Mean ± sd over {len(seeds)} seeds ({', '.join(map(str, seeds))})." if several else
            f"One seed ({seeds[0]}).",
            "BLEU: cased sacreBLEU (13a), the headline; BLEU lc: lowercased; "
            + ("BLEU lc tok: lowercased on Moses-tokenized text, as most Multi30k papers report BLEU "
               "(docs/evaluation.md); " if PUBLISHED in comparison["signatures"] else "")
            + "chrF; TER: lower is better.",
            "95% CI: the interval of BLEU over bootstrap resamples of the test set (sacreBLEU's paired bootstrap"
            + (", averaged over seeds" if several else "") + f": `{bootstrap}`).",
            f"*: BLEU differs from the baseline's ({baseline}) with p < {SIGNIFICANCE_LEVEL}"
            + (" in every seed" if several else "") + ".",
            *(["(external): an outside system's translations (compare.external), scored and tested the same way; "
               "it has no size, cost or training of ours to show."]
              if any(row.get("external") for row in comparison["models"].values()) else []),
            *(["The papers' setting (data.preprocess moses_lowercase): every score is of lowercased Moses tokens as "
               "the models write them, so BLEU and BLEU lc coincide and BLEU lc tok is multi-bleu.perl's figure "
               "(signatures `moses-lc-text:`)."]
              if comparison["signatures"]["bleu"][0].startswith("moses-lc-text:") else [])]


def length_table(comparison: dict, split: str) -> Table:
    """BLEU per source-length bucket of split, per model; a header names its bucket's sentence count."""
    buckets, models = comparison["length_buckets"], comparison["models"]
    sizes = {label: models[comparison["baseline"]][split]["length_buckets"][label]["sentences"] for label in buckets}
    rows = [[name, *(_cell(row[split]["length_buckets"][label]["bleu"]) for label in buckets)]
            for name, row in models.items()]
    return Table(["Model", *(f"{label} ({sizes[label]})" for label in buckets)], rows, "l" + "r" * len(buckets))


def signatures(comparison: dict) -> list[str]:
    """Every sacreBLEU signature behind the scores, as "label: `signature`"."""
    return [f"{label}: `{signature}`"
            for key, label in (("bleu", "BLEU"), ("bleu_lc", "BLEU lc"), (PUBLISHED, "BLEU lc tok"), ("chrf", "chrF"),
                               ("ter", "TER"))
            for signature in comparison["signatures"].get(key, [])]


def tuning_table(comparison: dict) -> Table:
    """Per tuned model: trials spent, val BLEU at the trial budget untuned and tuned, and the winning values."""
    rows = [[name, row["family"], str(row["trials"]), _value(row["default_val_bleu"]), _value(row["tuned_val_bleu"]),
             ", ".join(f"{key} {_value(value)}" for part in row["params"].values() for key, value in part.items())]
            for name, row in comparison["tuning"]["models"].items()]
    return Table(["Model", "Family", "Trials", "Default val BLEU", "Tuned val BLEU", "Winning values"], rows, "llrrrl")


def tuning_notes(comparison: dict) -> list[str]:
    ranking = comparison["tuning"]["ranking"]
    return ["Val BLEU: greedy, at the trial budget; default is trial 0 (params.yaml's values), tuned the best trial.",
            *(f"{what.capitalize()} ranked by val BLEU untuned: {', '.join(ranking['default'][what])}; tuned: "
              f"{', '.join(ranking['tuned'][what])} ({'changed' if ranking[f'{what}_changed'] else 'unchanged'})."
              for what in ("families", "models"))]


def compute_table(comparison: dict) -> Table:
    """Per model: best val BLEU within 1/4, 1/2 and all of the training FLOPs."""
    found = comparison["across_compute"]
    header = ["Model", *(f"{_fraction(f)} ({f * found['flops']:.2g} FLOPs)" for f in BUDGET_FRACTIONS)]
    rows = [[name, *(_cell(row[str(f)]) for f in BUDGET_FRACTIONS)] for name, row in found["models"].items()]
    return Table(header, rows, "l" + "r" * len(BUDGET_FRACTIONS))


def compute_note(comparison: dict) -> str:
    found = comparison["across_compute"]
    return (f"Best greedy val BLEU among the validations within that many training FLOPs ({found['budget']}: "
            f"{found['flops']:.3g}); a dash where a run had not validated yet. Whether the ranking holds at a "
            "smaller budget, without training again: docs/training.md, \"Learning curves\".")


def _fraction(fraction: float) -> str:
    return "all" if fraction == 1 else f"1/{round(1 / fraction)}"


def verdict_lines(comparison: dict) -> list[str]:
    """The contrasts in words, or why there are none; then the published findings the grid's 2 x 2 measures."""
    if not comparison["verdict"]:
        return ["The grid holds none of the contrasts (attention and plain RNNs, Transformers, encoder or decoder "
                "halves)."]
    seeds = len(comparison["seeds"])
    return [f"{row['question']}: {row['text']}." for row in comparison["verdict"]] + [
        f"Differences are means over {seeds} seed{'s' if seeds > 1 else ''} and the test sets "
        f"{', '.join(comparison['splits'])}; the interval resamples both; significant where it excludes 0."] + [
        f"{row['finding']}: **{row['verdict']}**; {row['measurement']}." for row in comparison.get("findings", [])]


def provenance_lines(comparison: dict) -> list[str]:
    """What produced the figures: every distinct commit, version and machine of the stages behind them, each
    stage's wall time (summed over its runs), and how many runs record none."""
    recorded = comparison.get("provenance")
    if not recorded:
        return ["Not recorded: this comparison was written before provenance was; rerun `dvc repro compare`."]
    stages = {"train": list(recorded["train"].values()), "evaluate": list(recorded["evaluate"].values()),
              "compare": [recorded["compare"]]}
    stamped = {stage: [one for one in runs if one] for stage, runs in stages.items()}
    found = [one for runs in stamped.values() for one in runs]  # never empty: compare's own is there
    names = dict.fromkeys(name for one in found for name in one["packages"])
    packages = ", ".join(f"{name} {_distinct(one['packages'].get(name) or '-' for one in found)}" for name in names)
    lines = [f"Code: {_distinct(code_text(one['git']) for one in found)}.",
             f"Software: Python {_distinct(one['python'] for one in found)}, {packages}.",
             f"Machine: {_distinct(_machine(one['device']) for one in found)}.",
             "Wall time: " + ", ".join(f"{stage} {_duration(sum(one['wall_seconds'] for one in runs))}"
                                      + (f" over {len(runs)} runs" if len(runs) > 1 else "")
                                      for stage, runs in stamped.items() if runs) + "."]
    unstamped = sum(len(stages[stage]) - len(stamped[stage]) for stage in stages)
    if unstamped:
        lines.append(f"{unstamped} train and evaluate results record no provenance (written before it was); "
                     "rerun their stages to stamp them.")
    return lines


def _machine(device: dict) -> str:
    memory = f", {device['memory_gib']:g} GiB" if device["memory_gib"] else ""
    return (f"{device['cpu']} ({_count(device['cores'], 'core')}{memory}), {', '.join(device['gpus']) or 'no GPU'}, "
            f"{_count(device['torch_threads'], 'torch thread')}")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _distinct(values) -> str:
    """The values once each, in the order first met: a single value when every stage agrees."""
    return " / ".join(dict.fromkeys(values))


def _value(value) -> str:
    """A tuned value or val BLEU: 4 significant digits (learning rates), a dash where there is none."""
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _model(name: str, comparison: dict) -> str:
    if name == comparison["baseline"]:
        return f"{name} (baseline)"
    return f"{name} (external)" if comparison["models"][name].get("external") else name


def _number(params: int | None) -> str:
    return "-" if params is None else f"{params:,}"


def _bleu_cells(scores: dict) -> list[str]:
    """BLEU, starred when it differs significantly from the baseline's, and its bootstrap 95% interval."""
    test = scores["bootstrap"]
    return [_cell(scores["bleu"]) + ("*" if test["significant"] else ""),
            f"[{test['mean'] - test['ci']:.2f}, {test['mean'] + test['ci']:.2f}]"]


def _cell(spread: dict | None, digits: int = 2) -> str:
    """mean, or mean ± sd when there are several seeds; an empty bucket shows as a dash."""
    if spread is None:
        return "-"
    text = f"{spread['mean']:.{digits}f}"
    return text if spread["sd"] is None else f"{text} ± {spread['sd']:.{digits}f}"


def _mean_duration(seconds: dict | None) -> str:
    """A spread of seconds as h:mm:ss of its mean; a dash for an outside system's training time."""
    return "-" if seconds is None else _duration(seconds["mean"])


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"
