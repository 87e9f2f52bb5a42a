"""`nmtbench <stage>`: the commands dvc.yaml's stages call, one a stage. Each imports its stage's module
when it runs, so that a command loads only what its own work needs (docs/pipeline.md, "What a stage imports")."""
from __future__ import annotations

from collections.abc import Callable

from nmtbench.config import load_params
from nmtbench.run_paths import RESULTS


def _prepare(args):
    from nmtbench.data.prepare import prepare
    from nmtbench.data.sources import mirror_from_env

    summary = prepare(load_params(args.params).data, mirror_from_env())
    print("data/prepared: " + ", ".join(f"{split} {found['pairs']:,} pairs of {found['lines']:,} lines"
                                        for split, found in summary["splits"].items()) + "; details: data/stats.json")


def _tokenize(args):
    from nmtbench.data.tokenizer import tokenize

    tokenizer = tokenize(load_params(args.params).tokenize)
    sizes = (f"a joint subword vocabulary of {tokenizer.source.size:,} pieces" if tokenizer.joint else
             f"subword vocabularies of {tokenizer.source.size:,} source and {tokenizer.target.size:,} target pieces")
    print(f"data/tokenized: {sizes}; every split encoded")


def _train(args):
    from nmtbench.training.train import train
    from nmtbench.training.tuning import tuned_params

    print(train(tuned_params(load_params(args.params).for_model(args.model), args.model), args.model, args.seed))


def _tune(args):
    from nmtbench.training.tuning import tune

    print(tune(load_params(args.params).for_model(args.model), args.model))


def _evaluate(args):
    from nmtbench.evaluation.evaluate import evaluate
    from nmtbench.training.tuning import tuned_params

    # the model is rebuilt from its checkpoint either way; the tuned block is what its W&B run records
    print(evaluate(tuned_params(load_params(args.params).for_model(args.model), args.model), args.model, args.seed))


def _compare(args):
    from nmtbench.data.tokenized import TokenizedSplits
    from nmtbench.evaluation.compare import compare
    from nmtbench.evaluation.headline import log_experiment

    params = load_params(args.params)
    comparison = compare(list(params.models), params.seeds, params.compare, TokenizedSplits(), blocks=params.models,
                         budget=params.train.budget, lang=params.data.tgt_lang, tokenized=params.data.tokenized)
    log_experiment(params.wandb, comparison)
    print((RESULTS / "comparison.md").read_text())


def _beam_sweep(args):
    from nmtbench.evaluation.beam_sweep import beam_sweep

    beam_sweep(load_params(args.params))
    print((RESULTS / "beam_sweep.md").read_text())


def _analyze(args):
    from nmtbench.analysis.analyze import analyze

    analyze(load_params(args.params))
    print((RESULTS / "claims.md").read_text())


def _report(args):
    from nmtbench.evaluation.report import report

    page = report(list(load_params(args.params).models))
    print(f"results/report.html: {len(page.figures)} plots")
    for item in page.missing:
        print(f"missing: {item}")


def add_commands(command: Callable) -> None:
    """The stages' commands, each made by command(name, handler, help text)."""
    command("prepare", _prepare, "read data.source (Multi30k, a folder or a hub dataset), validate, filter, save")
    command("tokenize", _tokenize, "train the joint subword model and encode every split")
    tune = command("tune", _tune, "search the model's hyperparameters on val BLEU (tune.trials trials of "
                   "tune.budget); start it on several machines to share one study")
    tune.add_argument("model", help="a model name from the models block of params.yaml")
    for name, run, text in (("train", _train, "train one model variant with its tuned params, if any"),
                            ("evaluate", _evaluate, "decode and score the test sets with one model")):
        stage = command(name, run, text)
        stage.add_argument("model", help="a model name from the models block of params.yaml")
        stage.add_argument("--seed", type=int, help="which run of the model (default: the first of seeds)")
    command("compare", _compare, "the side-by-side table of every model: scores over seeds, significance, "
            "BLEU by length, examples")
    command("beam-sweep", _beam_sweep, "BLEU and speed of one model over beam sizes and alphas")
    command("analyze", _analyze, "measure the textbook claims about RNNs and Transformers")
    command("report", _report, "results/report.html: the table and every plot on one page")
