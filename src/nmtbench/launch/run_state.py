"""Where every run of a workspace stands, read from the files training and evaluation write (train.json, eval.json,
the learning curve, the resume checkpoint), or from the folder `nmtbench converge --export` copied finished runs to,
each such run checked to have been trained with this workspace's recipe and subwords."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from nmtbench.config import ConfigError, Params
from nmtbench.data.subwords import vocab_id
from nmtbench.files import lock_owner, read_csv, read_json
from nmtbench.launch.scheduler import FOLDER, alive
from nmtbench.loading import read_vocab, run_description
from nmtbench.run_paths import RunPaths
from nmtbench.training.curves import best_validation


@dataclass
class RunProgress:
    model: str
    seed: int
    family: str
    state: str  # evaluated, trained, in progress (a launcher is running here), interrupted, not started, or exported
                # (finished elsewhere and copied to the folder `--from` names: not trained here)
    epochs: float = 0.0
    seconds: float = 0.0  # training wall time so far, validations included
    best_val_bleu: float | None = None
    stopped_by: str | None = None
    steps: int = 0  # optimizer updates so far
    max_epochs: int | None = None  # its recipe's limits (train.max_epochs, train.max_steps; None: unlimited)
    max_steps: int | None = None
    patience: int = 0  # train.early_stopping_patience: the validations without a better one that stop it
    best_epoch: float | None = None  # an unfinished run's best validation so far by its early-stopping metric
    training_pid: int = 0  # the process training it now (its run lock's), 0 for none

    @property
    def seconds_per_epoch(self) -> float | None:
        return self.seconds / self.epochs if self.epochs >= 1 else None

    @property
    def epochs_to_update_limit(self) -> float | None:
        """The epochs its max_steps come to at the updates an epoch measured so far; None without either."""
        return self.max_steps * self.epochs / self.steps if self.max_steps and self.steps and self.epochs >= 1 else None

    @property
    def stopped_early(self) -> bool:
        """Ended by early stopping before any update limit: one that early stopping ended at its limit (fairseq's
        recipe does) tells nothing of when early stopping comes."""
        return self.stopped_by == "early_stopping" and not (self.max_steps and self.steps >= self.max_steps)

    @property
    def training_done(self) -> bool:
        return self.state in ("evaluated", "trained", "exported")


def progress(params: Params, root: Path = Path("."), exported: Path | None = None,
             exported_params: Params | None = None) -> list[RunProgress]:
    """Where every run of the models x seeds grid stands, from the files training and evaluation write. exported:
    a folder --export wrote elsewhere (a machine since lost, say), whose finished runs count as done where this
    workspace has not started them; exported_params: the params.yaml it copied, which must train them as these
    params do."""
    launcher = lock_owner(root / FOLDER / "launch.lock")
    unfinished = "in progress" if launcher and alive(launcher) else "interrupted"
    found = []
    for model, block in params.models.items():
        for seed in params.seeds:
            paths = RunPaths(model, seed, root)
            recipe = params.for_model(model).train
            run = RunProgress(model, seed, str(block.get("family")), "not started", max_epochs=recipe.max_epochs,
                              max_steps=recipe.max_steps if recipe.max_steps > 0 else None,
                              patience=recipe.early_stopping_patience or 0)
            if paths.train_metrics.is_file():
                state = "evaluated" if paths.eval_metrics.is_file() else "trained"
                trained(run, state, read_json(paths.train_metrics))
            else:
                rows = curve_rows(paths)
                if rows is not None:
                    run.state = unfinished
                if rows:
                    run.epochs, run.seconds = float(rows[-1]["epoch"]), float(rows[-1]["wall_seconds"])
                    run.steps = int(float(rows[-1]["step"]))
                    bleus = [float(row["val_bleu"]) for row in rows if row["val_bleu"] not in ("", None)]
                    run.best_val_bleu = max(bleus) if bleus else None
                    run.best_epoch = best_epoch(rows, recipe.early_stopping_metric)
            owner = lock_owner(paths.train_lock)
            if not run.training_done and owner and alive(owner):  # a launcher killed alone leaves its training on
                run.state, run.training_pid = "in progress", owner
            elsewhere = finished_run(model, seed, root, exported) if exported and run.state == "not started" else None
            if elsewhere:
                same_recipe(params, exported_params or params, model, seed, exported)
                same_subwords(elsewhere[0], root / "data" / "tokenized", model, seed, exported)
                trained(run, "exported", elsewhere[0])
            found.append(run)
    return found


def best_epoch(rows: list[dict], metric: str) -> float | None:
    """The epoch of the validation early stopping counts from so far (training.curves.best_validation); None before
    the first that measured the metric."""
    column = {"bleu": "val_bleu", "loss": "val_loss"}[metric]
    measured = [row for row in rows if row.get(column) not in ("", None)]
    return float(best_validation(measured, metric)["epoch"]) if measured else None


def trained(run: RunProgress, state: str, metrics: dict) -> None:
    """run as its train.json (metrics) says it ended."""
    run.state, run.epochs, run.seconds = state, metrics["epochs"], metrics["train_seconds"]
    run.best_val_bleu, run.stopped_by = metrics.get("best_val_bleu"), metrics.get("stopped_by")
    run.steps = metrics.get("steps", 0)


def same_recipe(params: Params, recipe: Params, model: str, seed: int, exported: Path) -> None:
    """Refuse, in one line, an exported run whose recipe is not what these params would train it with."""
    differ = recipe_difference(params, recipe, model, seed)
    if differ:
        part, keys = differ
        raise ConfigError(f"--from {exported}: {model} seed {seed} was trained there with other {part} params "
                          f"({', '.join(keys) or 'the whole block'}: not as in this workspace's params.yaml); "
                          f"train it here (leave --from out) or make the params agree")


def same_subwords(metrics: dict, tokenized_dir: Path, model: str, seed: int, exported: Path) -> None:
    """Refuse, in one line, an exported run trained on other subwords than this workspace's: the same params and data
    make the same subwords, so a difference means the tokenizer or its library changed. Runs whose train.json predates
    recording its subwords, or a workspace not tokenized yet, are not checked."""
    record = tokenized_dir / "vocab.json"
    if "vocab" not in metrics or not record.is_file():
        return
    here = vocab_id(read_vocab(tokenized_dir))
    if metrics["vocab"] != here:
        raise ConfigError(f"--from {exported}: {model} seed {seed} was trained on other subwords (vocab "
                          f"{metrics['vocab'][:12]} there, {here[:12]} in {record}); train it here (leave --from "
                          "out), or tokenize with the sentencepiece version and settings it was trained with")


def recipe_difference(params: Params, recipe: Params, model: str, seed: int) -> tuple[str, list[str]] | None:
    """Where the two train the run differently: the part (model, train, data, tokenize) and its keys that differ
    (none named where one has no such model), the training keys as the run's fingerprint reads them; None where
    they train it alike."""
    def described(source: Params) -> dict:
        if model not in source.models:
            return {"model": None}
        return {**run_description(source.model_block(model), source.for_model(model).train.model_dump(), "", seed),
                "data": source.data.model_dump(), "tokenize": source.tokenize.model_dump()}

    here, there = described(params), described(recipe)
    for part in here:
        if here[part] != there.get(part):
            both = isinstance(here[part], dict) and isinstance(there.get(part), dict)
            return part, sorted(key for key in {**here[part], **there[part]}
                                if here[part].get(key) != there[part].get(key)) if both else []
    return None


def curve_rows(paths: RunPaths) -> list[dict] | None:
    """The learning curve of an unfinished run so far; None when it has not started. dvc deletes the curve file
    when it reruns a training, so until the resumed run's first validation the rows are read from the checkpoint
    it resumes, which carries them."""
    if paths.learning_curve.is_file():
        return read_csv(paths.learning_curve)
    last = paths.unfinished / "last.ckpt"
    if not last.is_file():
        return None
    try:
        checkpoint = torch.load(last, map_location="cpu", weights_only=False)
        return list(checkpoint["callbacks"]["LearningCurve"]["rows"])
    except Exception:  # torch raises many kinds for a damaged file; training sets it aside, here it is just unread
        return []


def exported_rows(folder: Path, model: str, seed: int) -> list[dict] | None:
    """The learning curve export_finished copied to folder; None for a run not there."""
    file = Path(folder) / model / f"seed{seed}" / "learning_curve.csv"
    if not file.is_file():
        return None
    return read_csv(file)


def finished_run(model: str, seed: int, root: Path, exported: Path | None) -> tuple[dict, dict, list[dict]] | None:
    """An evaluated run's train.json, eval.json and learning curve, from the workspace at root or the folder its
    export went to; None for a run not evaluated (not exported)."""
    if exported is not None:
        folder = Path(exported) / model / f"seed{seed}"
        train, scores = folder / "train.json", folder / "eval.json"
        if train.is_file() != scores.is_file():  # --export copies both: one lost would drop the run without a word
            there, lost = (train, scores) if train.is_file() else (scores, train)
            raise ConfigError(f"{lost}: missing beside {there.name}; restore it (git checkout {lost}) or export the "
                              "run again (nmtbench converge --export)")
    else:
        paths = RunPaths(model, seed, root)
        train, scores = paths.train_metrics, paths.eval_metrics
    if not (train.is_file() and scores.is_file()):
        return None
    return read_json(train), read_json(scores), rows_of(model, seed, root, exported) or []


def rows_of(model: str, seed: int, root: Path, exported: Path | None) -> list[dict] | None:
    """A run's curve so far, from the workspace at root, or from the folder its export went to."""
    return exported_rows(exported, model, seed) if exported is not None else curve_rows(RunPaths(model, seed, root))


def run_files(model: str, seed: int, root: Path, exported: Path | None) -> tuple[list[Path], list[Path]]:
    """A run's metrics files (train.json, learning_curve.csv, eval.json) and test translations, in the workspace at
    root or in the folder its export went to."""
    if exported is not None:
        folder = Path(exported) / model / f"seed{seed}"
        metrics = [folder / name for name in ("train.json", "learning_curve.csv", "eval.json")]
        return metrics, sorted(folder.glob("*.txt"))
    paths = RunPaths(model, seed, root)
    return [paths.train_metrics, paths.learning_curve, paths.eval_metrics], sorted(paths.results_dir.glob("*.txt"))
