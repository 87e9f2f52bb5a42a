"""Two comparisons of one grid side by side: the same models under two settings (the equal budget of `make repro`
and the grid trained to convergence; two recipes; two machines). Per model its BLEU and place in each; per question
of the verdict (evaluation/verdict.py), and of its main contrast on each source-length bucket, its answer in each
and whether it changed; the published findings' verdicts in each; and every pair of models whose order the second
setting reverses.

It reads the two results/comparison.json files and computes nothing again but places and changes: every figure is
one the compare stage wrote. Given each setting's translations and the test references, it also tests each reversed
pair in each setting with the compare stage's paired bootstrap (evaluation/significance.py), so that a reversal
beyond the test set's noise stands apart from a swap of two models level under both.
"""
from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

from nmtbench.config import CompareConfig, ConfigError
from nmtbench.evaluation.significance import bleu_difference
from nmtbench.evaluation.verdict import decided
from nmtbench.tables import Table

SAME, REVERSED, APPEARS, FADES = "same", "reversed", "becomes decided", "no longer decided"


def load(spec: str) -> tuple[str, dict]:
    """'label=path/to/comparison.json' -> (label, the comparison), or a one-line error naming the fix."""
    label, _, path = spec.partition("=")
    if not label or not path:
        raise ConfigError(f"{spec!r}: give each comparison as LABEL=PATH, e.g. 'converged=runs/converge/results/"
                          "comparison.json'")
    try:
        comparison = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; run the compare stage there first (make report, or dvc repro "
                          "compare)") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: not a comparison.json ({error.msg}, line {error.lineno}); rerun the compare "
                          "stage that wrote it") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not a comparison.json (not UTF-8 text: {error.reason} at byte {error.start}); "
                          "rerun the compare stage that wrote it") from None
    if not isinstance(comparison, dict) or not {"splits", "models"} <= comparison.keys():
        raise ConfigError(f"{path}: not a comparison.json (no splits and models); rerun the compare stage")
    unscored = [f"{name} on {split}" for name, row in comparison["models"].items() for split in comparison["splits"]
                if split in row and "mean" not in (row[split].get("bleu") or {})]
    if unscored:  # what places() reads of every row
        raise ConfigError(f"{path}: not a comparison.json the compare stage wrote ({', '.join(unscored)} without a "
                          "BLEU mean); rerun the compare stage")
    # which way each contrast is decided, by the compare stage's rule (verdict.decided); a comparison written before
    # it recorded its margin is read with today's default
    margin = comparison.get("rerun_margin", CompareConfig().rerun_margin)
    for row in [*comparison.get("verdict", []), *(comparison.get("by_length") or {}).get("buckets", [])]:
        row["decided"] = decided(row, margin)
    return label, comparison


def common_split(first: dict, second: dict) -> str:
    """The first test split both comparisons scored, refused where they record different sentences under its name
    (smoke sizes' 40 beside the 1,000; comparisons written before they recorded them are taken on the name)."""
    for split in first["splits"]:
        if split in second["splits"]:
            records = [comparison.get("test_sets", {}).get(split) for comparison in (first, second)]
            if None not in records and records[0] != records[1]:
                said = [f"{record['sentences']:,} sentences, references {record['references_sha256'][:12]}"
                        for record in records]
                raise ConfigError(f"the two comparisons scored different test sets named {split} ({said[0]} against "
                                  f"{said[1]}); set side by side comparisons of the same test sets")
            return split
    raise ConfigError(f"the two comparisons share no test split ({', '.join(first['splits'])} against "
                      f"{', '.join(second['splits'])}); compare settings scored on the same test sets")


def places(comparison: dict, split: str) -> dict[str, tuple[float, int]]:
    """{model: (BLEU on split, its place, 1 the highest)}; equal BLEU shares a place."""
    bleu = {name: row[split]["bleu"]["mean"] for name, row in comparison["models"].items() if split in row}
    return {name: (score, 1 + sum(other > score for other in bleu.values())) for name, score in bleu.items()}


def scores_table(labels: list[str], first: dict, second: dict, split: str) -> Table:
    """Every model of either: BLEU and place under each setting, and the change in BLEU."""
    found = [places(first, split), places(second, split)]
    rows = []
    for name in dict.fromkeys([*found[0], *found[1]]):
        cells = [f"{found[i][name][0]:.2f}" if name in found[i] else "-" for i in (0, 1)]
        ranks = [str(found[i][name][1]) if name in found[i] else "-" for i in (0, 1)]
        change = (f"{found[1][name][0] - found[0][name][0]:+.2f}" if all(name in side for side in found) else "-")
        rows.append([name, cells[0], ranks[0], cells[1], ranks[1], change])
    header = ["model", f"BLEU, {labels[0]}", "place", f"BLEU, {labels[1]}", "place", "change"]
    return Table(header, rows, "lrrrrr")


def change(first: dict | None, second: dict | None, labels: list[str]) -> str:
    """How one question's answer moved from the first setting to the second."""
    if first is None or second is None:
        return f"only under {labels[0] if second is None else labels[1]}"
    before, after = first["decided"], second["decided"]
    said = (SAME if before == after else REVERSED if before and after else APPEARS if after else FADES)
    return said if (first["model"], first["other"]) == (second["model"], second["other"]) else f"{said} (other models)"


def answer(row: dict | None) -> str:
    """One verdict in a cell: the models, which way, the difference and its interval."""
    if row is None:
        return "-"
    word = {1: "better", -1: "worse", 0: "not decided"}[row["decided"]]
    return (f"{row['model']} vs {row['other']}: {word}, {row['difference']:+.2f} "
            f"[{row['ci'][0]:.2f}, {row['ci'][1]:.2f}]")


def answers_table(heading: str, labels: list[str], found: list[dict[str, dict]]) -> Table:
    """Every contrast of either setting, keyed alike in both: its answer under each and what changed."""
    rows = [[key, answer(found[0].get(key)), answer(found[1].get(key)), change(found[0].get(key), found[1].get(key),
                                                                                 labels)]
            for key in dict.fromkeys([*found[0], *found[1]])]
    return Table([heading, labels[0], labels[1], "change"], rows, "llll")


def verdicts_table(labels: list[str], first: dict, second: dict) -> Table:
    """Every question of either verdict: its answer under each setting and what changed. A question asked of
    several pairs in either (a per-side contrast, one row per model sharing the fixed half) is one row per pair."""
    found = [comparison.get("verdict") or [] for comparison in (first, second)]
    repeated = {question for rows in found for question, count in Counter(row["question"] for row in rows).items()
                if count > 1}

    def key(row: dict) -> str:
        question = row["question"]
        return f"{question}: {row['model']} vs {row['other']}" if question in repeated else question
    return answers_table("question", labels, [{key(row): row for row in rows} for rows in found])


def by_length_table(labels: list[str], first: dict, second: dict) -> Table:
    """The main contrast on each source-length bucket (compare's by_length) under each setting, and what changed."""
    def buckets(comparison: dict) -> dict[str, dict]:
        found = comparison.get("by_length") or {"buckets": []}
        return {row["bucket"]: {**row, "model": found["model"], "other": found["other"]} for row in found["buckets"]}
    return answers_table("source words", labels, [buckets(first), buckets(second)])


def findings_table(labels: list[str], first: dict, second: dict) -> Table:
    """Each published finding's verdict under each setting."""
    found = [{row["finding"]: row["verdict"] for row in comparison.get("findings") or []}
             for comparison in (first, second)]
    rows = []
    for finding in dict.fromkeys([*found[0], *found[1]]):
        verdicts = [side.get(finding, "-") for side in found]
        rows.append([finding.split(":")[0], *verdicts, SAME if verdicts[0] == verdicts[1] else "changed"])
    return Table(["finding", labels[0], labels[1], "change"], rows, "llll")


def reversed_pairs(first: dict, second: dict, split: str) -> list[tuple[str, str, float, float]]:
    """Every pair of models that both settings order strictly, in opposite orders, as (the first setting's winner,
    the other, its lead there, its deficit in the second), the largest turnaround (the two gaps added) first."""
    found = [places(first, split), places(second, split)]
    pairs = []
    for a, b in itertools.combinations([name for name in found[0] if name in found[1]], 2):
        before, after = (side[a][0] - side[b][0] for side in found)
        if before * after < 0:
            winner, loser = (a, b) if before > 0 else (b, a)
            pairs.append((winner, loser, abs(before), -abs(after)))
    return sorted(pairs, key=lambda pair: pair[3] - pair[2])


def translations(folder: Path, comparison: dict, model: str, split: str, references: list[str]) -> list[dict]:
    """One {split: lines} a seed of the comparison, read from folder/<model>/seed<seed>/<split>.txt (the layout of
    results/ and of `nmtbench converge --export`), or a one-line error naming the fix."""
    if not comparison.get("seeds"):
        raise ConfigError("a comparison.json without its seeds: rerun the compare stage that wrote it to test pairs")
    runs = []
    for seed in comparison["seeds"]:
        path = folder / model / f"seed{seed}" / f"{split}.txt"
        if not path.is_file():
            raise ConfigError(f"{path}: no such translation; point --translations at the folder holding "
                              "<model>/seed<seed>/<split>.txt of that comparison's runs")
        lines = path.read_text().splitlines()
        if len(lines) != len(references):
            raise ConfigError(f"{path}: {len(lines)} lines for the {len(references)} references of {split}; these "
                              "are not the translations of those references (another data set or an unfinished run)")
        runs.append({split: lines})
    return runs


def reversals(labels: list[str], first: dict, second: dict, split: str, tested: dict | None = None) -> Table:
    """The reversed pairs and their gaps; with tested ({"folders": [two Paths], "references": split -> its reference
    lines, "resamples", "seed"}), each gap marked * where the paired bootstrap finds the pair different there."""
    headers = [f"ahead under {labels[0]}", "behind", f"gap, {labels[0]}", f"gap, {labels[1]}"]
    pairs = reversed_pairs(first, second, split)
    references = tested["references"](split) if tested and pairs else None
    rows = []
    for winner, loser, before, after in pairs:
        gaps = [f"{before:+.2f}", f"{after:+.2f}"]
        if references:
            for i, (folder, comparison) in enumerate(zip(tested["folders"], (first, second))):
                runs = [translations(folder, comparison, name, split, references) for name in (winner, loser)]
                found = bleu_difference(*runs, {split: references}, tested["resamples"], tested["seed"])
                gaps[i] += "*" if found["significant"] else ""
        rows.append([winner, loser, *gaps])
    return Table(headers, rows, "llrr")


def markdown(specs: list[str], tested: dict | None = None) -> str:
    """The page: scores and places, verdicts, findings, reversals, each with what it reads (tested: see reversals)."""
    (first_label, first), (second_label, second) = (load(spec) for spec in specs)
    labels = [first_label, second_label]
    split = common_split(first, second)
    lines = [f"# {first_label} beside {second_label}", "",
             f"Cased BLEU on {split}, mean over seeds (each comparison's own; place 1 is the highest).", "",
             scores_table(labels, first, second, split).markdown()]
    if first.get("verdict") is not None or second.get("verdict") is not None:
        lines += ["", "## The verdict under each", "", verdicts_table(labels, first, second).markdown(), "",
                  "Each answer: BLEU difference over seeds and test sets with its 95% interval, as its compare stage "
                  "measured it; decided as its compare stage decides (the interval excludes 0 and every seed agrees, "
                  "or one seed's interval clears the rerun margin). Change: same, reversed (decided both "
                  "ways), becomes decided or no longer decided; (other models): the question picked "
                  "different models, as \"best\" is chosen on validation in each."]
    if first.get("by_length") or second.get("by_length"):
        lines += ["", "## The main contrast by source length under each", "",
                  by_length_table(labels, first, second).markdown(), "",
                  "The best attention RNN against the best Transformer on each source-length bucket's sentences alone, "
                  "as each compare stage measured it (its by_length)."]
    if first.get("findings") or second.get("findings"):
        lines += ["", "## The published findings under each", "", findings_table(labels, first, second).markdown()]
    pairs = reversals(labels, first, second, split, tested)
    lines += ["", f"## Pairs whose order {second_label} reverses", ""]
    lines += [pairs.markdown() if pairs.rows else "None: both settings order every pair alike."]
    if tested and pairs.rows:
        both = sum(row[2].endswith("*") and row[3].endswith("*") for row in pairs.rows)
        lines += ["", f"*: the two differ in that setting (paired bootstrap over the sentences of {split} and the "
                  f"seeds, {tested['resamples']:,} resamples, 95% interval excluding 0). {both} of {len(pairs.rows)} "
                  "reversals are significant under both settings; the rest swap models that one setting, or both, "
                  "cannot tell apart on this test set."]
    return "\n".join(lines) + "\n"
