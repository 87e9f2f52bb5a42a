"""The results page of a GPU run, written from what came back: docs/results/<date>-gpu-<kind>.md and its plot.

    nmtbench gpu report <folder> [<folder> ...] --kind h100     (make gpu-report FROM="<folder> ..." KIND=h100)

Each folder is what one call of tools/gpu_check.sh left in $OUT, read by returned_calls.py. The page holds only
what those files say: the machine and versions (setup), the GPU tests' outcomes (tests), per run of the papers'
recipes and of the grid its BLEU, interval, epochs, why it stopped and its speeds (published, grid), the packing
measured (probe), and val BLEU against training FLOPs with the compute at which the ranking of the top two families
flips (grid). A part that failed, was cut or did not run is said to have, with the lines of the summary and the
logs that say why; a figure that did not come back is a dash, never a guess. A file that came back unreadable (a
tarball or a JSON file cut short, a model without its family) is one line per part on the page and on stderr, and
the page holds the rest.
"""
from __future__ import annotations

import re
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import yaml

from nmtbench import figures
from nmtbench.evaluation.quality_vs_compute import FLIP_DEFINITION, ranking_flip, swap_text
from nmtbench.gpu.returned_calls import Part, ReturnedRun, first, grid_summary, machine, part_runs, read_returned
from nmtbench.param_blocks import ConfigError
from nmtbench.tables import Table, dash

LOG_LINES = 4  # the last lines of a failed stage's log shown on the page


def interval(test: dict | None) -> list[str]:
    """A run's 95% BLEU interval over the paired bootstrap's resamples, and its p-value against the baseline."""
    if not test:
        return ["-", "-"]
    return [f"[{test['mean'] - test['ci']:.2f}, {test['mean'] + test['ci']:.2f}]",
            "baseline" if test["p_value"] is None else f"{test['p_value']:.4g}"]


def why_stopped(run: ReturnedRun) -> str:
    """Why the run stopped, as train.json says (runs trained before it said: not recorded)."""
    return "-" if not run.train else (run.train.get("stopped_by") or "not recorded").replace("_", " ")


def label(run: ReturnedRun, runs: list[ReturnedRun]) -> str:
    return run.model + (f" (seed {run.seed})" if len({r.seed for r in runs}) > 1 else "")


def runs_table(params: dict, runs: list[ReturnedRun], comparison: dict, jobs: int | None) -> Table:
    """Per run: on every test set BLEU, its interval and p-value against the baseline, BLEU lc tok; then epochs,
    why it stopped, training target tokens/s labelled with how many trained at once, decoding sentences/s."""
    splits = params["data"]["eval_splits"]
    packing = "alone" if jobs == 1 else f"packed, up to {jobs} at once" if jobs else "trainings at once not recorded"
    header = ["Model", *(f"{split} {column}" for split in splits for column in ("BLEU", "95% CI", "p", "BLEU lc tok")),
              "Epochs", "Stopped by", f"Train target tokens/s ({packing})", f"Decoding sentences/s ({splits[0]})"]
    rows = []
    for run in runs:
        cells = [label(run, runs)]
        for split in splits:
            scores = run.scores.get(split, {})
            test = (comparison.get("models", {}).get(run.model, {}).get(split, {}).get("bootstrap", {})
                    .get("per_seed", {}).get(str(run.seed)))
            cells += [dash(scores.get("bleu"), ".2f"), *interval(test), dash(scores.get("bleu_lc_tok"), ".2f")]
        cells += [dash(run.train.get("epochs")), why_stopped(run), dash(run.train.get("train_tokens_per_s"), ",.0f"),
                  dash(run.scores.get(splits[0], {}).get("sentences_per_s"), ",.1f")]
        rows.append(cells)
    return Table(header, rows, "l" + "r" * (len(header) - 4) + "lrr")  # "Stopped by" is words


def runs_notes(part: Part, params: dict, comparison: dict) -> list[str]:
    evaluate = params["evaluate"]
    absent = ("results/comparison.json did not come back whole (above)" if part.lost("results/comparison.json")
              else "the compare stage did not run")
    return [f"BLEU: cased sacreBLEU 13a, the headline; BLEU lc tok: lowercased on Moses tokens, as the papers report "
            f"BLEU. Beam {evaluate['beam']}, decoding on `{evaluate['device']}`.",
            f"95% CI and p: sacreBLEU's paired bootstrap ({params['compare']['bootstrap_resamples']} resamples) "
            f"against the baseline, {comparison['baseline']}, from the compare stage (on the runs that finished)."
            if comparison else f"95% CI and p: dashes, for {absent}.",
            "Stopped by: train.json's `stopped_by`. Train target tokens/s: train.json's `train_tokens_per_s`, "
            "timed over the stretches between validations while the part's trainings shared the machine as labelled."]


def log_tail(text: str) -> list[str]:
    """The last lines of a log that hold text, progress bars' carriage returns split like newlines."""
    return [line.rstrip() for line in re.split(r"[\r\n]+", text) if line.strip()][-LOG_LINES:]


def failures(part: Part, runs: list[ReturnedRun]) -> list[str]:
    """Why a part did not pass: its summary lines, every stage that failed with the end of its log, and the runs
    that left no scores."""
    lines = []
    if not part.passed:
        # a failed part's summary repeats some lines of its log's end among the lines that matter: each once
        shown = list(dict.fromkeys(part.lines))
        lines += ["", f"**{part.name}: {part.status}**", *(["", "```", *shown, "```"] if shown else []), ""]
    text = part.text("part.log")
    for stage in dict.fromkeys(re.findall(r"^\s*FAILED: (\S+) \(", text, re.MULTILINE)
                               + re.findall(r"^failed: (\S+): cut at the time limit", text, re.MULTILINE)):
        # the launcher's logs; calls before the package's timed grid wrote them to logs/
        log = next((log for log in (f"launch/logs/{stage}.log", f"logs/{stage}.log") if part.text(log)), "")
        tail = log_tail(part.text(log)) if log else []
        lines += [f"- `{stage}` failed; the end of {log}:", "", "  ```", *(f"  {line}" for line in tail),
                  "  ```"] if tail else [f"- `{stage}` failed and left no log."]
    unscored = [label(run, runs) for run in runs if not run.scores]
    if unscored:
        lines += [f"- Not evaluated, so without scores: {', '.join(unscored)}."]
    return lines


def missing(part: Part, what: str, path: str) -> list[str]:
    """Where a part's file is not there or unreadable: why, as far as what came back says."""
    lost = part.lost(path)
    if lost:
        return [f"{what} did not come back whole: {lost}.", *failures(part, [])]
    return failures(part, []) if not part.passed else [f"{what} did not come back, though {part.name} {part.status}."]


def grid_lines(part: Part, plot: str) -> tuple[list[str], bytes | None]:
    """The grid's runs, what failed, and val BLEU against training FLOPs with the flip (the plot's PNG bytes)."""
    params, runs = part_runs(part)
    if not runs:
        return missing(part, "The grid's params.yaml", "params.yaml"), None
    comparison = part.json("results/comparison.json", {})
    jobs = grid_summary(part).get("jobs")
    lines = [runs_table(params, runs, comparison, jobs).markdown(), "",
             *(f"- {note}" for note in runs_notes(part, params, comparison)), *failures(part, runs), "",
             "## Validation BLEU against training FLOPs", ""]
    curves = {label(run, runs): [{"train_flops": at, "val_bleu": bleu} for at, bleu in run.curve]
              for run in runs if run.curve}
    if not curves:
        return [*lines, "No learning curve with training FLOPs and val BLEU came back."], None
    by_family = {}
    for run in runs:
        if run.family:
            by_family.setdefault(run.family, []).extend(run.curve)
        else:
            part.unreadable[f"params.yaml's models.{run.model}"] = "has no family, so the flip leaves its runs out"
    flip = ranking_flip(by_family)
    lines += [f"![val BLEU against training FLOPs, every run of the grid]({plot})", "",
              "Greedy val BLEU at each validation against the training FLOPs spent (counted, not timed), every run of "
              f"the grid on one plot{'; the dashed line marks the flip' if flip['flops'] else ''}.", "",
              swap_text(flip), "", FLIP_DEFINITION]
    return lines, figures.flops_curves(curves, flip["flops"])


def published_lines(part: Part, project: Path) -> list[str]:
    """The papers' two recipes beside their published figures (the project's profiles/published.yaml:
    compare.published), then every run of the part as the grid's are shown."""
    params, runs = part_runs(part)
    quoted = yaml.safe_load((project / "profiles" / "published.yaml").read_text())["compare"]["published"]
    rows = []
    for model, figure in quoted.items():
        for run in [run for run in runs if run.model == model] or [ReturnedRun(model, 0, "", {}, {}, [])]:
            ours = run.scores.get(figure["split"], {}).get("bleu_lc_tok")
            rows.append([label(run, runs), figure["split"], dash(ours, ".2f"), f"{figure['bleu']:.2f}",
                         dash(None if ours is None else round(ours - figure["bleu"], 2), "+.2f"),
                         dash(run.train.get("epochs")),
                         why_stopped(run), figure["source"]])
    table = Table(["Model", "Test set", "Ours, BLEU lc tok", "Published", "Ours - published", "Epochs", "Stopped by",
                   "Published by"], rows, "llrrrrll")
    lines = [table.markdown(), "", "- Published: lowercased BLEU on Moses tokens as each paper reports it (quoted, "
             "not recomputed); ours: BLEU lc tok of the same test set, the papers' tokens (docs/evaluation.md)."]
    if any(run.train or run.scores for run in runs):
        comparison = part.json("results/comparison.json", {})
        jobs = grid_summary(part).get("jobs")
        lines += ["", "Every run of the part:", "", runs_table(params, runs, comparison, jobs).markdown(), "",
                  *(f"- {note}" for note in runs_notes(part, params, comparison))]
    return [*lines, *failures(part, runs)]


def probe_lines(part: Part) -> list[str]:
    """Target tokens/s per training and in all at each number of trainings at once: the alone figure is 1's."""
    found = part.json("probe.json")
    if not found:
        return missing(part, "probe.json", "probe.json")
    rows = [[f"{jobs}{' (alone)' if jobs == '1' else ''}",
             ", ".join(f"{rate:,.0f}" for rate in level["per_job_tokens_per_s"]),
             f"{level['total_tokens_per_s']:,.0f}", dash(level["gpu_peak_memory_mib"], ",")]
            for jobs, level in found["levels"].items()]
    table = Table(["Trainings at once", "Target tokens/s of each", "In all", "GPU peak memory (MiB)"], rows, "rrrr")
    return [table.markdown(), "", f"- {found['model']}, {found['train_seconds']} s of training each; chosen: "
            f"{found['chosen_jobs']} at once, the most target tokens/s in all.", *failures(part, [])]


def tests_lines(part: Part) -> list[str]:
    """Every GPU test with its outcome, from the junit report pytest wrote."""
    report, cases = part.text("junit.xml"), None
    try:
        cases = list(ElementTree.fromstring(report).iter("testcase")) if report else None
    except ElementTree.ParseError as error:
        part.unreadable["junit.xml"] = f"is cut short or damaged (ParseError at line {error.position[0]})"
    if cases is None:
        return missing(part, "The test report (junit.xml)", "junit.xml")
    rows = []
    for case in cases:
        outcome = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        name = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(getattr(outcome, "tag", ""), "passed")
        message = (outcome.get("message") or "") if outcome is not None else ""
        rows.append([f"{case.get('classname')}::{case.get('name')}", name, message.splitlines()[0][:160] if message
                     else ""])
    counts = {name: sum(row[1] == name for row in rows) for name in ("passed", "failed", "error", "skipped")}
    return [", ".join(f"{count} {name}" for name, count in counts.items()) + f" of {len(rows)} GPU tests.", "",
            Table(["Test", "Outcome", "Message"], rows, "lll").markdown(), *failures(part, [])]


def page(calls: list[str], parts: dict[str, Part], kind: str, date: str, plot: str,
         project: Path) -> tuple[str, bytes | None]:
    """The Markdown page and the PNG of its plot (None without learning curves)."""
    runs = [run for name in ("published", "grid") for run in part_runs(parts[name])[1]]
    found = machine(calls, parts, runs)
    rehearsal = any("CPU rehearsal" in line for line in calls)
    # the sections before the header: reading their files fills the parts' lists of unreadable ones, shown on top
    grid, png = grid_lines(parts["grid"], plot)
    sections = {"The GPU tests": tests_lines(parts["tests"]),
                "The papers' recipes": published_lines(parts["published"], project),
                "Packing: trainings at once": probe_lines(parts["probe"]), "The grid": grid}
    setup = parts["setup"]
    problems = [f"- {name}: {part.problem()}" for name, part in parts.items() if part.problem()]
    title = (f"# A CPU rehearsal of the GPU run ({kind}), as it came back" if rehearsal else
             f"# On one GPU ({(found['gpu'] or kind).split(',')[0]}): the papers' recipes and the grid, as the run "
             "came back")
    lines = [title, "", "| | |", "|:---|:---|", f"| date | {date} |",
             f"| code | {found['commit'] or 'commit not recorded'} |",
             f"| machine | GPU: {found['gpu'] or 'not recorded'}; driver {found['driver'] or 'not recorded'}, CUDA "
             f"{found['cuda'] or 'not recorded'}; torch {found['torch'] or 'not recorded'} |",
             f"| calls | {'; '.join(f'`{line}`' for line in calls)} |",
             f"| parts | {'; '.join(f'{name}: {part.status}' for name, part in parts.items())} |", "",
             "Written by `make gpu-report` (nmtbench gpu report) from what the calls returned: summary.txt and each "
             "part's tarball. Every figure is read from the run's files; a dash is a figure that did not come back.",
             *(["", "**A rehearsal on a CPU at tiny sizes: no GPU ran, and its scores are meaningless by design.**"]
               if rehearsal else []),
             *(["", "**Unreadable in what came back**, so missing or dashes below:", "", *problems]
               if problems else []),
             *(line for heading, body in sections.items() for line in ("", f"## {heading}", "", *body)),
             "", "## Setup", "", *(["```", *setup.lines, "```"] if setup.passed else failures(setup, []))]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)) + "\n", png  # a section that opens on a failure: one blank


def write_gpu_page(folders: list[Path], kind: str, date: str | None = None, results: Path | None = None,
                   force: bool = False, project: Path = Path(".")) -> tuple[Path, Path | None]:
    """The page of the run whose calls returned folders (in call order), and its plot, into results (default: the
    project's docs/results); the page's path and the plot's, None without learning curves. date: the page's
    (default: the first call's, from its summary.txt); force: rewrite a page of the same name. Each part with a
    file that came back unreadable is also one line on stderr."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", kind):
        raise ConfigError(f"--kind {kind!r}: lowercase letters, digits and dashes only, e.g. h100")
    if date and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        raise ConfigError(f"--date {date!r}: give it as YYYY-MM-DD, e.g. 2026-11-27")
    results = project / "docs" / "results" if results is None else results
    with tempfile.TemporaryDirectory() as scratch:
        calls, parts = read_returned([Path(folder) for folder in folders], Path(scratch))
        date = date or next((found for line in calls if (found := first(r"(\d{4}-\d{2}-\d{2})T", line))), None)
        if not date:
            raise ConfigError("no date in the summaries' gpu_check lines; give one with --date YYYY-MM-DD")
        stem = f"{date}-gpu-{kind}"
        path = results / f"{stem}.md"
        if path.exists() and not force:
            raise ConfigError(f"{path} exists; pass --force (make gpu-report FORCE=1) to rewrite it")
        text, png = page(calls, parts, kind, date, f"{stem}-flops.png", project)
    for name, part in parts.items():
        if part.problem():
            print(f"nmtbench gpu report: {name}: {part.problem()}", file=sys.stderr)
    results.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    plot = results / f"{stem}-flops.png" if png else None
    if plot:
        plot.write_bytes(png)
    return path, plot
