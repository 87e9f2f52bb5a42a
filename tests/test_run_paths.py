from pathlib import Path

import yaml

from nmtbench.run_paths import RunPaths

ROOT = Path(__file__).resolve().parents[1]


def entries(stage: dict) -> set[str]:
    """The paths a dvc.yaml stage declares as outputs, metrics or plots (an entry may carry options)."""
    return {next(iter(entry)) if isinstance(entry, dict) else entry
            for key in ("outs", "metrics", "plots") for entry in stage.get(key, [])}


def test_run_paths_are_the_pipelines_templated_outputs():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    declared = {path.replace("${item.model}", "transformer").replace("${item.seed}", "42")
                for name in ("train", "evaluate") for path in entries(stages[name])}
    paths = RunPaths("transformer", 42)
    assert declared == {str(p) for p in (paths.model_dir, paths.train_metrics, paths.learning_curve,
                                        paths.results_dir, paths.attention, paths.eval_metrics)}
    assert str(paths.checkpoint) == "models/transformer/seed42/best.ckpt"
    assert str(paths.translation("test_2016_flickr")) == "results/transformer/seed42/test_2016_flickr.txt"
    assert "models/${item.model}/seed${item.seed}" in stages["evaluate"]["deps"]  # the folder train writes
    assert "models/${beam_sweep.model}/seed${beam_sweep.seed}" in stages["beam_sweep"]["deps"]


def test_a_root_moves_every_tree():
    paths = RunPaths("rnn", 7, Path("/tmp/ws"))
    assert [p.as_posix() for p in (paths.model_dir, paths.metrics_dir, paths.results_dir)] == [
        "/tmp/ws/models/rnn/seed7", "/tmp/ws/metrics/rnn/seed7", "/tmp/ws/results/rnn/seed7"]
