"""The train, evaluate, beam-sweep and translate commands on a tiny dataset, in a scratch project folder."""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nmtbench.cli import main
from nmtbench.config import DataConfig, TokenizeConfig, merge, parse_params
from nmtbench.data.batching import TokenBatchSampler, TranslationData
from nmtbench.data.prepare import prepare
from nmtbench.data.tokenizer import Tokenizer, tokenize
from nmtbench.evaluation.beam_sweep import beam_sweep
from nmtbench.evaluation.evaluate import evaluate, one_line
from nmtbench.training.train import CheckpointError, load_model, train
from nmtbench.tracking import read_offline_run

TINY_PARAMS = {
    "data": {"max_length": 8},
    "tokenize": {"vocab_size": 305},
    "train": {"batch_tokens": 64, "max_epochs": 2, "warmup_steps": 2, "max_time": None},
    "evaluate": {"beam": 2, "max_len_a": 1.0, "max_len_b": 2},
    "beam_sweep": {"model": "tiny", "seed": 42, "beams": [1, 2], "alphas": [1.0]},
    "compare": {"baseline": "tiny", "bootstrap_resamples": 10, "examples": [0]},
    "wandb": {"group": "unit"},
    "models": {"tiny": {"family": "transformer", "d_model": 16, "heads": 2, "layers": 1, "d_ff": 32}},
}


@pytest.fixture
def project(tmp_path, monkeypatch, make_data_mirror):
    """A scratch project folder holding params.yaml, data/prepared and data/tokenized of the tiny mirror."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_SILENT", "true")
    mirror, checksums = make_data_mirror()
    with open(Path(__file__).parents[1] / "params.yaml") as f:
        raw = merge(yaml.safe_load(f), TINY_PARAMS)
    raw["models"] = TINY_PARAMS["models"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    params = parse_params(raw)
    prepare(DataConfig(max_length=8), mirror, checksums=checksums)
    tokenize(TokenizeConfig(vocab_size=305))
    return params


def test_train_writes_checkpoint_metrics_and_an_offline_wandb_run(project):
    metrics = train(project, "tiny")
    assert set(metrics) == {"params", "train_seconds", "train_tokens_per_s", "best_val_loss", "best_val_ppl",
                            "steps", "epochs", "target_tokens"}
    assert metrics["epochs"] == 2 and metrics["steps"] > 0
    assert json.loads(open("metrics/tiny/seed42/train.json").read()) == metrics
    assert sorted(p.name for p in Path("models/tiny/seed42").iterdir()) == ["best.ckpt", "spm.model", "vocab.json"]
    (run,) = Path("wandb").glob("offline-run-*")
    logged = read_offline_run(run)
    assert (logged["config"]["model"], logged["config"]["seed"]) == ("tiny", 42)
    assert logged["summary"]["best_val_loss"] == metrics["best_val_loss"]
    assert min(r["val/loss"] for r in logged["history"] if "val/loss" in r) == pytest.approx(metrics["best_val_loss"], abs=1e-4)


def test_evaluate_and_beam_sweep_score_every_sentence(project):
    train(project, "tiny")
    metrics = evaluate(project, "tiny")
    for split in ("test_2016_flickr", "test_2017_flickr"):
        text = open(f"results/tiny/seed42/{split}.txt", "rb").read()
        assert len(text.decode().splitlines()) == metrics[split]["sentences"] > 0
        assert metrics[split]["hypotheses_sha256"] == hashlib.sha256(text).hexdigest()
        assert {"bleu", "bleu_lc", "chrf", "ter", "bleu_signature", "ter_signature"} <= set(metrics[split])
        assert metrics[split]["beam"] == 2
    assert main(["compare"]) == 0  # reads the translations back, checked against their hashes
    comparison = json.loads(open("results/comparison.json").read())
    assert comparison["models"]["tiny"]["test_2017_flickr"]["bleu"]["mean"] == metrics["test_2017_flickr"]["bleu"]
    assert comparison["examples"]["test_2017_flickr"][0]["outputs"]["tiny"] == open(
        "results/tiny/seed42/test_2017_flickr.txt").read().rstrip("\n")
    sweep = beam_sweep(project)
    assert [(r["beam"], r["alpha"]) for r in sweep["rows"]] == [(1, 1.0), (2, 1.0)]
    assert open("results/beam_sweep.png", "rb").read(4) == b"\x89PNG"
    assert "| 2 | 1 |" in open("results/beam_sweep.md").read()


def test_a_translation_is_written_and_scored_as_one_line():
    assert one_line("Ein\nHund\r\nrennt\x0c.") == "Ein Hund  rennt\x0c."


def test_a_checkpoint_from_another_vocabulary_is_refused(project, tmp_path):
    train(project, "tiny")
    other = tokenize(TokenizeConfig(vocab_size=304), out_dir=tmp_path / "other")
    with pytest.raises(CheckpointError, match=r"was trained with another vocabulary than .*other/spm.model; retrain it \(dvc repro train@tiny-42\)"):
        load_model("models/tiny/seed42/best.ckpt", other)
    with pytest.raises(CheckpointError, match="is missing; train the model first"):
        load_model("models/absent/best.ckpt", Tokenizer("data/tokenized"))


def test_translate_reads_a_file_or_standard_input(project, tmp_path):
    train(project, "tiny")
    (tmp_path / "in.txt").write_text("A dog runs.\nTwo birds fly.\n")
    command = [sys.executable, "-m", "nmtbench", "translate", "models/tiny/seed42"]
    from_file = subprocess.run([*command, "in.txt", "--beam", "3"], capture_output=True, text=True, check=True)
    piped = subprocess.run([*command, "--beam", "3"], input="A dog runs.\nTwo birds fly.\n",
                           capture_output=True, text=True, check=True)
    assert from_file.stdout == piped.stdout and len(piped.stdout.splitlines()) == 2
    assert "sent" in from_file.stderr and piped.stderr == ""  # a progress bar for files only
    nbest = subprocess.run([*command, "--nbest", "2", "--beam", "3"], input="A dog runs.\n",
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert [line.split(" ||| ")[0] for line in nbest] == ["0", "0"]
    missing = subprocess.run([*command[:-1], "models/absent"], capture_output=True, text=True)
    assert missing.returncode == 2
    assert missing.stderr.strip().startswith("nmtbench translate: error: no sentencepiece model at models/absent")


@pytest.mark.slow
def test_two_process_data_parallel_training_on_cpu(project, tmp_path):
    """train with devices=2 strategy=ddp (gloo): both ranks step through disjoint halves of the batches."""
    raw = yaml.safe_load(open("params.yaml"))
    raw["train"].update({"devices": 2, "strategy": "ddp", "accelerator": "cpu", "num_threads": 1})
    open("params.yaml", "w").write(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "nmtbench", "train", "tiny"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads(open("metrics/tiny/seed42/train.json").read())
    data = TranslationData(Path("data/tokenized"), batch_tokens=64, seed=project.seeds[0])
    data.setup()
    train = data.splits["train"]
    batches = TokenBatchSampler([len(s) for s in train.src_ids], [len(t) for t in train.tgt_ids], 64, True).batches()
    assert metrics["steps"] == metrics["epochs"] * (len(batches) // 2)
    assert len(list(Path("wandb").glob("offline-run-*"))) == 1  # rank 0 alone logs
