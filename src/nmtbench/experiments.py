"""`nmtbench experiments`: every model's BLEU in the workspace and in each DVC experiment, side by side.

It reads `dvc exp show --json`: its columns are the workspace, each baseline commit and each of that
commit's experiments, in that order; its rows the models, each cell the model's BLEU from
results/bleu.json (a dash where a column lacks it). A second table lists the params whose values differ
between the columns. Both are split into blocks of columns that fit the terminal's width.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nmtbench.evaluation.headline import BLEU_METRICS
from nmtbench.tables import Table, dash

MAIN_PARAMS = "params.yaml"  # its keys are shown bare; another params file's as <file>:<key>


def experiments(width: int, project: Path = Path(".")) -> str:
    """The BLEU table and the table of params that differ, each in blocks no wider than width."""
    columns = columns_of(dvc_exp_show(project))
    bleu = {label: scores_of(data) for label, data in columns.items()}
    models = list(dict.fromkeys(model for scores in bleu.values() for model in scores))
    params = {label: flat_params(data.get("params") or {}) for label, data in columns.items()}
    differing = [key for key in dict.fromkeys(key for found in params.values() for key in found)
                 if len({json.dumps(found.get(key)) for found in params.values()}) > 1]
    parts = [f"BLEU of every model ({BLEU_METRICS}: the first test set, mean over seeds):"]
    if models:
        parts += blocks(Table(["model", *columns], [[model, *(dash(bleu[label].get(model), ".2f") for label in columns)]
                                                    for model in models], "l" + "r" * len(columns)), width)
    else:
        parts.append(f"none yet: no column has {BLEU_METRICS}; `dvc repro` (or `dvc exp run`) writes it")
    parts.append("Params that differ:" if differing else "Params that differ: none.")
    if differing:
        parts += blocks(Table(["param", *columns], [[key, *(_value(params[label], key) for label in columns)]
                                                    for key in differing], "l" * (len(columns) + 1)), width)
    return "\n\n".join(parts)


def dvc_exp_show(project: Path) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "dvc", "exp", "show", "--json"], cwd=project,
                          capture_output=True, text=True)
    if done.returncode != 0:
        problem = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ValueError(f"`dvc exp show --json` failed ({problem.removeprefix('ERROR: ')}); run nmtbench "
                         "experiments in the project's folder, or in a workspace that `nmtbench workspace` made")
    return json.loads(done.stdout)


def columns_of(shown: list[dict]) -> dict[str, dict]:
    """{label: DVC's data} of the workspace, each baseline commit (its branch name, else its short hash) and each
    of the commit's experiments (their names), in the order `dvc exp show` lists them."""
    def label(rev: dict) -> str:
        return rev["name"] or (rev["rev"] if rev["rev"] == "workspace" else rev["rev"][:7])

    found = {}
    for row in shown:
        found[label(row)] = row.get("data") or {}
        for experiment in row.get("experiments") or []:
            found.update({label(rev): rev.get("data") or {} for rev in experiment["revs"]})
    return found


def scores_of(data: dict) -> dict:
    """{model: BLEU} of one column; {} for a column without results/bleu.json (queued, failed, or older)."""
    return (((data.get("metrics") or {}).get(BLEU_METRICS.as_posix()) or {}).get("data")) or {}


def flat_params(files: dict) -> dict:
    """{"train.lr": 0.001, ...} of DVC's {file: {"data": params}}."""
    flat = {}

    def walk(value, prefix: str, path: tuple[str, ...]) -> None:
        if isinstance(value, dict) and value:
            for name, item in value.items():
                walk(item, prefix, (*path, str(name)))
        else:
            flat[prefix + ".".join(path)] = value

    for file, content in files.items():
        walk((content or {}).get("data") or {}, "" if file == MAIN_PARAMS else f"{file}:", ())
    return flat


def blocks(table: Table, width: int) -> list[str]:
    """The table as aligned text, its columns after the first cut into blocks that each fit width."""
    def block(indices: list[int]) -> Table:
        return Table([table.header[0], *(table.header[i] for i in indices)],
                     [[row[0], *(row[i] for i in indices)] for row in table.rows],
                     table.align[0] + "".join(table.align[i] for i in indices))

    def fits(indices: list[int]) -> bool:
        return len(block(indices).text().splitlines()[0]) <= width

    found, current = [], []
    for i in range(1, len(table.header)):
        if current and not fits([*current, i]):
            found.append(current)
            current = []
        current.append(i)
    return [block(indices).text() for indices in [*found, current]]


def _value(params: dict, key: str) -> str:
    if key not in params:
        return "-"
    value = params[key]
    return value if isinstance(value, str) else json.dumps(value)
