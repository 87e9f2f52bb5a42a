import pytest

from nmtbench.training.curves import LearningCurve, best_validation


class Clock:
    """A clock that moves only when the test moves it."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_learning_curve_state_round_trips_and_its_clock_continues(tmp_path):
    clock = Clock(100.0)
    curve = LearningCurve(tmp_path / "learning_curve.csv", None, clock=clock)
    curve.rows = [{"step": 3, "epoch": 1.0, "wall_seconds": 4.5, "target_tokens": 50, "train_flops": 7000,
                   "train_loss": 5.9, "val_loss": 5.2, "val_ppl": 183.86, "val_bleu": ""}]
    curve.on_train_start(None, None)
    clock.now += 5.0  # five seconds of training so far
    curve._loss_sum, curve._batches = 2.5, 2
    state = curve.state_dict()
    assert state == {"rows": curve.rows, "elapsed": 5.0, "loss_sum": 2.5, "batches": 2}

    restarted = Clock(1000.0)  # the process resuming the run: its clock has another origin
    resumed = LearningCurve(tmp_path / "learning_curve.csv", None, clock=restarted)
    resumed.load_state_dict(state)
    resumed.on_train_start(None, None)
    assert resumed.rows == curve.rows and (resumed._loss_sum, resumed._batches) == (2.5, 2)
    restarted.now += 2.5
    assert resumed.state_dict()["elapsed"] == resumed.elapsed == 7.5  # the five seconds before the restart, 2.5 after
    assert LearningCurve(tmp_path / "other.csv", None, clock=clock).state_dict()["elapsed"] == 0.0  # never started


@pytest.mark.parametrize("metric, step", [("bleu", 20), ("loss", 30)])
def test_the_best_validation_is_the_first_of_the_best_score_by_the_stopping_metric(metric, step):
    rows = [{"step": 10, "val_bleu": 5.0, "val_loss": 3.0}, {"step": 20, "val_bleu": 9.5, "val_loss": 2.5},
            {"step": 30, "val_bleu": 9.5, "val_loss": 2.25}, {"step": 40, "val_bleu": 7.0, "val_loss": 2.25}]
    assert best_validation(rows, metric)["step"] == step  # a tie keeps the first, as ModelCheckpoint does


def test_a_run_resumed_from_its_final_checkpoint_writes_its_curve_back_without_validating(tmp_path):
    """#69: a run that stopped at max_epochs, resumed from its last.ckpt with nothing left to train, ends with no
    validation; its curve, which dvc deleted before the rerun, comes back from the rows the checkpoint carried."""
    import lightning as L
    import torch
    from lightning.pytorch.demos.boring_classes import BoringModel

    def trainer(*callbacks):
        return L.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=0, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         callbacks=list(callbacks), default_root_dir=tmp_path)

    first = trainer()
    first.fit(BoringModel())
    last = tmp_path / "last.ckpt"
    first.save_checkpoint(last)
    row = {"step": 2, "epoch": 1.0, "wall_seconds": 4.5, "target_tokens": 50, "train_flops": 7000, "train_loss": 5.9,
           "val_loss": 5.2, "val_ppl": 183.86, "val_bleu": 1.5}
    checkpoint = torch.load(last, weights_only=False)
    checkpoint["callbacks"]["LearningCurve"] = {"rows": [row], "elapsed": 4.5, "loss_sum": 0.0, "batches": 0}
    torch.save(checkpoint, last)
    path = tmp_path / "learning_curve.csv"
    trainer(LearningCurve(path, None)).fit(BoringModel(), ckpt_path=last)
    assert path.read_text() == ("step,epoch,wall_seconds,target_tokens,train_flops,train_loss,val_loss,val_ppl,"
                                "val_bleu\n2,1.0,4.5,50,7000,5.9,5.2,183.86,1.5\n")
