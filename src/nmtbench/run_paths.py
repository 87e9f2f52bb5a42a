"""Where the runs of the models x seeds grid keep their files; dvc.yaml's templated outs name the same paths.

Each run has one folder `<model>/seed<seed>` under each of the three output trees: models/ (the checkpoint
and the tokenizer it was trained with), metrics/ (what compare and the report read) and results/ (the
translations). The stages that span runs (compare, report, beam sweep, analyze) write beside them in results/.
Tuning writes per model, not per run: the study under tuning/<model>/ and the winner, tuned/<model>.yaml.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MODELS, METRICS, RESULTS = Path("models"), Path("metrics"), Path("results")
TUNING, TUNED = Path("tuning"), Path("tuned")

# why a run meant to stop early can end before it and go on when that limit is raised (neither limit is part of the
# run's fingerprint): its train.json stopped_by -> the train key to raise
RAISABLE = {"max_epochs": "max_epochs", "budget": "budget.value"}


def tuned_file(model: str, root: Path = Path(".")) -> Path:
    """The winning params of the model's tuning, which its train stages use (nmtbench.training.tuning)."""
    return root / TUNED / f"{model}.yaml"


@dataclass(frozen=True)
class RunPaths:
    model: str
    seed: int
    root: Path = Path(".")  # the project (or workspace) the trees are in

    @property
    def name(self) -> Path:
        return Path(self.model) / f"seed{self.seed}"

    @property
    def model_dir(self) -> Path:
        return self.root / MODELS / self.name

    @property
    def checkpoint(self) -> Path:
        return self.model_dir / "best.ckpt"

    @property
    def unfinished(self) -> Path:
        """What a run needs to continue after an interruption (last.ckpt, the snapshots to average); removed once
        it has finished."""
        return self.model_dir / "unfinished"

    @property
    def train_lock(self) -> Path:
        """The lock of the run's training, holding its pid (beside the model folder: Lightning warns of a non-empty
        one)."""
        return self.model_dir.with_name(f"{self.model_dir.name}.lock")

    @property
    def metrics_dir(self) -> Path:
        return self.root / METRICS / self.name

    @property
    def train_metrics(self) -> Path:
        return self.metrics_dir / "train.json"

    @property
    def learning_curve(self) -> Path:
        return self.metrics_dir / "learning_curve.csv"

    @property
    def eval_metrics(self) -> Path:
        return self.metrics_dir / "eval.json"

    @property
    def attention(self) -> Path:
        return self.metrics_dir / "attention.json"

    @property
    def results_dir(self) -> Path:
        return self.root / RESULTS / self.name

    def translation(self, split: str) -> Path:
        return self.results_dir / f"{split}.txt"
