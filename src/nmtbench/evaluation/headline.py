"""The headline of an experiment, each model's scores on the first test set: the DVC metrics and a W&B table.

results/bleu.json is the pipeline's one DVC metrics file: each model's BLEU, a key per model. So `dvc exp
show`, `dvc metrics show` and `dvc metrics diff` show one column per model, BLEU first, instead of the
thousands of keys of the per-run files, which stay cached outputs (nothing is lost). The compare stage
writes it, and logs the headline (BLEU, BLEU lc, chrF) to W&B as one table per experiment.
"""
from __future__ import annotations

from pathlib import Path

from nmtbench.config import WandbConfig
from nmtbench.run_paths import RESULTS
from nmtbench.tracking import experiment_group, finish_run, log_tables, start_run

BLEU_METRICS = RESULTS / "bleu.json"
SCORES = {"bleu": "BLEU", "bleu_lc": "BLEU lc", "chrf": "chrF"}  # key in the comparison -> column of the table


def bleu_metrics(comparison: dict) -> dict[str, float]:
    """{model: BLEU on the first test set, mean over seeds}, in the order of params.yaml."""
    split = comparison["splits"][0]
    return {name: row[split]["bleu"]["mean"] for name, row in comparison["models"].items()}


def table(comparison: dict) -> tuple[list[str], list[list]]:
    """The headline as columns and rows, one row per model: the scores of SCORES on the first test set."""
    split = comparison["splits"][0]
    return ["model", *SCORES.values()], [[name, *(row[split][score]["mean"] for score in SCORES)]
                                         for name, row in comparison["models"].items()]


def log_experiment(cfg: WandbConfig, comparison: dict, root: Path = Path(".")) -> None:
    """One W&B run of job type compare in the experiment's group: the headline as a table and in its summary."""
    split = comparison["splits"][0]
    config = {"models": list(comparison["models"]), "seeds": comparison["seeds"], "baseline": comparison["baseline"],
              "split": split}
    run = start_run(cfg, experiment_group(cfg), root, config, ["comparison"], job_type="compare")
    if run is None:
        return
    columns, rows = table(comparison)
    log_tables(run, {f"headline/{split}": (columns, rows)})
    summary = {f"{split}/{key}/{row[0]}": value for row in rows for key, value in zip(SCORES, row[1:])}
    finish_run(run, summary, comparison["provenance"]["compare"])
