"""`nmtbench <stage>`: one command per pipeline stage, as called by dvc.yaml.

Expected problems (bad params, missing or corrupt data, a mismatched checkpoint) end with one line
naming the problem and the fix; set NMTBENCH_DEBUG=1 for the full traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from nmtbench.config import load_params


def _prepare(args, params):
    from nmtbench.data.prepare import prepare
    from nmtbench.data.sources import mirror_from_env

    prepare(params.data, mirror_from_env())


def _tokenize(args, params):
    from nmtbench.data.tokenizer import tokenize

    tokenize(params.tokenize)


def _train(args, params):
    from nmtbench.training.train import train

    print(train(params, args.model))


def _evaluate(args, params):
    from nmtbench.evaluation.evaluate import evaluate

    print(evaluate(params, args.model))


def _compare(args, params):
    from nmtbench.evaluation.compare import compare

    compare(list(params.models))
    print(Path("results/comparison.md").read_text())


def _workspace(args, params):
    from nmtbench.workspace import make_workspace

    print(make_workspace(Path(args.params).parent, Path(args.target), Path(args.profile)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nmtbench", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("prepare", help="read Multi30k (mirror or download), validate, filter, save").set_defaults(run=_prepare)
    commands.add_parser("tokenize", help="train the joint subword model and encode every split").set_defaults(run=_tokenize)
    for name, run, text in (("train", _train, "train one model variant"),
                            ("evaluate", _evaluate, "decode and score the test sets with one model")):
        command = commands.add_parser(name, help=text)
        command.add_argument("model", help="a model name from the models block of params.yaml")
        command.set_defaults(run=run)
    commands.add_parser("compare", help="the side-by-side table of every model").set_defaults(run=_compare)
    workspace = commands.add_parser("workspace", help="a separate DVC workspace running params.yaml + a profile")
    workspace.add_argument("target", help="folder to create or refresh")
    workspace.add_argument("--profile", required=True, help="overrides file, e.g. profiles/smoke.yaml")
    workspace.set_defaults(run=_workspace)

    args = parser.parse_args(argv)
    try:
        args.run(args, load_params(args.params))
    except (ValueError, FileNotFoundError) as error:
        if os.environ.get("NMTBENCH_DEBUG"):
            raise
        print(f"nmtbench {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
