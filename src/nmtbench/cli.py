"""`nmtbench <command>`: one command per pipeline stage, as called by dvc.yaml, and the commands around them.

The parser is built from the command groups of commands/ and gpu/, each with its handlers.

Expected problems (bad params, missing or corrupt data, a mismatched checkpoint) end with one line
naming the problem and the fix; set NMTBENCH_DEBUG=1 for the full traceback.
"""
from __future__ import annotations

import argparse
import errno
import os
import sys
from functools import partial

from nmtbench import stage_times, warm
from nmtbench.commands import results, running, stages, translate
from nmtbench.config import load_params
from nmtbench.gpu.commands import GPU_HELP, add_gpu_commands
from nmtbench.provenance import version_line
from nmtbench.quiet import quiet_third_parties


def _check(args):
    """Every model block checked, whatever tune.trials is: make repro runs this before dvc repro, which deletes a
    training's train.json and learning curve before `nmtbench train` could refuse the block. The tying is checked
    against the vocabularies params say the tokenize stage makes; analyze's blocks at their width likewise. It
    builds no model, so it imports no torch (but for an own model's module, which holds its config class)."""
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


def shared_options(default) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name. The commands' copies default to SUPPRESS,
    so `nmtbench --params X check` keeps X instead of the command's default overwriting it."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--params", default=default, help="params file (default: params.yaml)")
    return options


def add_command(commands, name: str, run, text: str, parents: list[argparse.ArgumentParser] = ()) -> (
        argparse.ArgumentParser):
    """A command among `commands` (a parser's subparsers) that calls run, with the options every command takes and
    those of parents; with run None, a group of commands."""
    found = commands.add_parser(name, help=text, description=text,
                                parents=[shared_options(argparse.SUPPRESS), *parents])
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
    for group in (stages, results, translate, running):  # in the order nmtbench --help lists them
        group.add_commands(command)
    gpu = command("gpu", None, GPU_HELP)
    add_gpu_commands(partial(add_command, gpu.add_subparsers(
        dest="subcommand", required=True, metavar="command", help="one of these; nmtbench gpu <command> --help "
        "describes it")))
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None and (code := warm.forward(sys.argv[1:])) is not None:  # run by a warm copy (nmtbench warm)
        return code
    args = build_parser().parse_args(argv)
    quiet_third_parties()
    name = " ".join(filter(None, (args.command, getattr(args, "subcommand", None))))  # nmtbench gpu report
    code = 1  # where the command raises what it does not expect
    try:
        code = args.run(args) or 0
    except (ValueError, OSError) as error:
        if os.environ.get("NMTBENCH_DEBUG"):
            raise
        problem = str(error) if isinstance(error, (ValueError, FileNotFoundError)) else system_problem(error)
        print(f"nmtbench {name}: error: {problem}", file=sys.stderr)
        code = 2
    finally:
        stage_times.record(name, sys.argv[1:] if argv is None else list(argv), code)
    return code


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
