from pathlib import Path

from helpers.tracking import quiet_offline_env
from helpers.wandb_offline import read_offline_run, read_table
from nmtbench.config import WandbConfig
from nmtbench.evaluation.headline import bleu_metrics, log_experiment, table

KEYS = ("bleu", "bleu_lc", "chrf")
SCORES = {"rnn": (8.99, 9.51, 30.12), "transformer": (25.5, 26.02, 52.0)}
COMPARISON = {
    "splits": ["test_2016_flickr", "test_2017_flickr"], "seeds": [42, 43], "baseline": "transformer",
    "models": {name: {"test_2016_flickr": {key: {"mean": value} for key, value in zip(KEYS, row)},
                      "test_2017_flickr": {key: {"mean": 1.0} for key in KEYS}} for name, row in SCORES.items()},
    "provenance": {"compare": {"wall_seconds": 3.5}},
}


def test_the_dvc_metrics_are_each_models_bleu_on_the_first_test_set():
    assert bleu_metrics(COMPARISON) == {"rnn": 8.99, "transformer": 25.5}
    assert table(COMPARISON) == (["model", "BLEU", "BLEU lc", "chrF"],
                                 [["rnn", 8.99, 9.51, 30.12], ["transformer", 25.5, 26.02, 52.0]])


def test_one_compare_run_per_experiment_holds_the_headline_table(tmp_path, monkeypatch):
    quiet_offline_env(monkeypatch, tmp_path)
    monkeypatch.setenv("DVC_EXP_NAME", "beam8")
    log_experiment(WandbConfig(group="default"), COMPARISON, tmp_path)
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*-compare-default-beam8-*")
    read = read_offline_run(run_dir)
    assert read["run"] == {"name": "default-beam8", "group": "default-beam8", "job_type": "compare",
                           "tags": ["comparison"]}
    assert {key: read["config"][key] for key in ("models", "seeds", "baseline", "split")} == {
        "models": ["rnn", "transformer"], "seeds": [42, 43], "baseline": "transformer", "split": "test_2016_flickr"}
    assert read["config"]["provenance"] == {"wall_seconds": 3.5}
    logged = read_table(run_dir, read["summary"]["headline/test_2016_flickr"])
    assert (logged["columns"], logged["data"]) == table(COMPARISON)
    assert read["summary"]["test_2016_flickr/chrf/transformer"] == 52.0


def test_no_run_when_tracking_is_off(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    log_experiment(WandbConfig(), COMPARISON, tmp_path)
    assert not Path(tmp_path / "wandb").exists()
