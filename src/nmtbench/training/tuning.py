"""Stage `tune@<model>`: the same search for every model, scored on validation BLEU, with Optuna.

Every model gets `tune.trials` trials (the fairness rule), each a real training run through `train` at the
trial budget `tune.budget`, scored by its best greedy val BLEU. Trial 0 is params.yaml's own values, so the
untuned model's score at the trial budget is measured the same way as the winner's. Trials run in this
process, each in a scratch folder removed afterwards, and open only the train and val splits.

The study lives in an Optuna storage: a SQLite file by default, or any RDB URL (`tune.storage`) that workers
on several machines share, each running `nmtbench tune <model>`. Its name is a fingerprint of everything a
trial's score depends on, so a changed space, budget or model starts a new study, while a rerun of an
unchanged one resumes it (and, once finished, only writes the winner again). A worker's heartbeat marks its
trial alive; a killed worker's trial goes stale, is marked FAIL by the next worker and retried.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING
from unittest import mock

import yaml

from nmtbench.config import ConfigError, KnobConfig, Params, TuneConfig
from nmtbench.files import write_json, write_text
from nmtbench.models.registry import FAMILIES, model_config
from nmtbench.progress import progress_bar
from nmtbench.run_paths import TUNING, tuned_file

# Optuna, SQLAlchemy, the vocabularies' readers (datasets, torch) and training (Lightning) are imported in the
# functions that search: a tune stage with tune.trials 0 writes its file without any of them, which would be most
# of its time.
if TYPE_CHECKING:
    import optuna

# train keys a search may change; the rest (budget, devices, epochs, validation) are the same for every trial
TUNABLE_TRAIN = ("lr", "warmup_steps", "label_smoothing", "gradient_clip_val", "batch_tokens", "schedule",
                 "accumulate_grad_batches")
SHARED_KNOBS = ("lr", "warmup_steps", "label_smoothing", "dropout")  # what every family of params.yaml searches


def search_space(params: Params, model: str) -> dict[str, tuple[str, KnobConfig, object]]:
    """name -> (train or model, its range, params.yaml's value) for the family of `model`, each name checked."""
    block = params.model_block(model)
    cfg, family = model_config(model, block), block["family"]
    for named in params.tune.space:  # a built-in family's name, or an own model's package.module:Class
        if named not in FAMILIES and ":" not in named:
            raise ConfigError(f"tune.space.{named}: not a family; name one of {', '.join(FAMILIES)}, or an own model's "
                              "package.module:Class")
    fields = type(cfg).model_fields
    knobs = params.tune.space.get(family) or shared_knobs(params.tune.space, family, model, fields)
    space = {}
    for name, knob in knobs.items():
        where = f"tune.space.{family}.{name}"
        if name in TUNABLE_TRAIN:
            part, value = "train", getattr(params.train, name)
        elif name in fields:
            part, value = "model", getattr(cfg, name)
        else:
            raise ConfigError(f"{where}: not a tunable key; choose one of {', '.join(TUNABLE_TRAIN)} or a key of "
                              f"family {family} ({', '.join(fields)})")
        inside = value in knob.choices if knob.choices is not None else knob.low <= value <= knob.high
        if not inside:
            raise ConfigError(f"{where}: params.yaml's value {value!r} is outside the range; widen it, so that "
                              "trial 0 (the untuned model) is part of the search")
        space[name] = (part, knob, value)
    return space


def shared_knobs(space: dict[str, dict[str, KnobConfig]], family: str, model: str, fields) -> dict[str, KnobConfig]:
    """For a family tune.space does not name (an own model's): the knobs every family searches, SHARED_KNOBS
    (dropout where its config has one), each over the one range the named families give it, so it is searched as
    every other model is."""
    knobs = {}
    for name in SHARED_KNOBS:
        if name == "dropout" and name not in fields:
            continue
        ranges = {json.dumps(searched[name].model_dump(), sort_keys=True): searched[name]
                  for searched in space.values() if name in searched}
        if len(ranges) != 1:
            raise ConfigError(f"tune.space: no search space for family {family} (models.{model}), and no one range "
                              f"of {name} that every family shares; add tune.space.{family}")
        knobs[name] = next(iter(ranges.values()))
    return knobs


def study_name(params: Params, model: str, space: dict, vocab: str) -> str:
    """`<model>-<fingerprint>`: what a trial's score depends on (vocab: subwords.vocab_id of the vocabularies);
    not trials (raising it resumes the study) nor the final budget (trials run at tune.budget)."""
    cfg = params.tune
    scored = {"model": params.models[model], "vocab": vocab, "budget": cfg.budget.model_dump(),
              "train": params.train.model_dump(exclude={"budget", "checkpoint_every_steps", "average_last"}),
              "space": {name: knob.model_dump() for name, (_, knob, _) in space.items()},
              "sampler": cfg.sampler, "seed": cfg.seed}
    return f"{model}-{hashlib.sha256(json.dumps(scored, sort_keys=True).encode()).hexdigest()[:12]}"


def with_values(params: Params, model: str, values: dict[str, dict]) -> Params:
    """params with {"train": {...}, "model": {...}} put into the train block and the model's block."""
    train_cfg = params.train.model_copy(update=values.get("train", {}))
    models = {**params.models, model: {**params.models[model], **values.get("model", {})}}
    return params.model_copy(update={"train": train_cfg, "models": models})


def tuned_params(params: Params, model: str, tokenized_dir: Path = Path("data/tokenized"),
                 root: Path = Path(".")) -> Params:
    """params with the winner of tuned/<model>.yaml put in, refusing a winner of a study for other params."""
    path = tuned_file(model, root)
    if not path.is_file():
        return params
    found = yaml.safe_load(path.read_text())
    if found.get("study"):
        from nmtbench.data.subwords import vocab_id
        from nmtbench.loading import read_vocab

        current = study_name(params, model, search_space(params, model), vocab_id(read_vocab(tokenized_dir)))
        if found["study"] != current:
            raise ConfigError(f"{path}: tuned for other params or data (study {found['study']}, now {current}); "
                              f"run `dvc repro tune@{model}`, or delete the file to train untuned")
    return with_values(params, model, found["params"])


def open_study(cfg: TuneConfig, name: str, folder: Path) -> optuna.Study:
    """The study `name` in tune.storage (default: folder/study.db), created on first use."""
    import optuna
    import sqlalchemy

    url = cfg.storage or f"sqlite:///{folder / 'study.db'}"
    scheme = url.split(":", 1)[0]  # never the rest in a message: a URL may hold a password
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # the retry callback's
    sampler = (optuna.samplers.TPESampler if cfg.sampler == "tpe" else optuna.samplers.RandomSampler)(seed=cfg.seed)
    # Workers starting together race to create the tables and the study: the losers see a duplicate row
    # (IntegrityError) or, on PostgreSQL, a table that another worker has created only in part (ProgrammingError).
    for attempt in range(1, 6):
        try:
            storage = optuna.storages.RDBStorage(
                url, {"connect_args": {"timeout": 300}} if scheme == "sqlite" else None,  # SQLite: wait for a lock
                heartbeat_interval=cfg.heartbeat_seconds, grace_period=2 * cfg.heartbeat_seconds,
                heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(cfg.retries))
            return optuna.create_study(storage=storage, study_name=name, sampler=sampler, direction="maximize",
                                       load_if_exists=True)
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError,
                sqlalchemy.exc.ProgrammingError) as error:
            if attempt == 5:
                raise ConfigError(f"tune.storage: cannot open the {scheme} storage ({type(error).__name__}); check "
                                  "that the database is reachable and writable, then rerun") from None
            time.sleep(attempt)
        except Exception as error:  # SQLAlchemy raises many kinds for a bad URL or a missing driver
            raise ConfigError(f"tune.storage: cannot open the {scheme} storage ({type(error).__name__}); give an "
                              "Optuna RDB URL such as sqlite:///tuning.db or postgresql://user@host/db, with its "
                              "driver installed") from None


def tune(params: Params, model: str, tokenized_dir: Path = Path("data/tokenized"), root: Path = Path(".")) -> dict:
    """Run trials of `model` until tune.trials are COMPLETE (with any other workers on the study); write and
    return the winner (tuned/<model>.yaml), or with trials 0 the file that leaves training as it is."""
    cfg, family = params.tune, params.model_block(model).get("family")
    folder = root / TUNING / model
    folder.mkdir(parents=True, exist_ok=True)
    if cfg.trials == 0:  # no study; the stage's folder holds an empty trial list
        write_json(folder / "trials.json", [])
        return write_winner(model, {"model": model, "family": family, "trials": 0, "params": {}}, root)
    import optuna
    from optuna.trial import TrialState

    from nmtbench.data.subwords import vocab_id
    from nmtbench.loading import read_vocab
    from nmtbench.training.train import train

    counted = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)  # trials that hold a place in the study

    space = search_space(params, model)
    name = study_name(params, model, space, vocab_id(read_vocab(tokenized_dir)))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(cfg, name, folder)
    study.enqueue_trial({knob: value for knob, (_, _, value) in space.items()}, {"default": True}, skip_if_exists=True)
    trial_params = params.model_copy(update={"train": params.train.model_copy(update={
        "budget": cfg.budget, "checkpoint_every_steps": 0, "average_last": 0})})

    def objective(trial: optuna.Trial) -> float:
        ahead = [t for t in study.get_trials(deepcopy=False, states=counted) if t.number < trial.number]
        default_taken = trial.user_attrs.get("default") and any(t.user_attrs.get("default") for t in ahead)
        if len(ahead) >= cfg.trials or default_taken:  # another worker filled the last place meanwhile
            trial.set_user_attr("surplus", True)
            raise optuna.TrialPruned()
        seed_draws(study.sampler, [cfg.seed, trial.number])
        values = {"train": {}, "model": {}}
        for knob, (part, found, _) in space.items():
            values[part][knob] = suggest(trial, knob, found)
        with tempfile.TemporaryDirectory(prefix=f"nmtbench-tune-{model}-") as scratch, \
                mock.patch.dict(os.environ, {"WANDB_MODE": "disabled"}):  # trials are not runs of the grid
            metrics = train(with_values(trial_params, model, values), model, cfg.seed, tokenized_dir, Path(scratch))
        for key in ("steps", "train_seconds", "train_flops", "best_val_loss"):
            trial.set_user_attr(key, metrics[key])
        return metrics["best_val_bleu"]

    def completed() -> int:
        return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    def show(*_) -> None:  # every worker's completed trials, after each trial of this one
        progress.update(completed() - progress.n)

    with progress_bar(cfg.trials, f"trials of {model}", "trial") as progress:
        while (done := completed()) < cfg.trials:
            show()
            failed = len(study.get_trials(deepcopy=False, states=(TrialState.FAIL,)))
            if failed > cfg.trials * (cfg.retries + 1):  # a search that only fails would never end
                write_trials(study, folder)
                raise ValueError(f"{failed} trials of {model} failed; see the errors above and "
                                 f"{folder / 'trials.json'}, fix the cause (or narrow tune.space) and rerun")
            if done + len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))) >= cfg.trials:
                time.sleep(min(cfg.heartbeat_seconds, 10))  # the last trials run elsewhere; wait, in case one dies
                optuna.storages.fail_stale_trials(study)
                continue
            study.optimize(objective, n_trials=cfg.trials - done, catch=(RuntimeError, FloatingPointError),
                           callbacks=[optuna.study.MaxTrialsCallback(cfg.trials, states=counted[:2]), show])
        show()
    write_trials(study, folder)
    return write_winner(model, {"model": model, "family": family, "study": name,
                                **winner(study, cfg.trials, space), "budget": cfg.budget.model_dump()}, root)


def seed_draws(sampler: optuna.samplers.BaseSampler, seed: list[int]) -> None:
    """Seed the draws of one trial by the tuning seed and the trial's number. Every worker holds a sampler of
    its own; seeded once alike, two workers would draw the same values. Optuna has no public way to reseed
    with a given seed, so this sets the samplers' random states (TPE's and the random sampler's it starts with)."""
    for holder in (sampler, getattr(sampler, "_random_sampler", sampler)):
        holder._rng.rng.seed(seed)


def suggest(trial: optuna.Trial, name: str, knob: KnobConfig):
    if knob.choices is not None:
        return trial.suggest_categorical(name, knob.choices)
    if isinstance(knob.low, int) and isinstance(knob.high, int):
        return trial.suggest_int(name, knob.low, knob.high, log=knob.log)
    return trial.suggest_float(name, knob.low, knob.high, log=knob.log)


def winner(study: optuna.Study, trials: int, space: dict) -> dict:
    """The best of the first `trials` complete trials and the untuned trial's score. Equal val BLEU (common
    for short trials of small models, all at 0) is decided by the lower val loss, then the earlier trial."""
    from optuna.trial import TrialState

    complete = sorted(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.number)
    counted = complete[:trials]
    best = max(counted, key=lambda t: (t.value, -t.user_attrs.get("best_val_loss", math.inf), -t.number))
    default = next((t for t in counted if t.user_attrs.get("default")), None)
    values = {"train": {}, "model": {}}
    for knob, (part, _, _) in space.items():
        values[part][knob] = best.params[knob]
    return {"trials": len(counted), "default_val_bleu": default.value if default else None,
            "tuned_val_bleu": best.value, "trial": best.number, "params": values}


def write_trials(study: optuna.Study, folder: Path) -> None:
    """Every trial's number, state, score, values and cost in folder/trials.json, for a reader of the search."""
    write_json(folder / "trials.json", [{"number": t.number, "state": t.state.name, "value": t.value,
                                         "params": t.params, **t.user_attrs} for t in study.get_trials(deepcopy=False)])


def write_winner(model: str, summary: dict, root: Path) -> dict:
    header = f"# written by `nmtbench tune {model}`; train@{model}-<seed> trains with params (docs/tuning.md)\n"
    write_text(tuned_file(model, root), header + yaml.safe_dump(summary, sort_keys=False))
    return summary
