"""`nmtbench beside`, `dashboard` and `experiments`: the results read side by side, on W&B and across DVC
experiments."""
from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from nmtbench.config import load_params


def _beside(args):
    from nmtbench.evaluation.side_by_side import markdown

    tested = None
    if args.translations:
        from nmtbench.data.prepare import load_prepared

        tested = {"folders": args.translations, "references": lambda split: list(load_prepared(args.references)[
            split]["tgt"]), "resamples": args.resamples, "seed": args.bootstrap_seed}
    page = markdown(args.comparisons, tested)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(page)
    print(page, end="")


def _dashboard(args):
    from nmtbench.dashboard import dashboard

    params = load_params(args.params)
    print(dashboard(params.wandb, params.data.eval_splits[0]))


def _experiments(args):
    from nmtbench.experiments import experiments

    print(experiments(shutil.get_terminal_size().columns))


def add_commands(command: Callable) -> None:
    """The results' commands, each made by command(name, handler, help text)."""
    beside = command("beside", _beside, "two comparisons of one grid side by side (equal budget and converged, two "
                     "recipes, two machines): BLEU and place, every verdict and whether it changed, the pairs "
                     "whose order reverses (docs/evaluation.md)")
    beside.add_argument("comparisons", nargs=2, metavar="LABEL=PATH",
                        help="a label and a results/comparison.json, e.g. 'converged=runs/converge/results/"
                        "comparison.json'")
    beside.add_argument("--out", type=Path, help="also write the Markdown page there")
    beside.add_argument("--translations", nargs=2, type=Path, metavar="DIR",
                        help="each comparison's translations, in the same order (folders of <model>/seed<seed>/"
                        "<split>.txt: results/, or an export of nmtbench converge): test each reversed pair")
    beside.add_argument("--references", type=Path, default=Path("data/prepared"),
                        help="the prepared data whose test references both comparisons scored (default data/prepared)")
    beside.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples of each test (default 1000)")
    beside.add_argument("--bootstrap-seed", type=int, default=12345, help="fixes the resamples (default 12345)")
    command("dashboard", _dashboard, "a W&B report comparing the runs (needs a W&B account)")
    command("experiments", _experiments, "models x experiments: each model's BLEU in the workspace and every DVC "
            "experiment (dvc exp show), and the params that differ")
