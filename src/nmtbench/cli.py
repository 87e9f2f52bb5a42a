"""`nmtbench <stage>`: one command per pipeline stage, as called by dvc.yaml.

Expected problems (bad params, missing or corrupt data, a mismatched checkpoint) end with one line
naming the problem and the fix; set NMTBENCH_DEBUG=1 for the full traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from nmtbench.config import DecodeConfig, load_params


def _prepare(args):
    from nmtbench.data.prepare import prepare
    from nmtbench.data.sources import mirror_from_env

    prepare(load_params(args.params).data, mirror_from_env())


def _tokenize(args):
    from nmtbench.data.tokenizer import tokenize

    tokenize(load_params(args.params).tokenize)


def _train(args):
    from nmtbench.training.train import train

    print(train(load_params(args.params), args.model, args.seed))


def _evaluate(args):
    from nmtbench.evaluation.evaluate import evaluate

    print(evaluate(load_params(args.params), args.model, args.seed))


def _compare(args):
    from nmtbench.data.tokenizer import load_tokenized
    from nmtbench.evaluation.compare import compare

    params = load_params(args.params)
    compare(list(params.models), params.seeds, params.compare, load_tokenized())
    print(Path("results/comparison.md").read_text())


def _beam_sweep(args):
    from nmtbench.evaluation.beam_sweep import beam_sweep

    beam_sweep(load_params(args.params))
    print(Path("results/beam_sweep.md").read_text())


def _analyze(args):
    from nmtbench.analysis.analyze import analyze

    analyze(load_params(args.params))
    print(Path("results/claims.md").read_text())


def _report(args):
    from nmtbench.evaluation.report import report

    page = report(list(load_params(args.params).models))
    print(f"results/report.html: {len(page.figures)} plots")
    for item in page.missing:
        print(f"missing: {item}")


def _dashboard(args):
    from nmtbench.dashboard import dashboard

    params = load_params(args.params)
    print(dashboard(params.wandb, params.data.eval_splits[0]))


def _translate(args):
    import dataclasses

    from tqdm import tqdm

    from nmtbench.decoding.translator import Translator

    overrides = {key: value for key, value in (("beam", args.beam), ("alpha", args.alpha)) if value is not None}
    defaults = load_params(args.params).evaluate if Path(args.params).is_file() else DecodeConfig()
    cfg = dataclasses.replace(defaults, **overrides)
    translator = Translator.from_model_dir(Path(args.model_dir), cfg)
    from_file = args.input != "-"
    with (open(args.input, encoding="utf-8") if from_file else sys.stdin) as source:
        sentences = [line.rstrip("\n") for line in source]
    with tqdm(total=len(sentences), unit="sent", file=sys.stderr, disable=not from_file) as progress:
        found = translator.translate(sentences, args.nbest, args.batch_tokens, progress)
    for i, hyps in enumerate(found):
        for text, score in hyps:
            print(text if args.nbest == 1 else f"{i} ||| {text} ||| {score:.4f}")


def _workspace(args):
    from nmtbench.workspace import make_workspace

    print(make_workspace(Path(args.params).parent, Path(args.target), Path(args.profile)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nmtbench", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("prepare", help="read Multi30k (mirror or download), validate, filter, save"
                        ).set_defaults(run=_prepare)
    commands.add_parser("tokenize", help="train the joint subword model and encode every split"
                        ).set_defaults(run=_tokenize)
    for name, run, text in (("train", _train, "train one model variant"),
                            ("evaluate", _evaluate, "decode and score the test sets with one model")):
        command = commands.add_parser(name, help=text)
        command.add_argument("model", help="a model name from the models block of params.yaml")
        command.add_argument("--seed", type=int, help="which run of the model (default: the first of seeds)")
        command.set_defaults(run=run)
    commands.add_parser("compare", help="the side-by-side table of every model: scores over seeds, "
                        "significance, BLEU by length, examples").set_defaults(run=_compare)
    commands.add_parser("beam-sweep", help="BLEU and speed of one model over beam sizes and alphas"
                        ).set_defaults(run=_beam_sweep)
    commands.add_parser("analyze", help="measure the textbook claims about RNNs and Transformers"
                        ).set_defaults(run=_analyze)
    commands.add_parser("report", help="results/report.html: the table and every plot on one page"
                        ).set_defaults(run=_report)
    commands.add_parser("dashboard", help="a W&B report comparing the runs (needs a W&B account)"
                        ).set_defaults(run=_dashboard)
    translate = commands.add_parser("translate", help="translate a file or standard input with a trained model")
    translate.add_argument("model_dir", help="a trained model folder, e.g. models/transformer/seed42")
    translate.add_argument("input", nargs="?", default="-", help="one sentence per line (default: standard input)")
    translate.add_argument("--beam", type=int, help="beam size (default: evaluate.beam of params.yaml)")
    translate.add_argument("--alpha", type=float, help="length penalty strength (default: evaluate.alpha)")
    translate.add_argument("--nbest", type=int, default=1, help="print the n best as 'line ||| text ||| score'")
    translate.add_argument("--batch-tokens", type=int, help="at most this many padded source tokens per batch")
    translate.set_defaults(run=_translate)
    workspace = commands.add_parser("workspace", help="a separate DVC workspace running params.yaml + a profile")
    workspace.add_argument("target", help="folder to create or refresh")
    workspace.add_argument("--profile", required=True, help="overrides file, e.g. profiles/smoke.yaml")
    workspace.set_defaults(run=_workspace)

    args = parser.parse_args(argv)
    try:
        args.run(args)
    except (ValueError, FileNotFoundError) as error:
        if os.environ.get("NMTBENCH_DEBUG"):
            raise
        print(f"nmtbench {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
