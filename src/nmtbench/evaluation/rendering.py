"""The comparison rendered: results/comparison.md, and the tables and notes the report page shares with it (the beam
sweep's table too, which results/beam_sweep.md and the page share).

Everything here reads the dict compare.compare computes (comparison.json) and formats it; nothing is computed
again, so comparison.md and the page cannot disagree on a figure. Tables are nmtbench.tables.Table, rendered as
Markdown here and as HTML by evaluation/report.py.
"""
from __future__ import annotations

from nmtbench.evaluation.quality_vs_compute import swap_text
from nmtbench.evaluation.scoring import PUBLISHED
from nmtbench.evaluation.significance import SIGNIFICANCE_LEVEL
from nmtbench.provenance import code_text
from nmtbench.tables import Table, dash, spread_cell, visible


def markdown(comparison: dict) -> str:
    """The comparison as Markdown: the main table, BLEU by source length, example translations, signatures."""
    splits, seeds = comparison["splits"], comparison["seeds"]
    seeds_line, *notes = comparison_notes(comparison)
    lines = [main_table(comparison).markdown(), "", seeds_line, "", *(f"- {note}" for note in notes),
             "", "## Training to the best checkpoint", "", training_table(comparison).markdown(), "",
             "- Stopped by: train.json's `stopped_by` (early_stopping: patience spent; budget: its FLOPs or time; "
             "max_epochs: the ceiling, not converged). Best: the validation the best checkpoint holds, by "
             "train.early_stopping_metric. Training FLOPs: train.budget's count (docs/training.md)."]
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
        lines += ["", "## Beside the published figures", "", published_table(comparison["published"]).markdown(),
                  "", "- Published: lowercased BLEU on Moses tokens as each paper reports it (quoted, not recomputed); "
                  "ours: BLEU lc tok of the same test set (docs/evaluation.md)."]
    if comparison.get("verdict") is not None:
        lines += ["", "## Verdict", "", *(f"- {line}" for line in verdict_lines(comparison))]
    if comparison.get("by_length"):
        lines += ["", "## The main contrast by source length", "", by_length_table(comparison).markdown(), "",
                  f"- {by_length_note(comparison)}"]
    if comparison.get("across_compute"):
        lines += ["", "## Validation BLEU across compute", "", compute_table(comparison).markdown(), "",
                  f"- {compute_note(comparison)}"]
    if comparison.get("swaps"):
        lines += ["", "## Where models swap places as compute grows", "", *(f"- {line}" for line in
                                                                             swap_lines(comparison))]
        if comparison["swaps"]["models"]:
            lines += ["", swaps_table(comparison).markdown()]
    lines += ["", "## Produced by", "", *(f"- {line}" for line in provenance_lines(comparison))]
    return "\n".join(lines) + "\n"


def headline_table(comparison: dict) -> Table:
    """Per model: size, training time, BLEU cased (with its 95% interval) and lowercased on every test set, and
    decoding speed on the first."""
    splits = comparison["splits"]
    rows = [[_model(name, comparison), dash(row["params"], ","), _mean_duration(row["train_seconds"]),
             *(cell for split in splits for cell in (*_bleu_cells(row[split]), spread_cell(row[split]["bleu_lc"]))),
             spread_cell(row[splits[0]]["sentences_per_s"], 1)]
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
        cells = [_model(name, comparison), dash(row["params"], ","), _mean_duration(row["train_seconds"]),
                 dash(row["train_tokens_per_s"] and row["train_tokens_per_s"]["mean"], ",.0f"),
                 spread_cell(row["best_val_loss"], 3), spread_cell(row["best_val_bleu"])]
        for split in splits:
            cells += [*_bleu_cells(row[split]), spread_cell(row[split]["bleu_lc"]),
                      *((spread_cell(row[split][PUBLISHED]),) if published else ()), spread_cell(row[split]["chrf"]),
                      spread_cell(row[split]["ter"])]
        rows.append(cells)
    return Table(header, rows, "l" + "r" * (len(header) - 1))


def training_table(comparison: dict) -> Table:
    """Per model: why its runs stopped, how long they trained, and how far in the kept checkpoint was."""
    header = ["Model", "Stopped by", "Epochs", "Updates", "Best at epoch", "Updates to best", "Training FLOPs to best",
              "Training FLOPs in all"]
    # a comparison.json from before these were carried has none of them: dashes
    rows = [[_model(name, comparison),
             _distinct(str(why or "-") for why in (row.get("stopped_by") or {}).values()) or "-",
             spread_cell(row.get("epochs"), 0), spread_cell(row.get("steps"), 0), spread_cell(row.get("best_epoch"), 1),
             spread_cell(row.get("best_step"), 0), _flops(row.get("best_train_flops")), _flops(row.get("train_flops"))]
            for name, row in comparison["models"].items() if not row.get("external")]
    return Table(header, rows, "ll" + "r" * (len(header) - 2))


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
            *holm_notes(comparison),
            *(["(external): an outside system's translations (compare.external), scored and tested the same way; "
               "it has no size, cost or training of ours to show."]
              if any(row.get("external") for row in comparison["models"].values()) else []),
            *(["The papers' setting (data.preprocess moses_lowercase): every score is of lowercased Moses tokens as "
               "the models write them, so BLEU and BLEU lc coincide and BLEU lc tok is multi-bleu.perl's figure "
               "(signatures `moses-lc-text:`)."]
              if comparison.get("tokenized") else [])]  # absent from comparisons written before it was kept


def holm_notes(comparison: dict) -> list[str]:
    """Which * survive Holm's correction over the tests against the baseline, a test set at a time; nothing for a
    comparison written before it was computed."""
    lines = []
    for split in comparison["splits"]:
        tests = {name: row[split]["bootstrap"] for name, row in comparison["models"].items()
                 if row[split]["bootstrap"].get("p_holm") is not None}
        if not tests:
            continue
        lapsed = [f"{name} (p {test['p_value']:g})" for name, test in tests.items()
                  if test["significant"] and not test["significant_holm"]]
        tested = f"{len(tests)} test{'s' if len(tests) > 1 else ''}"
        lines.append(f"{split}: under Holm's correction over its {tested} against the baseline "
                     + (f"the * of {', '.join(lapsed)} lapse." if lapsed else "every * stands."))
    return lines


def length_table(comparison: dict, split: str) -> Table:
    """BLEU per source-length bucket of split, per model; a header names its bucket's sentence count."""
    buckets, models = comparison["length_buckets"], comparison["models"]
    sizes = {label: models[comparison["baseline"]][split]["length_buckets"][label]["sentences"] for label in buckets}
    rows = [[name, *(spread_cell(row[split]["length_buckets"][label]["bleu"]) for label in buckets)]
            for name, row in models.items()]
    return Table(["Model", *(f"{label} ({sizes[label]})" for label in buckets)], rows, "l" + "r" * len(buckets))


def by_length_table(comparison: dict) -> Table:
    """The main contrast within each source-length bucket: its sentences per test set, difference and interval."""
    found = comparison["by_length"]
    rows = [[row["bucket"], ", ".join(f"{count:,}" for count in row["sentences"].values()),
             f"{row['difference']:+.2f}", f"[{row['ci'][0]:.2f}, {row['ci'][1]:.2f}]",
             "yes" if row["significant"] else "no"]
            for row in found["buckets"]]
    return Table(["Source words", "Sentences", f"{found['model']} - {found['other']}", "95% CI", "Significant"], rows,
                 "lrrrl")


def by_length_note(comparison: dict) -> str:
    found = comparison["by_length"]
    return (f"{found['question']} ({found['model']} against {found['other']}, both chosen on val) on the sentences of "
            f"each source-length bucket alone, pooled over {', '.join(comparison['splits'])} (sentences: on each, "
            f"in that order) as the verdict pools them; the interval resamples seeds and the bucket's sentences. A "
            "Transformer lead that grows with the length is what its constant path between any two words predicts.")


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
    fractions = list(next(iter(found["models"].values())))  # compare.BUDGET_FRACTIONS, as the json keys them
    header = ["Model", *(f"{_fraction(float(f))} ({float(f) * found['flops']:.2g} FLOPs)" for f in fractions)]
    rows = [[name, *(spread_cell(row[f]) for f in fractions)] for name, row in found["models"].items()]
    return Table(header, rows, "l" + "r" * len(fractions))


def compute_note(comparison: dict) -> str:
    found = comparison["across_compute"]
    return (f"Best greedy val BLEU among the validations within that many training FLOPs ({found['budget']}: "
            f"{found['flops']:.3g}); a dash where a run had not validated yet. Whether the ranking holds at a "
            "smaller budget, without training again: docs/training.md, \"Learning curves\".")


def swap_lines(comparison: dict) -> list[str]:
    """Where the top two families swap places as training FLOPs grow, in a sentence, then the definition."""
    found = comparison["swaps"]
    return [*([swap_text(found["families"])] if found["families"] else []), found["definition"]]


def swaps_table(comparison: dict) -> Table:
    """Every pair of models that swaps places for good, in the order of the FLOPs where it does."""
    return Table(["From (training FLOPs)", "Leads from there on", "Led before", "Their best val BLEU there"],
                 [[f"{pair['flops']:.3g}", pair["leader"], next(n for n in pair["pair"] if n != pair["leader"]),
                   ", ".join(f"{name} {bleu:.2f}" for name, bleu in pair["standing"].items())]
                  for pair in comparison["swaps"]["models"]], "rllr")


def _fraction(fraction: float) -> str:
    return "all" if fraction == 1 else f"1/{round(1 / fraction)}"


def published_table(rows: dict) -> Table:
    """One row per model with a published figure (published.beside_published): ours, theirs and the difference."""
    return Table(["Model", "Test set", "Ours, BLEU lc tok", "Published", "Ours - published", "Published by"],
                 [[name, row["split"], spread_cell(row["ours"]), f"{row['published']:.2f}",
                   "-" if row["difference"] is None else f"{row['difference']:+.2f}", row["source"]]
                  for name, row in rows.items()], "llrrrl")


def verdict_lines(comparison: dict) -> list[str]:
    """The contrasts in words, or why there are none; then the published findings the grid's 2 x 2 measures."""
    if not comparison["verdict"]:
        return ["The grid holds none of the contrasts (attention and plain RNNs, Transformers, encoder or decoder "
                "halves)."]
    seeds = len(comparison["seeds"])
    decided = ("decided where it excludes 0 and every seed's difference has its sign" if seeds > 1 else
               f"with one seed, decided only where it stays {comparison.get('rerun_margin', 0):g} BLEU clear of 0, "
               "what a rerun moves a model here (compare.rerun_margin)")
    return [f"{row['question']}: {row['text']}." for row in comparison["verdict"]] + [
        f"Differences are means over {seeds} seed{'s' if seeds > 1 else ''} and the test sets "
        f"{', '.join(comparison['splits'])}; the interval resamples both; {decided}."] + [
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
    features = f", {' '.join(device['cpu_features'])}" if device.get("cpu_features") else ""
    torch = ("" if device["torch_threads"] is None else  # a stage without torch (compare) records none of it
             f", {', '.join(device['gpus']) or 'no GPU'}, {_count(device['torch_threads'], 'torch thread')}")
    return f"{device['cpu']} ({_count(device['cores'], 'core')}{memory}{features}){torch}"


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


def _bleu_cells(scores: dict) -> list[str]:
    """BLEU, starred when it differs significantly from the baseline's, and its bootstrap 95% interval."""
    test = scores["bootstrap"]
    return [spread_cell(scores["bleu"]) + ("*" if test["significant"] else ""), _interval(test["mean"], test["ci"])]


def _interval(mean: float, ci: float) -> str:
    """The bootstrap's 95% interval of BLEU, within BLEU's 0 to 100. sacreBLEU gives the resamples' mean +- half the
    width of their 2.5-97.5 percentile range: centred on the mean rather than on that range, it reaches past 100 where
    the resamples bunch against it (a system near a copy of the reference), though no resample scores above 100."""
    return f"[{max(mean - ci, 0.0):.2f}, {min(mean + ci, 100.0):.2f}]"


def _flops(spread: dict | None) -> str:
    """Training FLOPs to 3 significant digits, ± sd over seeds; a dash where a run did not record them."""
    if spread is None:
        return "-"
    return f"{spread['mean']:.3g}" + ("" if spread["sd"] is None else f" ± {spread['sd']:.2g}")


def _mean_duration(seconds: dict | None) -> str:
    """A spread of seconds as h:mm:ss of its mean; a dash for an outside system's training time."""
    return "-" if seconds is None else _duration(seconds["mean"])


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


def sweep_table(result: dict) -> Table:
    """One row per beam size and alpha: quality, what the BLEU is made of (the length penalty moves its brevity
    penalty; a sweep written before it was recorded shows a dash), and speed (results/beam_sweep.md and the report
    page)."""
    rows = [[str(r["beam"]), f"{r['alpha']:g}", f"{r['bleu']:.2f}", dash(r.get("bleu_breakdown")), f"{r['chrf']:.2f}",
             f"{r['sentences_per_s']:,.1f}", f"{r['target_tokens_per_s']:,.0f}"] for r in result["rows"]]
    return Table(["beam", "alpha", "BLEU", "n-gram precisions (brevity penalty, lengths)", "chrF", "sentences/s",
                  "target tokens/s"], rows, "rrrlrrr")
