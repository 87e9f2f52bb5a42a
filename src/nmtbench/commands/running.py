"""`nmtbench launch`, `converge`, `warm` and `workspace`: the stages run as jobs, every run trained to its own
stopping, the stages forked from a warm interpreter, and workspaces of profiles to run them in."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from nmtbench.config import ConfigError, LaunchConfig, load_params


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


def _warm(args):
    from nmtbench import warm

    command = args.to_run[1:] if args.to_run[:1] == ["--"] else args.to_run
    if not command:
        raise ConfigError("warm: name the command to run, e.g. nmtbench warm -- dvc repro")
    return warm.run(command)


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


def jobs_options() -> argparse.ArgumentParser:
    """--jobs and --threads, which launch and converge share: how many jobs at once, and each one's threads."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--jobs", type=int, help="jobs at once: stages for launch, trainings for converge "
                         "(default: launch.jobs)")
    options.add_argument("--threads", type=int, help="torch threads of each job (default: launch.threads_per_job); "
                         "1 leaves a core to a second workspace converging beside it")
    return options


def add_commands(command: Callable) -> None:
    """The commands that run the stages, each made by command(name, handler, help text, parents)."""
    jobs = [jobs_options()]
    launch = command("launch", _launch, "run the out-of-date stages as concurrent jobs (local processes or SLURM "
                     "jobs through submitit), each recorded in dvc.lock as dvc repro does; params.yaml's launch block "
                     "says how (docs/scaling.md)", jobs)
    launch.add_argument("stages", nargs="*", help="only these stages and what they need (default: every stage)")
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
                       "what was interrupted (docs/training.md)", jobs)
    converge.add_argument("models", nargs="*", help="models to start first, in this order (default: params.yaml's)")
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
    warm = command("warm", _warm, "run a command (dvc repro, make repro does) with the nmtbench stages it starts "
                   "forked from one interpreter that imported torch and Lightning once: each stage starts in a "
                   "fraction of a second (docs/pipeline.md)")
    warm.add_argument("to_run", nargs=argparse.REMAINDER, metavar="command",
                      help="the command and its arguments, after --")
    workspace = command("workspace", _workspace, "a separate DVC workspace running params.yaml + profiles")
    workspace.add_argument("target", help="folder to create or refresh")
    workspace.add_argument("--profile", required=True, action="append",
                           help="overrides file, e.g. profiles/smoke.yaml; give it again to merge several in order, "
                           "a later one winning (your corpus, then the smoke sizes)")
    workspace.add_argument("--force", action="store_true",
                           help="replace the files there that nmtbench workspace did not write or that were edited "
                           "since, keeping each as <file>.bak-<time>")
