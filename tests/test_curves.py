from nmtbench.training.curves import LearningCurve


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
