"""nmtbench converge (make converge): what is left and how long it should take, exactly on hand-made run files; the
order it starts stages in; and, on a tiny workspace, a SIGKILL of everything it started mid-epoch, then the same
command, ending where an uninterrupted run ends, scores compared exactly."""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
import yaml
from datasets import Dataset, DatasetDict

from helpers.project import keep_models, pipeline_env, scores
from nmtbench.cli import main
from nmtbench.config import ConfigError, parse_params
from nmtbench.evaluation.compare import load_runs
from nmtbench.evaluation.quality_vs_compute import flops_curve
from nmtbench.evaluation.scoring import score
from nmtbench.launch.converge import (
    compare_finished,
    converge,
    covers_export,
    draw_plot,
    export_finished,
    stage_order,
)
from nmtbench.launch.converge_report import (
    ASSUMED_EPOCHS,
    curves_table,
    finished_table,
    headline_table,
    plot_curves,
    refresh_page,
    seconds_left,
    status_table,
    wall_seconds,
)
from nmtbench.launch.run_state import progress
from nmtbench.run_paths import RunPaths

ROOT = Path(__file__).resolve().parents[1]
MIRROR = os.environ.get("NMTBENCH_DATA_MIRROR")


def grid(models: dict, seeds=(1,)):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    first = next(iter(models))
    return parse_params({**raw, "models": models, "seeds": list(seeds),
                         "compare": {**raw["compare"], "baseline": first},
                         "beam_sweep": {**raw["beam_sweep"], "model": first, "seed": seeds[0]}})


RNN, TRANSFORMER = {"family": "rnn"}, {"family": "transformer"}


def write_run(root: Path, model: str, train: dict | None = None, curve: list[tuple] = (), evaluated=False):
    folder = root / "metrics" / model / "seed1"
    folder.mkdir(parents=True)
    if train:
        (folder / "train.json").write_text(json.dumps(train))
    if curve:
        lines = ["step,epoch,wall_seconds,target_tokens,train_flops,train_loss,val_loss,val_ppl,val_bleu"]
        lines += [f"{step},{epoch},{wall},0,{step * 10**9},1.0,1.0,2.7,{bleu}" for step, epoch, wall, bleu in curve]
        (folder / "learning_curve.csv").write_text("\n".join(lines) + "\n")
    if evaluated:
        (folder / "eval.json").write_text("{}")


def test_what_is_left_is_read_from_the_runs_files_and_timed_from_the_epochs_measured(tmp_path):
    params = grid({"done": RNN, "half": TRANSFORMER, "kin": TRANSFORMER, "ceiling": RNN})
    write_run(tmp_path, "done", {"epochs": 10, "train_seconds": 1000.0, "best_val_bleu": 30.5,
                                 "stopped_by": "early_stopping"}, evaluated=True)
    write_run(tmp_path, "half", curve=[(5, 1.0, 200.0, 10.0), (10, 2.0, 400.0, ""), (15, 2.5, 500.0, 12.25)])
    write_run(tmp_path, "ceiling", {"epochs": 30, "train_seconds": 1500.0, "best_val_bleu": 20.0,
                                    "stopped_by": "max_epochs"})
    runs = progress(params, tmp_path)
    assert [(r.model, r.state, r.epochs, r.best_val_bleu) for r in runs] == [
        ("done", "evaluated", 10, 30.5), ("half", "interrupted", 2.5, 12.25), ("kin", "not started", 0.0, None),
        ("ceiling", "trained", 30, 20.0)]
    left, expected = seconds_left(runs)
    # 10 epochs a run (the one that stopped early); half: 7.5 more at its own 200 s; kin: 10 at its family's 200 s
    assert expected == 10 and left == {("half", 1): 1500.0, ("kin", 1): 2000.0}
    table = status_table(runs, jobs=2).splitlines()
    assert table[2].split() == ["half", "1", "interrupted", "2.5", "12.25", "200", "0.4", "h", "-"]
    # at 2 at once the two runs overlap: the longer one's 2,000 s
    assert table[-2] == ("1 evaluated, 1 trained, 0 in progress, 1 interrupted, 1 not started; about 0.6 h of "
                         "training left at 2 at once (10 epochs a run, from the runs here that stopped early)")
    assert table[-1].startswith("reached max_epochs before early stopping (not converged): ceiling; raise "
                                "models.<model>.train.max_epochs")
    write_run(tmp_path, "kin", {"epochs": 4, "train_seconds": 399.0, "best_val_bleu": 15.0, "stopped_by": "budget"})
    assert status_table(progress(params, tmp_path), jobs=2).splitlines()[-1] == (
        "reached budget before early stopping (not converged): kin; raise models.<model>.train.budget.value in "
        "params.yaml and run again to continue them")


def test_the_time_left_at_n_at_once_is_never_less_than_the_longest_run():
    assert wall_seconds([3600.0], jobs=2) == 3600.0  # one run left: a second slot does not halve it
    assert wall_seconds([100.0, 100.0, 100.0, 100.0], jobs=2) == 200.0
    # longest first on the first free slot: 50 | 40, then 30 joins 40, 20 joins 50
    assert wall_seconds([20.0, 30.0, 40.0, 50.0], jobs=2) == 70.0
    assert wall_seconds([20.0, 30.0], jobs=1) == 50.0
    assert wall_seconds([], jobs=2) == 0.0


def test_before_any_run_stops_early_an_assumed_epoch_count_is_said_and_unmeasured_runs_are_not_guessed(tmp_path):
    params = grid({"a": RNN, "b": TRANSFORMER})
    write_run(tmp_path, "a", curve=[(5, 1.0, 300.0, 1.0)])
    (tmp_path / "models/b/seed1/unfinished").mkdir(parents=True)  # killed before its first validation
    torch.save({"callbacks": {"LearningCurve": {"rows": []}}}, tmp_path / "models/b/seed1/unfinished/last.ckpt")
    runs = progress(params, tmp_path)
    assert [run.state for run in runs] == ["interrupted", "interrupted"]
    left, expected = seconds_left(runs)
    assert expected == ASSUMED_EPOCHS and left[("a", 1)] == (ASSUMED_EPOCHS - 1) * 300.0
    assert left[("b", 1)] == (ASSUMED_EPOCHS - 0) * 300.0  # no transformer measured: every measured run's pace
    assert status_table(runs, jobs=1).endswith(f"({ASSUMED_EPOCHS} epochs a run assumed until one stops early)")



def test_a_fresh_workspaces_status_says_its_runs_are_not_estimable_and_bounded_by_their_max_epochs(tmp_path):
    """#69: a fresh smoke workspace said "about 0.0 h of training left", "21 epochs a run assumed" while its
    max_epochs was 4."""
    params = grid({"a": RNN, "b": TRANSFORMER})
    params = params.model_copy(update={"train": params.train.model_copy(update={"max_epochs": 4})})
    assert status_table(progress(params, tmp_path), jobs=1).splitlines()[-1] == (
        "0 evaluated, 0 trained, 0 in progress, 0 interrupted, 2 not started; 2 run(s) to train, not yet estimable: "
        f"no epoch measured yet ({ASSUMED_EPOCHS} epochs a run assumed until one stops early; at most 4 for a, 4 for "
        "b: its max_epochs)")

def test_a_training_left_running_by_a_killed_launcher_is_in_progress_and_no_launch_starts_beside_it(
        tmp_path, monkeypatch):
    """#69: after a SIGKILL of the converge driver alone, its training ran on; the rerun called the run interrupted,
    failed it on the run's lock and started the next model beside it."""
    import nmtbench.launch

    monkeypatch.chdir(tmp_path)
    params = grid({"a": RNN, "b": TRANSFORMER})
    write_run(tmp_path, "a", curve=[(5, 1.0, 300.0, 1.0)])
    lock = RunPaths("a", 1, tmp_path).train_lock
    lock.parent.mkdir(parents=True)
    lock.write_text(f"{os.getpid()}\n")  # a live process holds the run's training lock
    assert [(run.state, run.training_pid) for run in progress(params, tmp_path)] == [
        ("in progress", os.getpid()), ("not started", 0)]
    launched = []
    monkeypatch.setattr(nmtbench.launch, "launch", lambda cfg, **kwargs: launched.append(kwargs) or 0)
    with pytest.raises(ConfigError, match=rf"^nmtbench converge: a seed 1 still training \(pid {os.getpid()}\) from "
                                          rf"a launch that was stopped; wait for it or stop it \(kill {os.getpid()}\), "
                                          r"then rerun$"):
        converge(params, out=io.StringIO())
    assert launched == []


def test_the_status_columns_line_up_under_a_name_longer_than_the_column(tmp_path):
    long = "lstm_attention_additive_unidirectional"
    lines = status_table(progress(grid({"rnn": RNN, long: RNN}), tmp_path), jobs=1).splitlines()[:3]
    # "model", a space, the seed right-aligned in 4, two spaces: the state starts 7 after the longest name
    assert {line.index("not started" if i else "state") for i, line in enumerate(lines)} == {len(long) + 7}


def test_a_resumed_runs_curve_is_read_from_its_checkpoint_until_its_first_validation_rewrites_the_file(tmp_path):
    """dvc deletes learning_curve.csv when it reruns the stage; the checkpoint holds the rows."""
    (tmp_path / "models/a/seed1/unfinished").mkdir(parents=True)
    rows = [{"step": 5, "epoch": 1.0, "wall_seconds": 250.0, "val_bleu": 3.5},
            {"step": 10, "epoch": 2.0, "wall_seconds": 500.0, "val_bleu": 6.25}]
    torch.save({"callbacks": {"LearningCurve": {"rows": rows}}}, tmp_path / "models/a/seed1/unfinished/last.ckpt")
    (run,) = progress(grid({"a": RNN}), tmp_path)
    assert (run.state, run.epochs, run.seconds_per_epoch, run.best_val_bleu) == ("interrupted", 2.0, 250.0, 6.25)


def test_a_recipe_with_an_update_limit_is_expected_to_train_to_it_and_every_run_stops_at_its_max_epochs(tmp_path):
    params = grid({"done": RNN, "capped": {**TRANSFORMER, "train": {"max_steps": 100}},
                   "ceiling": {**RNN, "train": {"max_epochs": 4}}})
    write_run(tmp_path, "done", {"epochs": 10, "train_seconds": 1000.0, "stopped_by": "early_stopping"},
              evaluated=True)
    write_run(tmp_path, "capped", curve=[(5, 1.0, 60.0, 1.0), (10, 2.0, 120.0, 2.0)])  # 5 updates an epoch
    write_run(tmp_path, "ceiling", curve=[(5, 1.0, 30.0, 1.0)])
    runs = progress(params, tmp_path)
    assert [(run.max_steps, run.steps, run.epochs_to_update_limit) for run in runs] == [
        (None, 0, None), (100, 10, 20.0), (None, 5, None)]
    left, expected = seconds_left(runs)
    # capped: 20 epochs to its 100 updates, 18 more at 60 s, past the 10 of the run that stopped early;
    # ceiling: 10 epochs expected, but its max_epochs 4 ends it: 3 more at 30 s
    assert expected == 10 and left == {("capped", 1): 18 * 60.0, ("ceiling", 1): 3 * 30.0}
    assert status_table(runs, jobs=1).endswith(
        "(10 epochs a run, from the runs here that stopped early; capped to its update limit; at most 4 for ceiling: "
        "its max_epochs)")


def test_a_run_that_early_stopping_ended_at_its_update_limit_says_nothing_of_how_long_the_others_take(tmp_path):
    """The papers' Transformer stops at its 8,000 updates after 143 epochs: the GRU beside it is not expected to
    train 143."""
    params = grid({"capped": {**TRANSFORMER, "train": {"max_steps": 100}}, "gru": RNN})
    for root, steps, epochs in [(tmp_path / "at_limit", 100, 143), (tmp_path / "before", 60, 12)]:
        write_run(root, "capped", {"epochs": epochs, "steps": steps, "train_seconds": 10.0 * epochs,
                                   "stopped_by": "early_stopping"}, evaluated=True)
        write_run(root, "gru", curve=[(5, 1.0, 30.0, 1.0)])
    runs = progress(params, tmp_path / "at_limit")
    assert seconds_left(runs) == ({("gru", 1): (ASSUMED_EPOCHS - 1) * 30.0}, ASSUMED_EPOCHS)
    assert status_table(runs, jobs=1).endswith(f"({ASSUMED_EPOCHS} epochs a run assumed until one stops early)")
    # stopped before its limit: it counts
    assert seconds_left(progress(params, tmp_path / "before")) == ({("gru", 1): 11 * 30.0}, 12)


def test_a_run_is_expected_to_train_at_least_the_epochs_its_patience_needs_to_stop_it(tmp_path):
    params = grid({"done": RNN, "patient": {**RNN, "train": {"early_stopping_patience": 20}}})
    write_run(tmp_path, "done", {"epochs": 12, "train_seconds": 120.0, "stopped_by": "early_stopping"},
              evaluated=True)
    write_run(tmp_path, "patient", curve=[(5, 1.0, 30.0, 1.0)])
    assert seconds_left(progress(params, tmp_path)) == ({("patient", 1): (21 - 1) * 30.0}, 12)
    # its best so far at epoch 8 of 9 (by val BLEU, its early-stopping metric): 20 more validations from there
    params = grid({"done": RNN, "patient": {**RNN, "train": {"early_stopping_patience": 20,
                                                              "early_stopping_metric": "bleu"}}})
    bleu = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0, 8.0]
    write_run(tmp_path / "later", "patient", curve=[(5 * e, float(e), 30.0 * e, b) for e, b in enumerate(bleu, 1)])
    (run,) = [run for run in progress(params, tmp_path / "later") if run.model == "patient"]
    assert run.best_epoch == 8.0
    assert seconds_left([run]) == ({("patient", 1): (8 + 20 - 9) * 30.0}, 21)
    # the status says which bound sets its estimate: not the 21 epochs it assumes of the others
    assert status_table([run], jobs=1).endswith(
        "(21 epochs a run assumed until one stops early; at least 28 for patient: best epoch so far plus patience)")


def test_every_runs_curve_so_far_is_one_markdown_table(tmp_path):
    params = grid({"done": RNN, "half": TRANSFORMER, "kin": TRANSFORMER})
    write_run(tmp_path, "done", {"epochs": 2, "train_seconds": 10.0, "stopped_by": "early_stopping"},
              curve=[(5, 1.0, 5.0, 10.5), (10, 2.0, 10.0, 11.0)])
    write_run(tmp_path, "half", curve=[(5, 1.0, 200.0, 3.25)])
    assert curves_table(params, tmp_path).splitlines()[2:] == [
        "| done | 1 | 2 | 11.00 (2) | 10.5, 11.0 |", "| half | 1 | 1 | 3.25 (1) | 3.25 |",
        "| kin | 1 | 0 | - | not started |"]


def test_every_runs_curve_so_far_is_drawn_against_flops_with_the_families_swap(tmp_path):
    params = grid({"lstm": RNN, "tf": TRANSFORMER, "kin": TRANSFORMER})
    write_run(tmp_path, "lstm", curve=[(5, 1.0, 5.0, 10.0), (10, 2.0, 10.0, 11.0)])  # step s: s x 1e9 FLOPs
    write_run(tmp_path, "tf", curve=[(5, 1.0, 5.0, 8.0), (10, 2.0, 10.0, 14.0)])
    said = plot_curves(params, tmp_path / "curves.png", tmp_path)
    assert said == ("**The ranking flips at 1e+10 training FLOPs**: the rnn family leads at some validation before "
                    "it, the transformer family at every validation from there on (best val BLEU within 1e+10 FLOPs: "
                    "transformer family 14.00, rnn family 11.00).")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no run has validated yet"):
        plot_curves(grid({"kin": TRANSFORMER}), tmp_path / "none.png", tmp_path)
    page = tmp_path / "page.md"  # #69: make converge PLOT=<a results page> is refused, the page kept
    page.write_text("# Runs\n")
    with pytest.raises(ConfigError, match=r"^--plot .*page.md: the plot is a PNG picture; give a path ending in .png$"):
        draw_plot(params, page)
    assert page.read_text() == "# Runs\n"


def test_the_plot_marks_the_flop_budget_of_the_params_that_have_one(tmp_path, monkeypatch):
    from nmtbench.launch import converge_report

    drawn = []
    monkeypatch.setattr(converge_report.figures, "flops_curves",
                        lambda curves, flip, budget: drawn.append(budget) or b"png")
    params = grid({"lstm": RNN, "tf": TRANSFORMER})
    write_run(tmp_path, "lstm", curve=[(5, 1.0, 5.0, 10.0)])
    plot_curves(params, tmp_path / "a.png", tmp_path)  # params.yaml's equal budget, make repro's
    converged = params.model_copy(update={"train": params.train.model_copy(update={
        "budget": params.train.budget.model_copy(update={"kind": "none", "value": None})})})
    plot_curves(converged, tmp_path / "b.png", tmp_path)  # trained to convergence: no budget to mark
    plot_curves(converged, tmp_path / "c.png", tmp_path, here=params)  # a checkout drawing converged runs
    assert drawn == [params.train.budget.value, None, params.train.budget.value]
    assert params.train.budget.kind == "flops"


def test_the_evaluated_runs_small_outputs_are_exported_to_be_committed(tmp_path):
    params = grid({"done": RNN, "half": TRANSFORMER})
    write_run(tmp_path, "done", {"epochs": 2, "train_seconds": 10.0}, curve=[(5, 1.0, 5.0, 10.5)], evaluated=True)
    write_run(tmp_path, "half", curve=[(5, 1.0, 200.0, 3.25)])
    (tmp_path / "results/done/seed1").mkdir(parents=True)
    (tmp_path / "results/done/seed1/test_2016_flickr.txt").write_text("ein Hund\n")
    assert export_finished(progress(params, tmp_path), tmp_path / "out", tmp_path) == ["done-1"]
    assert sorted(p.name for p in (tmp_path / "out/done/seed1").iterdir()) == [
        "eval.json", "learning_curve.csv", "test_2016_flickr.txt", "train.json"]
    assert not (tmp_path / "out/half").exists()



def test_a_truncated_train_or_eval_json_is_named_with_its_fix_wherever_it_is_read(tmp_path):
    """#69: a train.json or eval.json cut short gives one line naming the file and the fix under --status (and make
    converge), --table (make headline), --export (which copies nothing of it) and the compare stage, not json's
    bare words."""
    params = grid({"done": RNN})
    write_run(tmp_path, "done", {"epochs": 2, "train_seconds": 10.0, "params": 1000, "stopped_by": "early_stopping"},
              curve=[(5, 1.0, 5.0, 10.5)], evaluated=True)
    folder = tmp_path / "metrics/done/seed1"

    def damaged(name: str) -> str:
        return rf"^{re.escape(str(folder / name))} is not valid JSON \(.* at line 1\); delete it and rerun the stage"

    (folder / "eval.json").write_text('{"test_2016_flickr": {"bleu": 3')
    with pytest.raises(ConfigError, match=damaged("eval.json") + " that writes it$"):
        finished_table(params, tmp_path)
    with pytest.raises(ConfigError, match=damaged("eval.json")):
        export_finished(progress(params, tmp_path), tmp_path / "out", tmp_path)
    assert not (tmp_path / "out/done").exists()
    (folder / "train.json").write_text('{"epochs": 2, "stopp')
    with pytest.raises(ConfigError, match=damaged("train.json")):
        progress(params, tmp_path)
    with pytest.raises(ConfigError, match=damaged("train.json").removesuffix("rerun the stage") + "run `dvc repro "
                       "train@done-1`$"):
        load_runs(["done"], [1], tmp_path)


def test_a_learning_curve_cut_mid_row_is_named_wherever_it_is_read(tmp_path):
    """#69: a curve cut in its last row fed --curves, --plot and --compare an epoch short, and --table (make
    headline) a TypeError; each now names the file and line."""
    params = grid({"done": RNN})
    write_run(tmp_path, "done", {"epochs": 2, "train_seconds": 10.0, "params": 1000, "stopped_by": "early_stopping"},
              curve=[(5, 1.0, 5.0, 10.5), (10, 2.0, 10.0, 11.5)], evaluated=True)
    curve = tmp_path / "metrics/done/seed1/learning_curve.csv"
    whole = curve.read_text()
    curve.write_text(whole[:-20])
    refusal = rf"^{re.escape(str(curve))}: line 3 is cut short \(5 of 9 columns, or no line end\); restore it"
    for read in (lambda: curves_table(params, tmp_path), lambda: finished_table(params, tmp_path),
                 lambda: plot_curves(params, tmp_path / "curves.png", tmp_path), lambda: flops_curve(curve)):
        with pytest.raises(ConfigError, match=refusal):
            read()
    assert not (tmp_path / "curves.png").exists()
    curve.write_text(whole[:-1])  # a last row whole but for its line end: a cut too
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(curve))}: line 3 is cut short"):
        curves_table(params, tmp_path)


def test_an_exported_run_missing_its_eval_json_is_named_not_dropped_from_the_table(tmp_path):
    """#69: make headline left such a run out of the README's table while its picture still drew it."""
    params = grid({"done": RNN})
    export = export_of(tmp_path, params, {"done": {"epochs": 2, "train_seconds": 10.0}})
    (export / "done/seed1/eval.json").unlink()
    for read in (lambda: finished_table(params, exported=export), lambda: progress(params, tmp_path, export, params)):
        with pytest.raises(ConfigError, match=rf"^{re.escape(str(export))}/done/seed1/eval.json: missing beside "
                                              r"train.json; restore it \(git checkout .*\) or export the run again"):
            read()


def test_the_curves_and_plot_read_back_from_an_export_are_the_workspaces(tmp_path):
    """make headline redraws the committed runs: what --export copied reads as the workspace did."""
    params = grid({"lstm": RNN, "tf": TRANSFORMER, "half": TRANSFORMER})
    for model, bleu in (("lstm", (10.0, 11.0)), ("tf", (8.0, 14.0))):
        write_run(tmp_path, model, {"epochs": 2, "train_seconds": 10.0}, evaluated=True,
                  curve=[(5, 1.0, 5.0, bleu[0]), (10, 2.0, 10.0, bleu[1])])
        (tmp_path / f"results/{model}/seed1").mkdir(parents=True)
    write_run(tmp_path, "half", curve=[(5, 1.0, 200.0, 3.25)])  # not evaluated: not exported
    export_finished(progress(params, tmp_path), tmp_path / "out", tmp_path)
    workspace, exported = curves_table(params, tmp_path), curves_table(params, exported=tmp_path / "out")
    assert exported.splitlines() == [*workspace.splitlines()[:4], "| half | 1 | 0 | - | not started |"]
    assert plot_curves(params, tmp_path / "a.png", exported=tmp_path / "out") == plot_curves(
        grid({"lstm": RNN, "tf": TRANSFORMER}), tmp_path / "b.png", tmp_path)
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    with pytest.raises(ConfigError, match="^--from .*/gone: no such folder; give the folder nmtbench converge "):
        draw_plot(params, tmp_path / "c.png", exported=tmp_path / "gone")


def test_the_finished_runs_table_ranks_them_and_reads_an_old_runs_best_checkpoint_off_its_curve(tmp_path):
    """The README's converged table: the best first; a train.json without best_* (written before they were kept)
    gets them from its curve by the recipe's early-stopping metric; a run not evaluated has no row."""
    params = grid({"old": RNN, "new": TRANSFORMER, "half": TRANSFORMER})
    params = params.model_copy(update={"train": params.train.model_copy(update={"early_stopping_metric": "bleu"})})
    split_scores = {"bleu": 20.0, "bleu_lc_tok": 20.5, "chrf": 50.0, "sentences_per_s": 80.0}
    for model, train, bleu in (
            ("old", {"params": 1000, "epochs": 3, "stopped_by": "early_stopping"}, 20.0),
            ("new", {"params": 2000, "epochs": 2, "stopped_by": "max_epochs", "best_epoch": 2.0, "best_step": 10,
                     "best_train_flops": 10**10}, 30.0)):
        write_run(tmp_path, model, train, curve=[(5, 1.0, 5.0, 12.0), (10, 2.0, 10.0, 15.5), (15, 3.0, 15.0, 15.0)])
        scores = {split: {**split_scores, "bleu": bleu} for split in params.data.eval_splits}
        (tmp_path / f"metrics/{model}/seed1/eval.json").write_text(json.dumps(scores))
    write_run(tmp_path, "half", curve=[(5, 1.0, 200.0, 3.25)])
    first, second = params.data.eval_splits
    assert finished_table(params, tmp_path).splitlines() == [
        f"| Model | Parameters | Epochs (best) | Updates to best | FLOPs to best | Stopped by | {first} BLEU "
        f"| BLEU lc tok | chrF | {second} BLEU | BLEU lc tok | chrF | Decoding sentences/s |",
        "|:---|---:|---:|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|",
        "| new | 2,000 | 2 (2) | 10 | 1.00e+10 | max_epochs | 30.00 | 20.50 | 50.00 | 30.00 | 20.50 | 50.00 | 80.0 |",
        "| old | 1,000 | 3 (2) | 10 | 1.00e+10 | early_stopping | 20.00 | 20.50 | 50.00 | 20.00 | 20.50 | 50.00 "
        "| 80.0 |"]
    by_loss = params.model_copy(update={"train": params.train.model_copy(update={"early_stopping_metric": "loss"})})
    assert "| old | 1,000 | 3 (1) | 5 | 5.00e+09 |" in finished_table(by_loss, tmp_path)  # equal losses: the first
    readme = tmp_path / "README.md"  # make headline: --page rewrites the README's marked table in place
    readme.write_text("# Answer\n\n<!-- converge:table -->\n| stale |\n<!-- /converge:table -->\n\nMore.\n")
    assert refresh_page(params, readme, 2, tmp_path) == ["table"]
    assert readme.read_text() == (f"# Answer\n\n<!-- converge:table -->\n{finished_table(params, tmp_path)}\n"
                                  "<!-- /converge:table -->\n\nMore.\n")


def test_the_headline_table_gives_each_model_its_mean_and_sd_over_the_seeds_finished(tmp_path):
    """The README's table: one row a model, the seeds that have finished counted, mean ± sd (sample) where more than
    one has; a model with none has no row."""
    params = grid({"two": RNN, "one": TRANSFORMER, "none": TRANSFORMER}, seeds=(1, 2))
    for model, seed, bleu, chrf in (("two", 1, 30.0, 50.0), ("two", 2, 32.0, 54.0), ("one", 2, 35.0, 60.0)):
        folder = tmp_path / "metrics" / model / f"seed{seed}"
        folder.mkdir(parents=True)
        (folder / "train.json").write_text(json.dumps({"params": 1234567}))
        scores = {split: {"bleu": bleu + index, "chrf": chrf} for index, split in enumerate(params.data.eval_splits)}
        (folder / "eval.json").write_text(json.dumps(scores))
    first, second = params.data.eval_splits
    assert headline_table(params, tmp_path).splitlines() == [
        f"| Model | Parameters | Seeds | {first} BLEU | {first} chrF | {second} BLEU | {second} chrF |",
        "|:---|---:|---:|---:|---:|---:|---:|",
        "| one | 1,234,567 | 1 | 35.00 | 60.00 | 36.00 | 60.00 |",
        "| two | 1,234,567 | 2 | 31.00 ± 1.41 | 52.00 ± 2.83 | 32.00 ± 1.41 | 52.00 ± 2.83 |"]
    readme = tmp_path / "README.md"
    readme.write_text("Answer.\n<!-- converge:headline -->\nold\n<!-- /converge:headline -->\n")
    assert refresh_page(params, readme, 2, tmp_path) == ["headline"]
    assert readme.read_text() == f"Answer.\n<!-- converge:headline -->\n{headline_table(params, tmp_path)}\n" \
                                 "<!-- /converge:headline -->\n"


def test_an_export_carries_the_workspaces_params_and_from_reads_the_table_with_them(tmp_path, monkeypatch, capsys):
    """make headline reads the committed runs with the recipe they trained with, not the checkout's params.yaml."""
    params = grid({"old": RNN})
    params = params.model_copy(update={"train": params.train.model_copy(update={"early_stopping_metric": "bleu"})})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params.model_dump(mode="json")))
    write_run(tmp_path, "old", {"params": 1000, "epochs": 2, "train_seconds": 10.0, "stopped_by": "early_stopping"},
              curve=[(5, 1.0, 5.0, 12.0), (10, 2.0, 10.0, 11.0)])
    (tmp_path / "metrics/old/seed1/eval.json").write_text(json.dumps({}))
    (tmp_path / "results/old/seed1").mkdir(parents=True)
    export_finished(progress(params, tmp_path), tmp_path / "out", tmp_path)
    assert (tmp_path / "out/params.yaml").read_text() == (tmp_path / "params.yaml").read_text()
    monkeypatch.chdir(ROOT)  # the checkout's params.yaml: early stopping by val loss, the lowest at epoch 2 here
    assert main(["converge", "--from", str(tmp_path / "out"), "--table"]) == 0
    assert "| old | 1,000 | 2 (1) | 5 | 5.00e+09 | early_stopping | - |" in capsys.readouterr().out


def test_an_export_is_merged_into_only_by_a_workspace_that_trains_its_runs_alike(tmp_path):
    """#69: --export into a folder holding another recipe's runs (the committed grid, from a smoke workspace) is
    refused, every file there unchanged; from a workspace of that recipe, its runs join the ones there."""
    params = grid({"old": RNN, "new": TRANSFORMER})
    export = export_of(tmp_path, params, {"old": {"epochs": 2, "train_seconds": 10.0}})
    smaller = params.model_copy(update={"models": {**params.models, "old": {**RNN, "hidden_dim": 8}}})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(smaller.model_dump(mode="json")))
    write_run(tmp_path, "new", {"epochs": 1, "train_seconds": 5.0}, curve=[(5, 1.0, 5.0, 9.0)], evaluated=True)
    (tmp_path / "results/new/seed1").mkdir(parents=True)
    before = {file: file.read_bytes() for file in export.rglob("*") if file.is_file()}
    with pytest.raises(ConfigError, match=r"^--export .*export: its params.yaml trains old seed 1 with other model "
                                          r"params than this workspace's \(hidden_dim\); export to a folder"):
        export_finished(progress(smaller, tmp_path), export, tmp_path)
    assert {file: file.read_bytes() for file in export.rglob("*") if file.is_file()} == before
    alone = params.model_copy(update={"models": {"new": TRANSFORMER}})  # a smoke workspace of one model
    with pytest.raises(ConfigError, match=r"^--export .*export: its params.yaml has models old, which this "
                                          r"workspace's lacks; export to a folder of its own"):
        covers_export(alone, export)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params.model_dump(mode="json")))
    assert export_finished(progress(params, tmp_path), export, tmp_path) == ["new-1"]
    assert (export / "old/seed1/train.json").is_file() and (export / "new/seed1/train.json").is_file()


REFERENCES = ["Ein Hund rennt .", "Zwei Kinder spielen im Schnee .", "Eine Frau liest ein Buch .",
              "Ein Mann fährt Rad .", "Drei Vögel sitzen auf einem Ast .", "Ein Junge springt ins Wasser ."]
OUTPUTS = {"good": REFERENCES,
           "fair": ["Ein Hund läuft .", "Zwei Kinder spielen im Schnee .", "Eine Frau liest .",
                    "Ein Mann fährt Fahrrad .", "Drei Vögel auf einem Ast .", "Ein Junge springt ."],
           "poor": ["Ein Hund .", "Kinder .", "Eine Frau .", "Ein Mann .", "Vögel .", "Ein Junge ."]}


def write_finished_workspace(root: Path, params) -> None:
    """Three evaluated runs whose translations of both test sets are OUTPUTS, each eval.json scored from them, and
    a fourth model still training; the test sets as the tokenize stage leaves them."""
    splits = params.data.eval_splits
    DatasetDict({split: Dataset.from_dict({"src": [f"source {i}" for i in range(len(REFERENCES))],
                                           "tgt": REFERENCES}) for split in splits}).save_to_disk(
        str(root / "data/tokenized/dataset"))
    for model, lines in OUTPUTS.items():
        write_run(root, model, {"params": 1000, "train_seconds": 10.0, "train_tokens_per_s": 5.0, "best_val_loss": 2.0,
                                "steps": 10, "target_tokens": 50, "epochs": 2, "stopped_by": "early_stopping"},
                  curve=[(5, 1.0, 5.0, 12.0), (10, 2.0, 10.0, 15.0)])
        text = "".join(line + "\n" for line in lines)
        (root / f"results/{model}/seed1").mkdir(parents=True)
        for split in splits:
            (root / f"results/{model}/seed1/{split}.txt").write_text(text)
        (root / f"metrics/{model}/seed1/eval.json").write_text(json.dumps({split: {
            **score(lines, REFERENCES), "sentences_per_s": 50.0,
            "hypotheses_sha256": hashlib.sha256(text.encode()).hexdigest()} for split in splits}))
    write_run(root, "half", curve=[(5, 1.0, 200.0, 3.25)])


def test_the_models_finished_so_far_are_compared_with_intervals_from_the_workspace_or_its_export(
        tmp_path, monkeypatch, capsys):
    """While the grid trains: the compare stage over the finished models alone, against a finished baseline, into a
    folder of its own; the workspace's results/ is left as it was, and an export compares as the workspace does."""
    params = grid({"half": TRANSFORMER, "good": TRANSFORMER, "fair": RNN, "poor": RNN})  # baseline: half, training
    params = params.model_copy(update={"compare": params.compare.model_copy(update={"examples": [0]})})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False))
    write_finished_workspace(tmp_path, params)
    results = sorted(path for path in (tmp_path / "results").rglob("*"))
    with pytest.raises(ConfigError, match="^nmtbench converge --compare: the baseline half has not finished; name a "
                                          "finished model with --baseline: good, fair, poor$"):
        compare_finished(params, tmp_path / "so-far", root=tmp_path)
    # #69: a name that is no model is a typo, not a model still training
    with pytest.raises(ConfigError, match="^nmtbench converge --compare: the baseline bogus is not a model of the "
                                          "params; name one with --baseline: half, good, fair, poor$"):
        compare_finished(params, tmp_path / "so-far", "bogus", root=tmp_path)
    comparison = compare_finished(params, tmp_path / "so-far", "fair", root=tmp_path)
    assert sorted(path.name for path in (tmp_path / "so-far").iterdir()) == [
        "bleu.json", "comparison.json", "comparison.md", "flops_curves.csv"]
    assert sorted(path for path in (tmp_path / "results").rglob("*")) == results  # nothing written there
    split = params.data.eval_splits[0]
    assert comparison["baseline"] == "fair" and list(comparison["models"]) == ["good", "fair", "poor"]
    for model, lines in OUTPUTS.items():
        assert comparison["models"][model][split]["bleu"]["mean"] == score(lines, REFERENCES)["bleu"]
    assert comparison["models"]["fair"][split]["bootstrap"]["p_value"] is None  # the baseline against itself
    assert comparison["models"]["good"][split]["bootstrap"]["p_value"] < 0.05
    assert "fair (baseline)" in (tmp_path / "so-far/comparison.md").read_text()
    export_finished(progress(params, tmp_path), tmp_path / "out", tmp_path)
    monkeypatch.chdir(tmp_path)  # the test sets: this workspace's data/tokenized
    assert main(["converge", "--from", "out", "--compare", "from-export", "--baseline", "fair"]) == 0
    assert capsys.readouterr().out == "nmtbench converge: compared 3 finished model(s) against fair in " \
                                      "from-export/comparison.md\n"
    exported = json.loads((tmp_path / "from-export/comparison.json").read_text())
    assert {**exported, "provenance": None} == {**json.loads(json.dumps(comparison)), "provenance": None}
    (tmp_path / "out/poor/seed1/learning_curve.csv").unlink()  # a run from before curves were kept: no curve, scores
    assert list(compare_finished(params, tmp_path / "no-curve", "fair", exported=tmp_path / "out")["models"]) == [
        "good", "fair", "poor"]
    assert main(["converge", "--baseline", "fair"]) == 2
    assert capsys.readouterr().err.strip() == ("nmtbench converge: error: --baseline: only --compare reads it; add "
                                               "--compare FOLDER, or leave --baseline out")
    # #69: runs evaluated on other test sets (the grid's 1,000 sentences, compared in a smoke workspace) are named so
    scores = tmp_path / "out/good/seed1/eval.json"
    scores.write_text(json.dumps({split: {**row, "sentences": 1000} for split, row in json.loads(
        scores.read_text()).items()}))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(scores))}: scored 1,000 sentences of {split}, where this "
                                          r"workspace's test set has 6; compare the runs in a workspace of the data "
                                          r"block they were evaluated on$"):
        compare_finished(params, tmp_path / "other", "fair", exported=tmp_path / "out")


def test_each_run_is_evaluated_before_the_next_starts_and_named_models_go_first(tmp_path):
    runs = progress(grid({"a": RNN, "b": RNN, "c": TRANSFORMER}, seeds=(1, 2)), tmp_path)
    assert stage_order(runs, ["c"])[:6] == ["train@c-1", "evaluate@c-1", "train@c-2", "evaluate@c-2", "train@a-1",
                                            "evaluate@a-1"]
    assert stage_order(runs)[-1] == "compare"



def export_of(root: Path, params, runs: dict[str, dict]) -> Path:
    """An export --export would have written on another machine: runs (model -> train.json, of params' first seed)
    and its params.yaml."""
    folder, seed = root / "export", f"seed{params.seeds[0]}"
    for model, train in runs.items():
        (folder / model / seed).mkdir(parents=True)
        (folder / model / seed / "train.json").write_text(json.dumps(train))
        (folder / model / seed / "eval.json").write_text("{}")
    (folder / "params.yaml").write_text(yaml.safe_dump(params.model_dump(mode="json")))
    return folder


def test_runs_finished_in_an_export_count_as_done_and_are_not_trained_again(tmp_path):
    """A new machine's workspace resumes from what landed: the export's finished runs are not retrained, the
    workspace's own runs (in progress here, though exported too) go on, and compare waits for --compare --from."""
    params = grid({"done": RNN, "going": TRANSFORMER, "new": RNN})
    stopped = {"epochs": 12, "train_seconds": 1200.0, "best_val_bleu": 30.5, "stopped_by": "early_stopping",
               "steps": 600}
    export = export_of(tmp_path, params, {"done": stopped, "going": stopped})
    write_run(tmp_path, "going", curve=[(5, 1.0, 300.0, 10.0)])
    runs = progress(params, tmp_path, exported=export, exported_params=params)
    assert [(run.model, run.state, run.epochs) for run in runs] == [
        ("done", "exported", 12), ("going", "interrupted", 1.0), ("new", "not started", 0.0)]
    assert stage_order(runs, ["new"]) == ["train@new-1", "evaluate@new-1", "train@going-1", "evaluate@going-1"]
    table = status_table(runs, jobs=1).splitlines()
    # the exported run's 12 epochs are the others' expected length, its 100 s an epoch its family's pace: going 11
    # more at its own 300 s, new 12 at 100 s, 4,500 s in all
    assert table[-1] == ("0 evaluated, 0 trained, 0 in progress, 1 interrupted, 1 not started, 1 exported; about "
                         "1.2 h of training left at 1 at once (12 epochs a run, from the runs here that stopped early)")
    assert [run.state for run in progress(params, tmp_path)] == ["not started", "interrupted", "not started"]


def test_an_exported_run_trained_with_another_recipe_is_refused_naming_what_differs(tmp_path):
    params = grid({"done": RNN, "other": TRANSFORMER})
    recipe = grid({"done": {**RNN, "dropout": 0.5}, "other": TRANSFORMER})
    stopped = {"epochs": 3, "train_seconds": 30.0, "stopped_by": "early_stopping"}
    export = export_of(tmp_path, recipe, {"done": stopped})
    with pytest.raises(ConfigError, match=r"^--from .*/export: done seed 1 was trained there with other model params "
                                          r"\(dropout: not as in this workspace's params.yaml\); train it here"):
        progress(params, tmp_path, exported=export, exported_params=recipe)
    faster = parse_params({**yaml.safe_load(yaml.safe_dump(params.model_dump(mode="json"))),
                           "train": {**params.train.model_dump(mode="json"), "lr": 0.01, "max_epochs": 7}})
    with pytest.raises(ConfigError, match=r"other train params \(lr: not as"):  # the ceiling is no part of a recipe
        progress(params, tmp_path, export_of(tmp_path / "b", faster, {"done": stopped}), exported_params=faster)



def test_an_exported_run_trained_on_other_subwords_is_refused_and_one_on_these_counts_as_done(tmp_path):
    """The same params make the same subwords, unless the tokenizer changed: an export's runs are checked by the
    subwords their train.json records against this workspace's vocab.json; one recorded before that is taken as is."""
    params = grid({"same": RNN, "older": RNN, "other": RNN})
    tokenized = tmp_path / "data" / "tokenized"
    tokenized.mkdir(parents=True)
    (tokenized / "vocab.json").write_text(json.dumps({"size": 8, "pad": 0, "sha256": "ab" * 32}))
    stopped = {"epochs": 3, "train_seconds": 30.0, "stopped_by": "early_stopping"}
    export = export_of(tmp_path, params, {"same": {**stopped, "vocab": "ab" * 32}, "older": stopped})
    assert [run.state for run in progress(params, tmp_path, export, params)] == ["exported", "exported", "not started"]
    (export / "other" / "seed1").mkdir(parents=True)
    (export / "other/seed1/train.json").write_text(json.dumps({**stopped, "vocab": "cd" * 32}))
    (export / "other/seed1/eval.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"^--from .*/export: other seed 1 was trained on other subwords \(vocab "
                                          r"cdcdcdcdcdcd there, abababababab in .*vocab.json\); train it here"):
        progress(params, tmp_path, export, params)


def test_the_curves_so_far_join_the_export_with_this_workspaces_runs_of_its_recipe(tmp_path):
    """A grid converging over two machines seen whole: the export's finished runs, and here the runs it lacks that
    this workspace trains as the export's params do; a run of another recipe here (a checkout's own) stays out."""
    params = grid({"done": RNN, "going": TRANSFORMER, "other": TRANSFORMER})
    here = grid({"done": RNN, "going": TRANSFORMER, "other": {**TRANSFORMER, "dropout": 0.5}, "new": RNN})
    export = export_of(tmp_path, params, {"done": {"epochs": 1, "train_seconds": 1.0}})
    (export / "done/seed1/learning_curve.csv").write_text(
        "step,epoch,wall_seconds,target_tokens,train_flops,train_loss,val_loss,val_ppl,val_bleu\n"
        "5,1.0,5.0,0,5000000000,1.0,1.0,2.7,30.5\n")
    for model in ("going", "other", "new"):
        write_run(tmp_path, model, curve=[(5, 1.0, 200.0, 12.25), (10, 2.0, 400.0, 14.5)])
    assert curves_table(params, tmp_path, export, here).splitlines()[2:] == [
        "| done | 1 | 1 | 30.50 (1) | 30.5 |", "| going | 1 | 2 | 14.50 (2) | 12.25, 14.5 |",
        "| other | 1 | 0 | - | not started |", "| new | 1 | 0 | - | not started |"]
    assert curves_table(params, tmp_path, export).splitlines()[3] == "| going | 1 | 0 | - | not started |"
    alike = tmp_path / "alike"  # one workspace holding the two joined runs
    write_run(alike, "done", curve=[(5, 1.0, 5.0, 30.5)])
    write_run(alike, "going", curve=[(5, 1.0, 200.0, 12.25), (10, 2.0, 400.0, 14.5)])
    assert plot_curves(params, tmp_path / "joined.png", tmp_path, export, here) == plot_curves(
        grid({"done": RNN, "going": TRANSFORMER}), tmp_path / "alike.png", alike)
    assert (tmp_path / "joined.png").read_bytes() == (tmp_path / "alike.png").read_bytes()

def test_a_checkout_with_one_seed_draws_every_seed_of_an_export(tmp_path):
    """make headline in a checkout whose params.yaml has one seed: the export's other seeds are drawn too."""
    export_params, here = grid({"done": RNN}, seeds=(1, 2)), grid({"done": RNN})
    export = export_of(tmp_path, export_params, {"done": {"epochs": 1}})
    (export / "done/seed2").mkdir()
    for seed, bleu in ((1, 30.5), (2, 31.5)):
        (export / f"done/seed{seed}/learning_curve.csv").write_text(
            "step,epoch,wall_seconds,target_tokens,train_flops,train_loss,val_loss,val_ppl,val_bleu\n"
            f"5,1.0,5.0,0,5000000000,1.0,1.0,2.7,{bleu}\n")
    assert curves_table(export_params, tmp_path, export, here).splitlines()[2:] == [
        "| done | 1 | 1 | 30.50 (1) | 30.5 |", "| done | 2 | 1 | 31.50 (1) | 31.5 |"]


def test_a_results_page_has_its_marked_blocks_rewritten_and_its_prose_kept(tmp_path):
    """--page: the status, the curves and the plot's flip where the page marks them, from the export joined with this
    workspace's runs, the picture beside the page; again, the same page; a page without blocks is refused."""
    params = grid({"done": RNN, "going": TRANSFORMER})
    export = export_of(tmp_path, params, {"done": {"epochs": 1, "train_seconds": 5.0, "stopped_by": "early_stopping"}})
    (export / "done/seed1/learning_curve.csv").write_text(
        "step,epoch,wall_seconds,target_tokens,train_flops,train_loss,val_loss,val_ppl,val_bleu\n"
        "5,1.0,5.0,0,5000000000,1.0,1.0,2.7,30.5\n")
    write_run(tmp_path, "going", curve=[(5, 1.0, 200.0, 12.25), (10, 2.0, 400.0, 34.5)])
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("# Runs\n\nProse.\n<!-- converge:status -->\nold\n<!-- /converge:status -->\nMore prose.\n\n"
                    "<!-- converge:curves -->\n| old |\n<!-- /converge:curves -->\n"
                    "<!-- converge:plot flops.png -->\nold flip\n<!-- /converge:plot -->\nThe end.\n")
    assert refresh_page(params, page, 2, tmp_path, export, params, params) == ["status", "curves", "plot"]
    status = status_table(progress(params, tmp_path, exported=export, exported_params=params), 2)
    assert page.read_text() == (
        f"# Runs\n\nProse.\n<!-- converge:status -->\n```\n{status}\n```\n<!-- /converge:status -->\nMore prose.\n\n"
        f"<!-- converge:curves -->\n{curves_table(params, tmp_path, export, params)}\n<!-- /converge:curves -->\n"
        f"<!-- converge:plot flops.png -->\n{plot_curves(params, tmp_path / 'b.png', tmp_path, export, params)}\n"
        "<!-- /converge:plot -->\nThe end.\n")
    assert "| done | 1 | 1 | 30.50 (1) | 30.5 |" in page.read_text() and "going" in status
    assert (page.parent / "flops.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    before = page.read_text()
    refresh_page(params, page, 2, tmp_path, export, params, params)
    assert page.read_text() == before
    page.write_text("# Runs\n\nNo block.\n")
    with pytest.raises(ConfigError, match=r"^--page .*page.md: no block to refresh; mark one with"):
        refresh_page(params, page, 2, tmp_path, export, params, params)
    # #69: a block without its end marker, before another block or the page's end, is refused, the page unchanged
    for text, before in (("<!-- converge:table -->\nProse.\n<!-- converge:table -->\nold\n<!-- /converge:table -->\n",
                          "the next block"), ("# Runs\n\n<!-- converge:curves -->\n", "the end of the page")):
        page.write_text(text)
        refusal = rf"^--page .*page.md: <!-- converge:(\w+) --> has no <!-- /converge:\1 --> before {before}; add it"
        with pytest.raises(ConfigError, match=refusal + " on a line of its own where the block ends$"):
            refresh_page(params, page, 2, tmp_path, export, params, params)
        assert page.read_text() == text
    page.write_text("<!-- converge:plot -->\n<!-- /converge:plot -->\n")
    with pytest.raises(ConfigError, match=r"names no picture"):
        refresh_page(params, page, 2, tmp_path, export, params, params)
    with pytest.raises(ConfigError, match=r"^--page .*absent.md: no such file"):
        refresh_page(params, tmp_path / "absent.md", 2, tmp_path, export, params, params)


def test_an_export_without_its_params_is_refused_whatever_reads_it(tmp_path, monkeypatch, capsys):
    """#69: without the recipe its runs trained with, an export's runs were taken for this workspace's (shown as
    done and never trained here), and make headline read them with the checkout's params."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    params = parse_params(yaml.safe_load((ROOT / "params.yaml").read_text()))
    (export_of(tmp_path, params, {"rnn": {"epochs": 20, "train_seconds": 6869.0}}) / "params.yaml").unlink()
    for reading in ([], ["--table"], ["--status"]):
        assert main(["converge", "--from", "export", *reading]) == 2
        assert capsys.readouterr().err.strip() == (
            "nmtbench converge: error: --from export: no params.yaml, the recipe its runs trained with (--export "
            "copies it there); put it back from where they were exported, or leave --from out")


def test_make_converge_from_an_export_trains_only_what_it_lacks(tmp_path, monkeypatch, capsys):
    import nmtbench.launch

    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    params = parse_params(yaml.safe_load((ROOT / "params.yaml").read_text()))
    export_of(tmp_path, params, {"rnn": {"epochs": 20, "train_seconds": 6869.0, "stopped_by": "early_stopping"}})
    launched = []
    monkeypatch.setattr(nmtbench.launch, "launch", lambda cfg, **kwargs: launched.append(kwargs["targets"]) or 0)
    assert main(["converge", "--from", "export"]) == 0
    assert "train@rnn-42" not in launched[0] and "compare" not in launched[0] and "train@gru-42" in launched[0]
    assert "compare every finished run with nmtbench converge --compare <folder> --from <export>" in (
        capsys.readouterr().out)

def test_converge_refuses_an_unknown_model_and_a_bad_jobs_count_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    assert main(["converge", "--jobs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "nmtbench converge: error: --jobs: must be at least 1, got 0"
    assert main(["converge", "--threads", "0"]) == 2
    assert capsys.readouterr().err.strip() == "nmtbench converge: error: --threads: must be at least 1, got 0"
    with pytest.raises(ConfigError, match="^unknown model 'transformr'"):
        converge(grid({"a": RNN}), first=["transformr"])


def test_converge_does_one_of_its_jobs_at_a_time(tmp_path, monkeypatch, capsys):
    """Each flag besides training is a job of its own: two of them are refused in one line, not one silently
    dropped."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    with pytest.raises(SystemExit, match="2"):
        main(["converge", "--table", "--plot", "a.png"])
    assert capsys.readouterr().err.strip().endswith("error: argument --plot: not allowed with argument --table")
    assert not (tmp_path / "a.png").exists()


def test_jobs_and_threads_given_to_converge_override_the_launch_block(tmp_path, monkeypatch):
    import nmtbench.launch

    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    launched = []
    monkeypatch.setattr(nmtbench.launch, "launch", lambda cfg, **kwargs: launched.append(cfg) or 0)
    assert main(["converge", "--jobs", "1", "--threads", "1"]) == 0
    assert main(["converge"]) == 0
    assert [(cfg.jobs, cfg.threads_per_job) for cfg in launched] == [(1, 1), (2, None)]  # then params.yaml's


def kill_everything(launcher: subprocess.Popen) -> None:
    """What a power cut does: SIGKILL the launcher and every process under it, the training included."""
    tree = [launcher.pid, *(child.pid for child in psutil.Process(launcher.pid).children(recursive=True))]
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    launcher.wait()


@pytest.mark.slow
def test_a_sigkill_mid_epoch_then_the_same_command_gives_the_uninterrupted_result(tmp_path):
    if not MIRROR:
        pytest.skip("set NMTBENCH_DATA_MIRROR to a Multi30k mirror folder "
                    "(make test does when one is beside the checkout)")
    env = pipeline_env(WANDB_MODE="disabled")
    first = tmp_path / "whole"
    subprocess.run([sys.executable, "-m", "nmtbench", "--params", str(ROOT / "params.yaml"), "workspace", str(first),
                    "--profile", str(ROOT / "profiles/converge_cpu.yaml"), "--profile",
                    str(ROOT / "profiles/smoke.yaml")], check=True, env=env, capture_output=True)
    # one tiny model to its own early stopping: patience 1 over at most 4 epochs, a checkpoint every 2 updates
    keep_models(first, ("transformer",), tune={"trials": 0}, launch={"threads_per_job": 1},
                train={"max_epochs": 4, "early_stopping_patience": 1, "checkpoint_every_steps": 2,
                       "deterministic": True, "warmup_steps": 10, "val_bleu_sentences": 10})
    subprocess.run(["dvc", "repro", "tokenize"], cwd=first, env=env, check=True, capture_output=True)
    killed = tmp_path / "killed"
    shutil.copytree(first, killed)  # the data prepared and tokenized once, for both
    command = [sys.executable, "-m", "nmtbench", "converge", "--jobs", "1"]
    whole = subprocess.run(command, cwd=first, env=env, capture_output=True, text=True, timeout=900)
    assert whole.returncode == 0, whole.stdout + whole.stderr

    launcher = subprocess.Popen(command, cwd=killed, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = killed / "models/transformer/seed42/unfinished/last.ckpt"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and launcher.poll() is None:
        if last.is_file() and torch.load(last, map_location="cpu", weights_only=False)["global_step"] >= 4:
            break  # the second checkpoint: mid-epoch (more than 4 updates an epoch)
        time.sleep(0.05)
    kill_everything(launcher)
    state = torch.load(last, map_location="cpu", weights_only=False)
    assert 0 < state["TranslationData"]["batches_done"]  # in the middle of an epoch
    assert not (killed / "metrics/transformer/seed42/train.json").exists()

    again = subprocess.run(command, cwd=killed, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "transformer                  42  interrupted" in again.stdout  # what it said was left
    for name in ("train.json", "eval.json"):
        made = [json.loads((folder / "metrics/transformer/seed42" / name).read_text()) for folder in (first, killed)]
        assert scores(made[0]) == scores(made[1])
    assert json.loads((killed / "metrics/transformer/seed42/train.json").read_text())["stopped_by"] in (
        "early_stopping", "max_epochs")
    for folder in (first, killed):  # the comparison ran too, and nothing is left to do
        assert (folder / "results/comparison.json").is_file()
    status = subprocess.run([*command, "--status"], cwd=killed, env=env, capture_output=True, text=True, check=True)
    assert status.stdout.splitlines()[-1].startswith("1 evaluated, 0 trained, 0 in progress, 0 interrupted, "
                                                     "0 not started; no training left")
