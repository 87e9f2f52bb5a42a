"""`nmtbench <stage>`: one command per pipeline stage, as called by dvc.yaml.

Expected problems (bad params, missing or corrupt data, a mismatched checkpoint) end with one line
naming the problem and the fix; set NMTBENCH_DEBUG=1 for the full traceback.
"""
from __future__ import annotations

import argparse
import codecs
import errno
import os
import select
import shutil
import sys
from functools import partial
from pathlib import Path

from nmtbench.config import ConfigError, DecodeConfig, LaunchConfig, load_params
from nmtbench.gpu.commands import GPU_HELP, add_gpu_commands
from nmtbench.provenance import version_line
from nmtbench.quiet import quiet_third_parties
from nmtbench.runs import RESULTS


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
    from nmtbench.data.tokenizer import load_tokenized
    from nmtbench.evaluation.compare import compare
    from nmtbench.evaluation.headline import log_experiment

    params = load_params(args.params)
    comparison = compare(list(params.models), params.seeds, params.compare, load_tokenized(), blocks=params.models,
                         budget=params.train.budget, lang=params.data.tgt_lang, tokenized=params.data.tokenized)
    log_experiment(params.wandb, comparison)
    print((RESULTS / "comparison.md").read_text())


def _beside(args):
    from nmtbench.evaluation.beside import markdown

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


def _dashboard(args):
    from nmtbench.dashboard import dashboard

    params = load_params(args.params)
    print(dashboard(params.wandb, params.data.eval_splits[0]))


def _experiments(args):
    from nmtbench.experiments import experiments

    print(experiments(shutil.get_terminal_size().columns))


def _translate(args):
    from nmtbench.decoding.translator import Translator
    from nmtbench.loading import resolve_device
    from nmtbench.progress import progress_bar

    for option, value, smallest in (("--beam", args.beam, 1), ("--nbest", args.nbest, 1),
                                    ("--batch-tokens", args.batch_tokens, 1), ("--alpha", args.alpha, 0)):
        if value is not None and value < smallest:
            raise ConfigError(f"{option}: must be at least {smallest}, got {value}")
    overrides = {key: value for key, value in (("beam", args.beam), ("alpha", args.alpha),
                                               ("batch_tokens", args.batch_tokens), ("device", args.device))
                 if value is not None}
    defaults = load_params(args.params).evaluate if Path(args.params).is_file() else DecodeConfig()
    cfg = defaults.model_copy(update=overrides)
    if args.nbest > cfg.beam:
        raise ConfigError(f"--nbest: {args.nbest} is more than the beam size {cfg.beam}; raise --beam to at least "
                          f"{args.nbest}")
    resolve_device(cfg.device, "--device" if args.device else "evaluate.device")  # before loading anything
    translator = Translator.from_model_dir(Path(args.model_dir), cfg)
    if args.input == "-":  # line by line as it comes: each chunk's translations are written before the next is read
        done = 0
        for chunk in stdin_chunks(cfg.batch_size):
            say_too_long(write_translations(translator, chunk, args.nbest, done), translator.longest)
            done += len(chunk)
        return
    sentences = read_input(args.input)
    with progress_bar(len(sentences), "translating", "sent") as progress:
        too_long = write_translations(translator, sentences, args.nbest, 0, progress)
    say_too_long(too_long, translator.longest)


def write_translations(translator, sentences: list[str], nbest: int, first: int, progress=None) -> dict[int, int]:
    """The translations of sentences, lines first + 1 on of the input, to standard output, flushed; returns the
    index and length of each line too long for the model's positions, which costs that line (left empty), not the
    others."""
    too_long: dict[int, int] = {}
    found = translator.translate(sentences, nbest, progress, too_long)
    for i, hyps in enumerate(found, start=first):
        for text, score in hyps:
            print(text if nbest == 1 else f"{i} ||| {text} ||| {score:.4f}")
    sys.stdout.flush()
    return {first + index: length for index, length in too_long.items()}


def say_too_long(too_long: dict[int, int], longest: int | None) -> None:
    for index, length in too_long.items():
        print(f"nmtbench translate: line {index + 1} has {length:,} tokens, {length - longest:,} more than the "
              f"{longest:,} this model translates (max_positions of its model block); its output line is left "
              "empty", file=sys.stderr)


def read_input(name: str) -> list[str]:
    """The lines of a UTF-8 text file, refusing anything else in one line (standard input: stdin_chunks)."""
    path = Path(name)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder; pass a text file with one sentence per line, or - for standard input")
    if not path.is_file():
        raise ConfigError(f"{path}: no such input file; pass a text file with one sentence per line")
    lines = path.read_bytes().removeprefix(codecs.BOM_UTF8).split(b"\n")  # a byte-order mark is no sentence's text
    if lines[-1] == b"":  # the newline that ends the last line starts no new one
        lines.pop()
    return [text_line(line, number, str(path)) for number, line in enumerate(lines, start=1)]


def text_line(line: bytes, number: int, label: str) -> str:
    """One input line as text, or a one-line refusal naming the line: not UTF-8, or binary."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{label}, line {number}: not UTF-8 text ({e.reason} at byte {e.start}); convert the "
                          "input to UTF-8, e.g. iconv -f latin1 -t utf-8") from None
    if "\0" in text:
        raise ConfigError(f"{label}, line {number}: holds a NUL byte, so it is binary, not text; "
                          "pass a text file with one sentence per line")
    return text.removesuffix("\r")


def stdin_chunks(most: int):
    """Standard input's lines, checked as a file's are, in chunks of the lines that have arrived, `most` at the
    most: a line typed at a terminal is translated once it ends, a piped file in batches. Read from the descriptor,
    past Python's buffer, so that select tells whether more has arrived; a stream without one (a test's) is read
    whole before the first chunk's end is decided."""
    stream = sys.stdin.buffer
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        fd = None

    def arrived() -> bool:
        return fd is None or bool(select.select([fd], [], [], 0)[0])

    pending, number, chunk = b"", 0, []
    while True:
        if b"\n" not in pending:
            block = os.read(fd, 1 << 16) if fd is not None else stream.read(1 << 16)
            if block:
                pending += block
                continue
            if not pending:  # the end of the input, its last line ended by a newline (or empty)
                break
            pending += b"\n"  # a last line without a newline ending it
        line, pending = pending.split(b"\n", 1)
        number += 1
        chunk.append(text_line(line.removeprefix(codecs.BOM_UTF8) if number == 1 else line, number, "standard input"))
        if len(chunk) >= most or (b"\n" not in pending and not arrived()):
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _check(args):
    """Every model block built, whatever tune.trials is: make repro runs this before dvc repro, which deletes a
    training's train.json and learning curve before `nmtbench train` could refuse the block. The tying is checked
    against the vocabularies params say the tokenize stage makes; analyze's blocks at their width likewise."""
    from nmtbench.analysis.sizing import at_width
    from nmtbench.models.registry import model_config
    from nmtbench.models.vocabulary import Vocab

    params = load_params(args.params)
    for name, block in params.models.items():
        model_config(name, block, Vocab.planned(params.tokenize))
    if params.analyze is not None:
        for name, block in params.analyze.models.items():
            model_config(name, at_width(name, block, params.analyze.width))
    if params.tune.trials:  # each model's search space against its family, before any stage runs
        from nmtbench.training.tuning import search_space

        for model in params.models:
            search_space(params, model)
    print(f"{args.params}: valid ({len(params.models)} models x {len(params.seeds)} seeds)")


def _launch(args):
    from nmtbench.launch import launch

    _check_at_least_one(args)
    if args.time_limit is not None and args.time_limit <= 0:
        raise ConfigError(f"--time-limit: must be a positive number of seconds, got {args.time_limit:g}")
    if not Path("dvc.yaml").is_file():  # DVC's own line ("not inside of a DVC repository") names no fix
        raise ConfigError(f"{Path.cwd()}: no dvc.yaml here; run nmtbench launch in the project's folder or in a "
                          "workspace (nmtbench workspace runs/mine --profile profiles/smoke.yaml)")
    params = load_params(args.params) if Path(args.params).is_file() else None
    cfg = params.launch if params else LaunchConfig()
    overrides = {key: value for key, value in (("jobs", args.jobs), ("threads_per_job", args.threads),
                                               ("executor", args.executor)) if value is not None}
    return launch(cfg.model_copy(update=overrides), targets=args.stages, train=params and params.train,
                  without_dvc=args.without_dvc, single_item=args.single_item, time_limit=args.time_limit)


def _converge(args):
    from nmtbench.launch import converge as actions

    _check_at_least_one(args)
    if args.baseline and args.compare is None:
        raise ConfigError("--baseline: only --compare reads it; add --compare FOLDER, or leave --baseline out")
    exported = args.exported and Path(args.exported) / "params.yaml"  # an export carries the params its runs had
    if exported and exported.parent.is_dir() and not exported.is_file():  # its runs would read as this recipe's
        raise ConfigError(f"--from {args.exported}: no params.yaml, the recipe its runs trained with (--export copies "
                          "it there); put it back from where they were exported, or leave --from out")
    recipe = load_params(exported) if exported and exported.is_file() else None
    reading = args.curves or args.table or args.plot or args.page or args.compare is not None  # the export's runs
    params = recipe if reading and recipe else load_params(args.params)
    # the curves and the plot so far join this workspace's runs the export lacks (make headline's checkout has none)
    here = load_params(args.params) if reading and recipe and Path(args.params).is_file() else None
    if args.curves:
        return actions.print_curves(params, args.exported, here)
    if args.page is not None:
        return actions.write_page(params, args.page, args.jobs, args.exported, here, recipe)
    if args.table:
        return actions.print_table(params, args.exported)
    if args.plot is not None:
        return actions.draw_plot(params, args.plot, args.exported, here)
    if args.compare is not None:
        return actions.compare_so_far(params, args.compare, args.baseline, args.exported)
    if args.export is not None:
        return actions.export(params, args.export)
    return actions.converge(params, args.jobs, args.models, args.threads, status_only=args.status,
                            exported=args.exported, recipe=recipe)


def _check_at_least_one(args) -> None:
    """--jobs and --threads, where given, count at least one."""
    for option in ("jobs", "threads"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise ConfigError(f"--{option}: must be at least 1, got {value}")


def _workspace(args):
    from nmtbench.profiles import make_workspace

    print(make_workspace(Path(args.params).parent, Path(args.target), [Path(name) for name in args.profile],
                         force=args.force))


def shared_options(default) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name. The commands' copies default to SUPPRESS,
    so `nmtbench --params X check` keeps X instead of the command's default overwriting it."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--params", default=default, help="params file (default: params.yaml)")
    return options


def add_command(commands, name: str, run, text: str) -> argparse.ArgumentParser:
    """A command among `commands` (a parser's subparsers) that calls run; with run None, a group of commands."""
    found = commands.add_parser(name, help=text, description=text, parents=[shared_options(argparse.SUPPRESS)])
    if run:
        found.set_defaults(run=run)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nmtbench", description=__doc__.splitlines()[0],
                                     parents=[shared_options("params.yaml")])
    parser.add_argument("--version", action="version", version=version_line(),
                        help="print the version and the git commit of the code, then exit")
    command = partial(add_command, parser.add_subparsers(dest="command", required=True, metavar="command",
                                                         help="one of these; nmtbench <command> --help describes it"))
    command("check", _check, "validate every block of the params file (make repro runs it before dvc repro, "
            "which deletes a stage's outputs before the stage can refuse bad params)")
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
    command("beam-sweep", _beam_sweep, "BLEU and speed of one model over beam sizes and alphas")
    command("analyze", _analyze, "measure the textbook claims about RNNs and Transformers")
    command("report", _report, "results/report.html: the table and every plot on one page")
    command("dashboard", _dashboard, "a W&B report comparing the runs (needs a W&B account)")
    command("experiments", _experiments, "models x experiments: each model's BLEU in the workspace and every DVC "
            "experiment (dvc exp show), and the params that differ")
    translate = command("translate", _translate, "translate a file or standard input with a trained model")
    translate.add_argument("model_dir", help="a trained model folder, e.g. models/transformer/seed42")
    translate.add_argument("input", nargs="?", default="-", help="one sentence per line (default: standard input)")
    translate.add_argument("--beam", type=int, help="beam size (default: evaluate.beam of params.yaml)")
    translate.add_argument("--alpha", type=float, help="length penalty strength (default: evaluate.alpha)")
    translate.add_argument("--nbest", type=int, default=1, help="print the n best as 'line ||| text ||| score'")
    translate.add_argument("--batch-tokens", type=int,
                           help="at most this many padded source tokens per batch (default: evaluate.batch_tokens)")
    translate.add_argument("--device", choices=("auto", "cpu", "cuda"),
                           help="where to decode; auto: cuda when present (default: evaluate.device)")
    launch = command("launch", _launch, "run the out-of-date stages as concurrent jobs (local processes or SLURM "
                     "jobs through submitit), each recorded in dvc.lock as dvc repro does; params.yaml's launch block "
                     "says how (docs/scaling.md)")
    launch.add_argument("stages", nargs="*", help="only these stages and what they need (default: every stage)")
    launch.add_argument("--jobs", type=int, help="stages at once (default: launch.jobs)")
    launch.add_argument("--threads", type=int, help="torch threads of each stage (default: launch.threads_per_job)")
    launch.add_argument("--executor", choices=("auto", "local", "slurm", "process"), help="default: launch.executor")
    launch.add_argument("--single-item", action="store_true",
                        help="the named stages alone, not what they wait for (as dvc repro --single-item)")
    launch.add_argument("--without-dvc", action="store_true",
                        help="on a machine without dvc: dvc.yaml's commands run directly, a stage when one of its "
                        "outputs is missing or what it waits for ran; nothing recorded (docs/scaling.md)")
    launch.add_argument("--time-limit", type=float, metavar="SECONDS",
                        help="cancel the running jobs and start no more after this long; what finished stays")
    converge = command("converge", _converge, "train every run to its own stopping and evaluate it, N at once: says "
                       "what is left and how long it should take, then starts what has not finished and resumes "
                       "what was interrupted (docs/training.md)")
    converge.add_argument("models", nargs="*", help="models to start first, in this order (default: params.yaml's)")
    converge.add_argument("--jobs", type=int, help="trainings at once (default: launch.jobs)")
    converge.add_argument("--threads", type=int, help="torch threads of each training (default: "
                          "launch.threads_per_job): 1 leaves a core to a second workspace converging beside it")
    only = converge.add_mutually_exclusive_group()  # each flag does one job of its own, besides training
    only.add_argument("--status", action="store_true", help="only say what is left")
    only.add_argument("--curves", action="store_true",
                      help="only print every run's val BLEU at each epoch so far, as a markdown table")
    only.add_argument("--export", type=Path, metavar="FOLDER",
                      help="only copy every evaluated run's train.json, learning curve, eval.json and test "
                      "translations to FOLDER/<model>/seed<seed>/, to commit them")
    only.add_argument("--plot", type=Path, metavar="PNG",
                      help="only draw every run's val BLEU against training FLOPs so far, the families' swap "
                      "marked, into PNG (make converge PLOT=<png>)")
    only.add_argument("--page", type=Path, metavar="MARKDOWN",
                      help="only rewrite the blocks a results page marks, <!-- converge:status -->, <!-- "
                      "converge:curves -->, <!-- converge:table -->, <!-- converge:headline --> (one row a model, "
                      "mean ± sd over seeds) and <!-- converge:plot <png> --> (each to <!-- /converge:<name> -->), "
                      "with what --status, --curves, --table and --plot give now (make converge PAGE=<page>; make "
                      "headline: the README's table)")
    only.add_argument("--table", action="store_true",
                      help="only print every evaluated run's size, best checkpoint, stopping and scores on each "
                      "test set, as a markdown table, the best first (make headline)")
    only.add_argument("--compare", type=Path, metavar="FOLDER",
                      help="only run the compare stage over the models finished so far, into FOLDER "
                      "(comparison.md and .json): intervals, p-values and verdicts while the grid still trains")
    converge.add_argument("--baseline", metavar="MODEL",
                          help="--compare's baseline (default: compare.baseline, which must have finished)")
    converge.add_argument("--from", type=Path, metavar="FOLDER", dest="exported",
                          help="--curves, --plot, --page, --table and --compare read the runs --export copied to "
                          "FOLDER, with "
                          "the params.yaml it copied there, not this workspace's (make headline); otherwise the runs "
                          "finished there count as done and are not trained here (a new machine: make converge "
                          "FROM=FOLDER)")
    gpu = command("gpu", None, GPU_HELP)
    add_gpu_commands(partial(add_command, gpu.add_subparsers(
        dest="subcommand", required=True, metavar="command", help="one of these; nmtbench gpu <command> --help "
        "describes it")))
    workspace = command("workspace", _workspace, "a separate DVC workspace running params.yaml + profiles")
    workspace.add_argument("target", help="folder to create or refresh")
    workspace.add_argument("--profile", required=True, action="append",
                           help="overrides file, e.g. profiles/smoke.yaml; give it again to merge several in order, "
                           "a later one winning (your corpus, then the smoke sizes)")
    workspace.add_argument("--force", action="store_true",
                           help="replace the files there that nmtbench workspace did not write or that were edited "
                           "since, keeping each as <file>.bak-<time>")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet_third_parties()
    try:
        code = args.run(args)
    except (ValueError, OSError) as error:
        if os.environ.get("NMTBENCH_DEBUG"):
            raise
        problem = str(error) if isinstance(error, (ValueError, FileNotFoundError)) else system_problem(error)
        name = " ".join(filter(None, (args.command, getattr(args, "subcommand", None))))  # nmtbench gpu report
        print(f"nmtbench {name}: error: {problem}", file=sys.stderr)
        return 2
    return code or 0


# what to do about the operating system refusing a read or a write
SYSTEM_FIXES = {errno.ENOSPC: "free disk space", errno.EDQUOT: "free disk space (or raise the quota)",
                errno.EACCES: "make it writable (chmod u+w) or run where you can write",
                errno.EPERM: "make it writable (chmod u+w) or run where you can write",
                errno.EROFS: "run on a writable file system"}


def system_problem(error: OSError) -> str:
    """One line for a refused read or write; the atomic writers leave every earlier output as it was."""
    where = f"{error.filename}: " if error.filename else ""
    fix = SYSTEM_FIXES.get(error.errno, "check the path and the disk")
    return f"{where}{error.strerror or error}; {fix}, then rerun (outputs written before are unchanged)"


if __name__ == "__main__":
    sys.exit(main())
