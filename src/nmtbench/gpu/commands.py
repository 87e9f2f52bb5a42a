"""`nmtbench gpu <command>`: the commands of a GPU machine lent for minutes (docs/gpu.md). Each imports its module
when it runs, so that `nmtbench --help` and every other command load none of them."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

GPU_HELP = ("a GPU machine lent for minutes (docs/gpu.md): the grid its calls train in a fixed wall time, more time "
            "for the runs it stopped, the packing measured, and the results page from what the calls returned")


def _timed_grid(args):
    from nmtbench.gpu.timed_grid import EVALUATE_SECONDS, STARTUP_SECONDS, setting, timed_grid

    return timed_grid(Path(args.params).parent, args.folder, args.profile, [setting(text) for text in args.set],
                      args.tokenized, args.seconds, args.jobs, args.models, args.tiny_models,
                      args.startup_seconds or STARTUP_SECONDS, args.evaluate_seconds or EVALUATE_SECONDS,
                      compare=not args.no_compare)


def _timed_grid_more(args):
    from nmtbench.gpu.timed_grid import EVALUATE_SECONDS, STARTUP_SECONDS, more_grid

    return more_grid(args.folder, args.seconds, args.jobs, args.startup_seconds or STARTUP_SECONDS,
                     args.evaluate_seconds or EVALUATE_SECONDS)


def _probe_jobs(args):
    from nmtbench.gpu.probe import probe_jobs
    from nmtbench.gpu.timed_grid import STARTUP_SECONDS, setting

    return probe_jobs(Path(args.params).parent, args.folder, args.profile, [setting(text) for text in args.set],
                      args.tokenized, args.levels, args.train_seconds, args.model, args.tiny_models,
                      args.startup_seconds or STARTUP_SECONDS)


def _report(args):
    from nmtbench.gpu.page import write_gpu_page

    page, plot = write_gpu_page(args.folders, args.kind, args.date, force=args.force,
                                project=Path(args.params).parent)
    print(f"wrote {page}" + (f" and {plot.name}" if plot else ""))


def add_gpu_commands(command: Callable[[str, Callable, str], argparse.ArgumentParser]) -> None:
    """The gpu group's commands, each made by command(name, handler, help text) with the options every command
    takes."""
    timed = command("timed-grid", _timed_grid, "every run of params.yaml + profiles trained, evaluated and compared "
                    "within a fixed wall time, N at once, on a machine with or without dvc (docs/gpu.md)")
    probe = command("probe-jobs", _probe_jobs, "how many trainings at once move the most target tokens through this "
                    "machine: 1, 4, 8 ... trainings of one model for a few seconds each (docs/gpu.md)")
    for found in (timed, probe):
        found.add_argument("folder", type=Path, help="the workspace to write (created when missing)")
        found.add_argument("--profile", type=Path, action="append", default=[], help="merged in order")
        found.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                           help="a dotted key and a YAML value, after the profiles, e.g. train.lr=0.005")
        found.add_argument("--tokenized", type=Path, required=True,
                           help="a tokenized corpus (a project's data/tokenized) to train on")
        found.add_argument("--tiny-models", type=Path,
                           help="a profile whose models block shrinks the models (profiles/smoke.yaml: a rehearsal)")
        found.add_argument("--startup-seconds", type=float,
                           help="a run's allowance to start tune@ and train@ (default: a 16-core GPU machine's, 25)")
    timed.add_argument("--seconds", type=float, required=True, help="the whole run's wall time")
    timed.add_argument("--models", nargs="*", help="only these models of the merged params (default: all)")
    timed.add_argument("--jobs", type=int, help="trainings at once (default: every run at once; probe-jobs measures "
                       "one)")
    timed.add_argument("--evaluate-seconds", type=float,
                       help="a run's allowance for evaluate@ (default: a 16-core GPU machine's, 35)")
    timed.add_argument("--no-compare", action="store_true", help="train and evaluate only")
    more = command("timed-grid-more", _timed_grid_more, "a timed grid's runs that its time budget stopped before "
                   "early stopping, given more time in the same folder: they go on from their last checkpoints "
                   "(docs/gpu.md)")
    more.add_argument("folder", type=Path, help="the workspace nmtbench gpu timed-grid wrote")
    more.add_argument("--seconds", type=float, required=True, help="this run's wall time")
    more.add_argument("--jobs", type=int, help="trainings at once (default: every unfinished run at once)")
    more.add_argument("--startup-seconds", type=float, help="as timed-grid's")
    more.add_argument("--evaluate-seconds", type=float, help="as timed-grid's")
    probe.add_argument("--levels", type=int, nargs="+", default=[1, 4, 8],
                       help="the numbers of trainings at once to measure (default: 1 4 8)")
    probe.add_argument("--train-seconds", type=int, default=20, help="each level's training time (default: 20)")
    probe.add_argument("--model", default="transformer", help="the model trained at every level (default: "
                       "transformer)")
    report = command("report", _report, "the results page of a GPU run, written from the folders its calls "
                     "returned, into docs/results (docs/gpu.md)")
    report.add_argument("folders", type=Path, nargs="+", metavar="folder",
                        help="what each call's $OUT returned, in call order")
    report.add_argument("--kind", required=True, help="the GPU's kind in the page's name: h100, h200")
    report.add_argument("--date", help="the page's date, YYYY-MM-DD (default: the first call's, from its "
                        "summary.txt)")
    report.add_argument("--force", action="store_true", help="rewrite a page of the same name")
