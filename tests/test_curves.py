import time

from nmtbench.training.curves import LearningCurve


def test_learning_curve_state_round_trips_and_its_clock_continues(tmp_path):
    curve = LearningCurve(tmp_path / "learning_curve.csv")
    curve.rows = [{"step": 3, "epoch": 1.0, "wall_seconds": 4.5, "target_tokens": 50, "train_loss": 5.9,
                   "val_loss": 5.2, "val_ppl": 183.86, "val_bleu": ""}]
    curve.on_train_start(None, None)
    curve._started -= 5.0  # five seconds of training so far
    curve._loss_sum, curve._batches = 2.5, 2

    resumed = LearningCurve(tmp_path / "learning_curve.csv")
    resumed.load_state_dict(curve.state_dict())
    resumed.on_train_start(None, None)
    assert resumed.rows == curve.rows and (resumed._loss_sum, resumed._batches) == (2.5, 2)
    assert 5.0 <= time.perf_counter() - resumed._started < 6.0
    assert LearningCurve(tmp_path / "other.csv").state_dict()["elapsed"] == 0.0  # never started
