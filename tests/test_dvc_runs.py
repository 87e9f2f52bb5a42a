"""Real `dvc repro` runs of the smoke profile cut to two models: a failed stage loses nothing, nor does a bad model
block (two runs from scratch scoring the same, one through `nmtbench launch`: tests/test_pipeline.py)."""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.project import keep_models, pipeline_env

ROOT = Path(__file__).resolve().parents[1]
MIRROR = os.environ.get("NMTBENCH_DATA_MIRROR")
MODELS = ("transformer", "lstm_attention_dot")  # the reproduction: one of each family


def runner(folder: Path):
    """run(*command, check=True) in folder, as the pipeline's stages run: one torch thread, as each launched job
    gets (the Transformers' float sums change with the thread count), W&B off."""
    env = pipeline_env(WANDB_MODE="disabled", OMP_NUM_THREADS="1")

    def run(*command, check=True):
        return subprocess.run(command, cwd=folder, env=env, check=check, capture_output=True, text=True)
    return run


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> Path:
    """A smoke workspace with only MODELS, its transformer trained and evaluated by dvc repro, all committed; each
    test changes a copy of it."""
    if not MIRROR:
        pytest.skip("set NMTBENCH_DATA_MIRROR to a Multi30k mirror folder "
                    "(make test does when one is beside the checkout)")
    folder = tmp_path_factory.mktemp("evaluated")
    run = runner(folder)
    run(sys.executable, "-m", "nmtbench", "--params", str(ROOT / "params.yaml"), "workspace", str(folder),
        "--profile", str(ROOT / "profiles/smoke.yaml"))
    keep_models(folder, MODELS, tune={"trials": 0})  # untuned as in params.yaml; the smoke pipeline covers tuning
    run("dvc", "repro", "evaluate@transformer-42")
    commit(run, "two models, one trained and evaluated")
    return folder


def copy_of(evaluated: Path, tmp_path: Path):
    """A copy of the evaluated workspace (its git history and DVC cache too) and run() there."""
    folder = tmp_path / "workspace"
    shutil.copytree(evaluated, folder, symlinks=True)
    return folder, runner(folder)


def contents(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for top in ("data/stats.json", "data/tokenized", "models", "metrics", "results")
            for p in sorted([folder / top, *(folder / top).rglob("*")]) if p.is_file()}


def commit(run, message: str):
    run("git", "add", "-A")
    run("git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", message)


@pytest.mark.slow
def test_after_a_failed_stage_dvc_checkout_restores_every_output(evaluated, tmp_path):
    """DVC deletes a stage's outputs before the stage can refuse bad params: all of them come back."""
    folder, run = copy_of(evaluated, tmp_path)
    before = contents(folder)
    assert {"data/stats.json", "metrics/transformer/seed42/train.json", "metrics/transformer/seed42/learning_curve.csv",
            "metrics/transformer/seed42/eval.json", "metrics/transformer/seed42/attention.json"} <= set(before)
    for stage, block, key, mistake in (("prepare", "data", "max_length", -1),
                                       ("train@transformer-42", "train", "lr", -0.1),  # the reproduction
                                       ("evaluate@transformer-42", "evaluate", "beam", 0)):
        params = yaml.safe_load((folder / "params.yaml").read_text())
        params[block][key] = mistake
        (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        failed = run("dvc", "repro", stage, check=False)
        assert failed.returncode != 0
        assert f"error: {block}.{key}: must be > 0, got {mistake}" in failed.stderr + failed.stdout

        run("git", "checkout", "params.yaml")
        # the stages run so far: `dvc checkout` alone would also name the other model's, never run here
        run("dvc", "checkout", "evaluate@transformer-42", "--with-deps")
        status = run("dvc", "status", "evaluate@transformer-42", "--with-deps").stdout
        assert "Data and pipelines are up to date." in status  # nothing to retrain
        assert contents(folder) == before


@pytest.mark.slow
def test_make_repro_with_a_bad_model_block_loses_nothing(evaluated, tmp_path):
    """make repro runs nmtbench check, then dvc repro, which deletes a training's train.json and learning curve
    before `nmtbench train` refuses the model's block. With the default params (tune.trials 0) check built no model
    config, so such a block cost those files; now check refuses it, and what params alone tell of the tying."""
    folder, run = copy_of(evaluated, tmp_path)
    before = contents(folder)
    assert {"metrics/transformer/seed42/train.json", "metrics/transformer/seed42/learning_curve.csv"} <= set(before)
    for changes, message in (
            ({"tie_embeddings": "maybe"}, "models.transformer.tie_embeddings: 'maybe' is not valid; choose one of all, "
                                          "source_target, target_output, none"),
            ({"family": "no_such_module:Model"}, "models.transformer.family: cannot import no_such_module"),
            ({"tie_embeddings": "all", "joint": False}, "models.transformer.tie_embeddings: all makes the source and "
                                                        "the target embedding one matrix, which needs one joint "
                                                        "vocabulary")):
        params = yaml.safe_load((folder / "params.yaml").read_text())
        params["tokenize"]["joint"] = changes.pop("joint", True)
        params["models"]["transformer"].update(changes)
        (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        repro = run("make", "repro", check=False)
        assert repro.returncode != 0
        assert f"error: {message}" in repro.stderr
        assert contents(folder) == before
        assert "Running stage" not in repro.stdout
        run("git", "checkout", "params.yaml")
