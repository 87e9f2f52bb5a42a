import re
import shutil
from pathlib import Path

import pytest
import wandb

from helpers.tracking import quiet_offline_env
from helpers.wandb_offline import read_offline_run, read_table
from nmtbench.config import WandbConfig
from nmtbench.tracking import (
    experiment_group,
    finish_run,
    log_tables,
    make_wandb_logger,
    run_tags,
    start_run,
)


def finish(run) -> Path:
    """Finish run and return its folder once complete.

    run.finish() returns before wandb-core has flushed the .wandb file; tearing the service down
    waits for it (process exit does the same, so stages reading a finished stage's runs are safe).
    """
    run.finish()
    wandb.teardown()
    return Path(run.dir).parent


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("wandb")
    with pytest.MonkeyPatch.context() as monkeypatch:
        quiet_offline_env(monkeypatch, root)
        run = wandb.init(mode="offline", dir=root, project="t", config={"a": 1})
        run.log({"val_loss": 1.5, "epoch": 0})
        run.log({"val_loss": 1.25, "epoch": 1})
        run.summary["best_val_loss"] = 1.25
        return finish(run)


def test_offline_run_folder_layout(logged_run):
    assert logged_run.name.startswith("offline-run-")
    assert [p.name for p in logged_run.glob("run-*.wandb")] == [f"run-{logged_run.name.rsplit('-', 1)[1]}.wandb"]


def test_read_offline_run_finds_logged_values(logged_run):
    run = read_offline_run(logged_run)
    assert run["config"] == {"a": 1}
    assert [(row["_step"], row["val_loss"], row["epoch"]) for row in run["history"]] == [(0, 1.5, 0), (1, 1.25, 1)]
    assert run["summary"]["best_val_loss"] == 1.25
    assert run["summary"]["epoch"] == 1


def test_records_split_across_blocks(tmp_path, monkeypatch):
    # A config larger than a 32 KiB block and enough rows to span many blocks exercise
    # the FIRST/MIDDLE/LAST chunks and the zero-filled block tails.
    quiet_offline_env(monkeypatch, tmp_path)
    run = wandb.init(mode="offline", dir=tmp_path, project="t", config={"notes": "x" * 70_000})
    for step in range(400):
        run.log({"loss": step / 4, "split/name": "val", "nested": {"n": step}})
    run_dir = finish(run)
    assert (run_dir / f"run-{run.id}.wandb").stat().st_size > 3 * 32 * 1024

    history = read_offline_run(run_dir)["history"]
    assert read_offline_run(run_dir)["config"] == {"notes": "x" * 70_000}
    assert [row["loss"] for row in history] == [step / 4 for step in range(400)]
    assert history[7]["split/name"] == "val" and history[7]["nested"] == {"n": 7}


def test_corrupt_log_is_reported(logged_run, tmp_path):
    copy = tmp_path / logged_run.name
    shutil.copytree(logged_run, copy)
    log = next(copy.glob("run-*.wandb"))
    data = bytearray(log.read_bytes())
    data[20] ^= 0xFF
    log.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt chunk at byte 7"):
        read_offline_run(copy)


def test_truncated_log_yields_the_complete_records(logged_run, tmp_path):
    copy = tmp_path / logged_run.name
    shutil.copytree(logged_run, copy)
    log = next(copy.glob("run-*.wandb"))
    log.write_bytes(log.read_bytes()[:-3])
    assert read_offline_run(copy)["config"] == {"a": 1}


def test_folder_without_run_log(tmp_path):
    with pytest.raises(FileNotFoundError, match="expected one run-<id>.wandb file, found 0"):
        read_offline_run(tmp_path)


def test_wandb_logger_round_trip(tmp_path, monkeypatch):
    import torch  # noqa: F401  loaded in the training stage the logger is for, whose torch threads the run records

    quiet_offline_env(monkeypatch, tmp_path)
    cfg = WandbConfig(project="nmtbench-test", group="exp1")
    logger = make_wandb_logger(cfg, "transformer", tmp_path / "runs", {"model": {"d_model": 4}, "lr": 0.1},
                               tags=["transformer"])
    logger.log_metrics({"train_loss": 2.0}, step=5)
    logger.log_metrics({"val_loss": 1.0, "epoch": 0}, step=10)
    run = logger.experiment
    assert (run.project, run.group, run.name, run.tags) == ("nmtbench-test", "exp1", "transformer", ("transformer",))
    run_dir = finish(run)
    assert run_dir.parent == tmp_path / "runs" / "wandb"
    assert run_dir.name.endswith(f"-{logger.version}")

    read = read_offline_run(run_dir)
    assert read["run"] == {"name": "transformer", "group": "exp1", "job_type": "train", "tags": ["transformer"]}
    provenance = read["config"].pop("provenance")  # what produced the run, known when it starts
    assert read["config"] == {"model": {"d_model": 4}, "lr": 0.1}
    assert set(provenance) == {"git", "python", "packages", "device"}
    assert provenance["packages"]["sacrebleu"] == "2.6.0" and provenance["device"]["torch_threads"] >= 1
    assert [{k: v for k, v in row.items() if not k.startswith("_")} for row in read["history"]] == [
        {"train_loss": 2.0, "trainer/global_step": 5},
        {"val_loss": 1.0, "epoch": 0, "trainer/global_step": 10},
    ]


@pytest.mark.parametrize("start", [make_wandb_logger, start_run])
def test_disabled_mode_from_params(monkeypatch, start):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert start(WandbConfig(mode="disabled"), "m", Path("unused"), {}) is None


@pytest.mark.parametrize("start", [make_wandb_logger, start_run])
def test_wandb_mode_env_wins_over_params(monkeypatch, start):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert start(WandbConfig(mode="online"), "m", Path("unused"), {}) is None


def test_tables_are_read_back_from_an_offline_run(tmp_path, monkeypatch):
    quiet_offline_env(monkeypatch, tmp_path)
    cfg = WandbConfig(project="nmtbench-test", group="exp2")
    run = start_run(cfg, "gru", tmp_path, {}, run_tags("gru", {"family": "rnn"}, 7), job_type="evaluate")
    rows = [[0, "A cat.", "Eine Katze.", "Eine Katze ."], [1, "Rain „falls“.", "Regen fällt.", ""]]
    log_tables(run, {"translations/val": (["index", "source", "reference", "hypothesis"], rows),
                     "other": (["x"], [[1.5]])})
    run_dir = finish(run)
    read = read_offline_run(run_dir)
    assert read["run"] == {"name": "gru", "group": "exp2", "job_type": "evaluate", "tags": ["gru", "rnn", "seed7"]}
    table = read_table(run_dir, read["summary"]["translations/val"])
    assert (table["columns"], table["data"]) == (["index", "source", "reference", "hypothesis"], rows)
    assert read_table(run_dir, read["summary"]["other"])["data"] == [[1.5]]
    with pytest.raises(FileNotFoundError, match="the table this run's summary names is missing"):
        read_table(run_dir, {"path": "media/table/absent.table.json"})


def test_offline_folders_name_the_job_and_the_run_and_experiments_group_apart(tmp_path, monkeypatch):
    quiet_offline_env(monkeypatch, tmp_path)
    assert experiment_group(WandbConfig(group="smoke")) == "smoke"
    monkeypatch.setenv("DVC_EXP_NAME", "lr-low")  # as `dvc exp run -n lr-low` exports it to every stage
    run = start_run(WandbConfig(group="smoke"), "gru/seed7", tmp_path, {}, job_type="evaluate")
    assert re.fullmatch(r"evaluate-gru-seed7-[0-9a-f]{6}", run.id)
    finish_run(run, {"bleu": 1.5}, {"wall_seconds": 2.25, "git": {"commit": None, "dirty": None}})
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    assert re.fullmatch(r"offline-run-\d{8}_\d{6}-evaluate-gru-seed7-[0-9a-f]{6}", run_dir.name)
    read = read_offline_run(run_dir)
    assert (read["run"]["name"], read["run"]["group"]) == ("gru/seed7", "smoke-lr-low")
    # the stage's whole provenance, wall time included, replaces the one the run started with
    assert read["config"]["provenance"] == {"wall_seconds": 2.25, "git": {"commit": None, "dirty": None}}
    assert read["summary"]["bleu"] == 1.5
