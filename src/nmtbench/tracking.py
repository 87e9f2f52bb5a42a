"""Experiment tracking: the W&B logger for training and the runs of the stages that train nothing.

wandb and lightning are imported inside the functions that need them, so stages that only
write metrics do not pay a second of import time for them.
"""
from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path

from nmtbench.config import WandbConfig
from nmtbench.provenance import describe


class TrackingError(ValueError):
    """W&B online without a usable account; the message says how to log in or stay offline."""


ONLINE_FIX = ("run `wandb login` (or set WANDB_API_KEY) on a machine with network, or log offline: wandb.mode: "
              "offline in params.yaml, or WANDB_MODE=offline for one command")


def require_wandb_login() -> None:
    """Check the API key before an online run starts: without one, wandb.init fails only after its
    90-second timeout, with a traceback; this fails in seconds, in one line."""
    import wandb

    try:
        if wandb.login(prompt=False, verify=True):
            return
        problem = "no W&B API key is set"
    except (wandb.errors.AuthenticationError, wandb.errors.CommError) as error:
        problem = f"W&B refused the API key or could not be reached ({type(error).__name__})"
    raise TrackingError(f"W&B online: {problem}; {ONLINE_FIX}")


def run_tags(name: str, block: dict, seed: int) -> list[str]:
    """Tags of every run of one model (training and evaluation), so a dashboard can filter and group by them."""
    return [name, block["family"], f"seed{seed}"]


def experiment_group(cfg: WandbConfig) -> str:
    """The W&B group of the experiment a stage runs in: `wandb.group`, followed inside `dvc exp run` by the DVC
    experiment's name (DVC exports it as DVC_EXP_NAME), so each experiment's runs group apart without a change
    to the wandb block, which the train and evaluate stages depend on."""
    experiment = os.environ.get("DVC_EXP_NAME")
    return f"{cfg.group}-{experiment}" if experiment else cfg.group


def run_id(name: str, job_type: str) -> str:
    """A run id a person reads in the offline folder's name (offline-run-<time>-<id>): job type and run name,
    then random letters, since W&B ids must be unique in a project and a stage may run again."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{job_type}-{name}")[:48]
    return f"{readable}-{uuid.uuid4().hex[:6]}"


def run_settings(cfg: WandbConfig, name: str, save_dir: Path, config: dict, tags: Sequence[str],
                 job_type: str) -> dict | None:
    """wandb.init's arguments for one run, or None when tracking is disabled.

    Every run of an experiment shares its group (`experiment_group`); `job_type` tells a model's training
    run from its evaluation run, and the run id starts with both (`run_id`). The config holds what
    produced the run (nmtbench.provenance); `finish_run` completes it with the stage's wall time.

    The mode comes from params.yaml (`wandb.mode`) unless the user exported WANDB_MODE, which wins:
    that lets one command go online (or disabled) without editing params.yaml and so without
    invalidating DVC stages. Offline runs need no account; they land in
    `<save_dir>/wandb/offline-run-<YYYYmmdd_HHMMSS>-<id>/` and can be uploaded later with `wandb sync`.
    """
    mode = os.environ.get("WANDB_MODE") or cfg.mode
    if mode == "disabled":
        return None
    if mode == "online":
        require_wandb_login()
    import wandb

    Path(save_dir).mkdir(parents=True, exist_ok=True)
    return {"name": name, "id": run_id(name, job_type), "dir": str(save_dir), "project": cfg.project,
            "group": experiment_group(cfg), "mode": mode, "tags": list(tags),
            "config": {**config, "provenance": describe()}, "job_type": job_type,
            "settings": wandb.Settings(quiet=True)}  # no banner or run history: the stage prints its result


def start_run(cfg: WandbConfig, name: str, save_dir: Path, config: dict, tags: Sequence[str] = (),
              job_type: str = "evaluate"):
    """A W&B run for a stage that trains nothing (evaluation, comparison), or None when tracking is disabled.

    wandb.init itself: Lightning's logger would import Lightning, about 4 s of CPU per stage, for nothing."""
    settings = run_settings(cfg, name, save_dir, config, tags, job_type)
    if settings is None:
        return None
    import wandb

    return wandb.init(**settings)


def make_wandb_logger(cfg: WandbConfig, name: str, save_dir: Path, config: dict, tags: Sequence[str] = ()):
    """A Lightning WandbLogger for one training run (`run_settings`), or None when tracking is disabled."""
    settings = run_settings(cfg, name, save_dir, config, tags, job_type="train")
    if settings is None:
        return None
    from lightning.pytorch.loggers import WandbLogger

    # mode goes straight to wandb.init; WandbLogger's own offline=True would set WANDB_MODE for the
    # whole process, leaking into every later run.
    logger = WandbLogger(save_dir=settings.pop("dir"), **settings)
    # Lightning passes anonymous=None to wandb.init, which W&B then warns has no effect, once per run
    logger._wandb_init.pop("anonymous", None)
    return logger


def finish_run(run, summary: dict, provenance: dict) -> None:
    """Record the final figures in the run summary and the stage's provenance in its config; close the run
    (a training's: its logger's `experiment`).

    `finish` returns before the offline `.wandb` file is complete; `teardown` waits for it, so a
    reader in the same process (a test, a later stage) sees every record.
    """
    import wandb

    run.config.update({"provenance": provenance}, allow_val_change=True)
    run.summary.update(summary)
    run.finish()
    wandb.teardown()


def log_tables(run, tables: dict[str, tuple[list[str], list[list]]]) -> None:
    """Log {key: (columns, rows)} as wandb.Tables to the run."""
    import wandb

    run.log({key: wandb.Table(columns=columns, data=rows) for key, (columns, rows) in tables.items()})
