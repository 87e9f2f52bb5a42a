"""Stage `report`: results/report.html, one self-contained page (plots embedded as PNG, no external assets).

It reads what the other stages wrote: the comparison (results/comparison.json; its tables are drawn by the
same code as results/comparison.md, evaluation/rendering.py, so the page and the Markdown agree) and,
per run, metrics/<run>/ (train.json, eval.json, attention.json, learning_curve.csv), where a run is
any folder under metrics/<model>/ holding an eval.json (metrics/<model>/ itself, or one per seed), and the
beam sweep (results/beam_sweep.json).
Whatever is not there yet is named on the page, with the stage that writes it, instead of failing.
"""
from __future__ import annotations

import base64
import html
import json
import math
import re
from pathlib import Path

from nmtbench import figures
from nmtbench.evaluation import rendering
from nmtbench.evaluation.significance import SIGNIFICANCE_LEVEL
from nmtbench.files import read_csv, read_json, write_text
from nmtbench.run_paths import METRICS, RESULTS
from nmtbench.tables import Table

CURVE_COLUMNS = ("wall_seconds", "target_tokens", "val_bleu")
FLOPS_COLUMN = "train_flops"  # in the learning curves of runs trained since it was recorded
STYLE = """
body { font-family: sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; vertical-align: top; }
th { background: #f0f0f0; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; }
figure { margin: 1em 0; }
.missing { color: #a33; }
code { font-size: 0.85em; }
"""


class Page:
    """An HTML page built section by section; it records the figures it embeds and what it lacks."""

    def __init__(self):
        self.parts: list[str] = []
        self.figures: list[str] = []
        self.missing: list[str] = []

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def figure(self, anchor: str, png: bytes, caption: str) -> None:
        self.figures.append(anchor)
        data = base64.b64encode(png).decode("ascii")
        self.parts.append(f'<figure><img id="{html.escape(anchor)}" alt="{html.escape(caption)}" '
                          f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}</figcaption></figure>')

    def lack(self, what: str, why: str) -> None:
        self.missing.append(f"{what}: {why}")
        self.parts.append(f'<p class="missing">Missing: {html.escape(what)}: {_inline(why)}</p>')

    def html(self, title: str) -> str:
        lacking = "".join(f"<li>{_inline(item)}</li>" for item in self.missing)
        summary = f'<p class="missing">This page lacks:</p><ul class="missing">{lacking}</ul>' if lacking else ""
        return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
                f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{html.escape(title)}</h1>\n{summary}\n"
                + "\n".join(self.parts) + "\n</body>\n</html>\n")


def report(model_names: list[str], metrics_dir: Path = METRICS, results_dir: Path = RESULTS) -> Page:
    """Write results/report.html; return the page (its figures and what it lacks)."""
    metrics_dir, results_dir = Path(metrics_dir), Path(results_dir)
    comparison = json.loads(_required(results_dir / "comparison.json"))
    page = Page()
    # The answer first: quality against cost, as a table and a plot; the details follow.
    runs = _runs(model_names, metrics_dir, page)
    _headline_section(page, comparison)
    _frontier_section(page, runs)
    claims = results_dir / "claims.md"
    if claims.is_file():
        page.add('<p>The claims checked against these results: <a href="claims.md">claims.md</a>.</p>')
    else:
        page.lack("claims", "`results/claims.md` is not written yet; `dvc repro analyze` writes it")
    _verdict_section(page, comparison)
    _comparison_section(page, comparison)
    _tuning_section(page, comparison)
    _length_section(page, comparison)
    _beam_sweep_section(page, results_dir)
    _curves_section(page, runs, comparison)
    _attention_section(page, runs)
    _examples_section(page, comparison)
    _provenance_section(page, comparison)
    write_text(results_dir / "report.html", page.html("nmtbench: RNN/LSTM and Transformer translation models compared"))
    return page


def _required(path: Path) -> str:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; run `dvc repro compare` first")
    return path.read_text(encoding="utf-8")


def _runs(model_names: list[str], metrics_dir: Path, page: Page) -> dict[str, Path]:
    """{label: folder} of every evaluated run, in params order; label is the folder below metrics/."""
    runs = {}
    for name in model_names:
        folders = sorted({path.parent for path in (metrics_dir / name).rglob("eval.json")})
        if not folders:
            page.lack(f"model {name}", f"no `{metrics_dir / name}/**/eval.json`; the evaluate stage writes it")
        runs.update({folder.relative_to(metrics_dir).as_posix(): folder for folder in folders})
    return runs


def _headline_section(page: Page, comparison: dict) -> None:
    """Per model: size, training time, BLEU cased and lowercased with its 95% interval on every test set, and
    decoding speed."""
    page.heading("Quality against cost")
    models, splits = comparison.get("models"), comparison.get("splits")
    needed = ("params", "train_seconds")
    if not models or not splits or any(key not in row for row in models.values() for key in needed) or any(
            not {"bootstrap", "bleu_lc"} <= set(row.get(split, {})) for row in models.values() for split in splits):
        page.lack("headline table", "`results/comparison.json` lacks sizes, training times, BLEU intervals or BLEU lc; "
                                    "the compare stage writes them")
        return
    page.add(rendering.headline_table(comparison).html())
    page.add("<p>BLEU: cased sacreBLEU, beam search; BLEU lc: lowercased, the convention of most published "
             "Multi30k figures (docs/evaluation.md); *: differs from the baseline with "
             f"p &lt; {SIGNIFICANCE_LEVEL} (paired bootstrap); "
             "decoding speed: the evaluate stage's, on the machine that ran it. Details below.</p>")


def _comparison_section(page: Page, comparison: dict) -> None:
    """The main table of results/comparison.md with its notes and sacreBLEU signatures."""
    page.heading("Comparison")
    try:
        table, (seeds, *columns) = rendering.main_table(comparison), rendering.comparison_notes(comparison)
        used = rendering.signatures(comparison)
    except KeyError as key:  # a comparison.json older than the table
        page.lack("comparison table", f"`results/comparison.json` has no {key}; the compare stage writes it")
        return
    page.add(table.html())
    page.add(f"<p>{_inline(seeds)}</p>{_list(columns)}<h3>Training to the best checkpoint</h3>"
             f"{rendering.training_table(comparison).html()}<h3>sacreBLEU signatures</h3>{_list(used)}")


def _verdict_section(page: Page, comparison: dict) -> None:
    """The main contrasts answered, right after the headline: a comparison without them shows nothing."""
    if comparison.get("verdict") is not None:
        page.heading("Verdict")
        page.add(_list(rendering.verdict_lines(comparison)))
    if comparison.get("by_length"):
        page.add(f"<h3>The main contrast by source length</h3>{rendering.by_length_table(comparison).html()}"
                 f"<p>{_inline(rendering.by_length_note(comparison))}</p>")


def _tuning_section(page: Page, comparison: dict) -> None:
    if comparison.get("tuning"):
        page.heading("Tuning on validation")
        page.add(rendering.tuning_table(comparison).html() + _list(rendering.tuning_notes(comparison)))


def _length_section(page: Page, comparison: dict) -> None:
    page.heading("BLEU by source length")
    buckets = comparison.get("length_buckets")
    if not buckets:
        page.lack("BLEU by source-length bucket",
                  "`results/comparison.json` has no `length_buckets`; the compare stage writes it")
        return
    split = comparison["splits"][0]
    bleu = {name: [(row[split]["length_buckets"][bucket]["bleu"] or {"mean": math.nan})["mean"] for bucket in buckets]
            for name, row in comparison["models"].items()}  # an empty bucket has no BLEU: a gap in the line
    page.figure("length-buckets", figures.length_buckets(buckets, bleu, split),
                f"BLEU per source-length bucket (words) on {split}, one line per model (mean over seeds)")
    for test_set in comparison["splits"]:  # the figures of every test set; a header counts its bucket's sentences
        page.add(f"<h3>{html.escape(test_set)}</h3>{rendering.length_table(comparison, test_set).html()}")


def _curves_section(page: Page, runs: dict[str, Path], comparison: dict) -> None:
    page.heading("Learning curves: validation BLEU against time, tokens seen and training FLOPs")
    found = comparison.get("swaps") or {}
    flip = (found.get("families") or {}).get("flops")
    curves = {label: _curve(folder / "learning_curve.csv") for label, folder in runs.items()}
    lacking = [label for label, rows in curves.items() if not rows]
    if lacking:
        page.lack("learning curves of " + ", ".join(lacking),
                  f"no `learning_curve.csv` with columns {', '.join(CURVE_COLUMNS)} and a validation BLEU beside "
                  "their train.json; the train stage writes it when `train.val_bleu_sentences` is above 0")
    curves = {label: rows for label, rows in curves.items() if rows}
    if curves:
        page.figure("learning-curves", figures.learning_curves(curves),
                    "Validation BLEU against wall-clock training time and against target tokens seen")
    without = [label for label, rows in curves.items() if FLOPS_COLUMN not in rows[0]]
    if without:
        page.lack("validation BLEU against training FLOPs of " + ", ".join(without),
                  f"their `learning_curve.csv` has no `{FLOPS_COLUMN}` column (trained before it was recorded); "
                  "`dvc repro train` again writes it")
    with_flops = {label: rows for label, rows in curves.items() if label not in without}
    if with_flops:
        page.figure("flops-curves", figures.flops_curves(with_flops, flip),
                    "Validation BLEU against training FLOPs (log scale), every run on one plot: the ranking at "
                    "every smaller budget, read off the same runs"
                    + ("; the dashed line marks where the recurrent and the Transformer families swap places"
                       if flip else ""))
    if comparison.get("swaps"):
        page.add(_list(rendering.swap_lines(comparison)))
        if comparison["swaps"]["models"]:
            page.add(rendering.swaps_table(comparison).html())


def _curve(path: Path) -> list[dict]:
    """The validations of a learning_curve.csv that have a BLEU, with its FLOPs where recorded; [] for a missing
    or older file."""
    rows = read_csv(path) if path.is_file() else []
    if not rows or not set(CURVE_COLUMNS) <= set(rows[0]):
        return []
    keys = [*CURVE_COLUMNS, *([FLOPS_COLUMN] if FLOPS_COLUMN in rows[0] else [])]
    return [{key: float(row[key]) for key in keys} for row in rows if row["val_bleu"]]


def _frontier_section(page: Page, runs: dict[str, Path]) -> None:
    points, split = [], None
    for label, folder in runs.items():
        train_path = folder / "train.json"
        if not train_path.is_file():
            page.lack(f"size of {label}", f"no `{train_path}`; the train stage writes it")
            continue
        scores = read_json(folder / "eval.json")
        split = split or next(iter(scores))
        train = read_json(train_path)
        points.append({"label": label, "params": train["params"], "train_seconds": train.get("train_seconds"),
                       "bleu": scores[split]["bleu"], "sentences_per_s": scores[split]["sentences_per_s"]})
    if points:
        page.figure("frontier", figures.frontier(points, split),
                    f"BLEU on {split} against parameter count, training time and decoding speed "
                    "(beam search, this machine)")


def _attention_section(page: Page, runs: dict[str, Path]) -> None:
    page.heading("Attention")
    examples, without, seen = {}, [], set()
    for label, folder in runs.items():
        model = label.split("/")[0]
        if model in seen:  # one sentence per model: its first run's
            continue
        seen.add(model)
        path = folder / "attention.json"
        if not path.is_file():
            page.lack(f"attention of {model}", f"no `{path}`; the evaluate stage writes it")
            continue
        example = json.loads(path.read_text(encoding="utf-8"))
        if example["weights"] is None:
            without.append(model)
        else:
            examples[model] = (label, example)
    if examples:
        first = next(iter(examples.values()))[1]
        page.figure("attention", figures.attention_grid(dict(examples.values())),
                    f"Source attention of each output piece, one panel per model (its first run; greedy decoding "
                    f"of sentence {first['sentence']} of {first['split']})")
    if without:
        page.add(f"<p>Models without attention (nothing to draw): {html.escape(', '.join(without))}.</p>")


def _beam_sweep_section(page: Page, results_dir: Path) -> None:
    page.heading("Beam sweep")
    path = results_dir / "beam_sweep.json"
    if not path.is_file():
        page.lack("beam sweep", f"no `{path}`; `dvc repro beam_sweep` writes it")
        return
    result = json.loads(path.read_text(encoding="utf-8"))
    page.add(f"<p>{html.escape(result['model'])} (seed {result['seed']}) on the first {result['sentences']} "
             f"sentences of {html.escape(result['split'])}, {html.escape(result['length_penalty'])} length penalty; "
             f"BLEU: <code>{html.escape(result['bleu_signature'])}</code>.</p>" + rendering.sweep_table(result).html())
    page.figure("beam-sweep", figures.beam_sweep(result), "BLEU and decoding speed against beam size, one line per "
                "length-penalty strength alpha")


def _examples_section(page: Page, comparison: dict) -> None:
    page.heading("Example translations")
    examples = comparison.get("examples")
    if not examples:
        page.lack("example translations", "`results/comparison.json` has no `examples`; the compare stage writes it")
        return
    for split, rows in examples.items():
        models = list(rows[0]["outputs"])
        cells = [[str(example["index"]), example["source"], example["reference"],
                  *(example["outputs"][model] for model in models)] for example in rows]
        page.add(Table([split, "source", "reference", *models], cells, "l" * (len(models) + 3)).html())


def _provenance_section(page: Page, comparison: dict) -> None:
    """The commit, software, machine and wall time behind the figures: what two pages are compared by."""
    page.heading("Produced by")
    page.add(_list(rendering.provenance_lines(comparison)))


def _list(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + "</ul>"


def _inline(text: str) -> str:
    """Text with Markdown's `code` spans, as the notes and the messages of this page write them."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
