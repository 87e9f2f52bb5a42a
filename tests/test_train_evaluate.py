"""The train, evaluate, beam-sweep and translate commands on a tiny dataset, in a scratch project folder.

Tests of training train in a project of their own; the others work on a copy of the tiny project trained
once per session (conftest.trained_copy).
"""
import csv
import hashlib
import io
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch.utilities import rank_zero_only

from helpers.data import tiny_files, write_mirror
from helpers.project import scores as without_timings
from helpers.project import write_tiny_project
from helpers.wandb_offline import read_offline_run, read_table
from nmtbench.cli import main
from nmtbench.config import ConfigError, DataConfig, ReportConfig, TokenizeConfig, load_params, parse_params
from nmtbench.data.batching import TokenBatchSampler
from nmtbench.data.datamodule import TranslationData
from nmtbench.data.prepare import prepare
from nmtbench.data.subwords import Tokenizer, vocab_id
from nmtbench.data.tokenizer import load_tokenized, tokenize
from nmtbench.decoding.translator import Translator
from nmtbench.evaluation.beam_sweep import beam_sweep
from nmtbench.evaluation.evaluate import evaluate, one_line
from nmtbench.evaluation.scoring import score
from nmtbench.loading import CheckpointError, Run, load_model
from nmtbench.training.curves import CURVE_COLUMNS, GREEDY
from nmtbench.training.module import TranslationModule
from nmtbench.training.train import train


@pytest.fixture
def project(tmp_path, monkeypatch, make_data_mirror):
    """A scratch project folder holding params.yaml, data/prepared and data/tokenized of the tiny mirror."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_SILENT", "true")
    mirror, checksums = make_data_mirror()
    return parse_params(write_tiny_project(tmp_path, mirror, checksums))


@pytest.fixture
def trained(trained_copy, monkeypatch):
    """A copy of the session's trained and evaluated tiny project (models tiny and tiny_rnn); returns its params."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    return load_params(trained_copy / "params.yaml")


def test_train_writes_checkpoint_metrics_and_an_offline_wandb_run(project):
    metrics = train(project, "tiny")
    assert set(metrics) == {"params", "train_seconds", "train_tokens_per_s", "best_val_loss", "best_val_ppl",
                            "best_val_bleu", "steps", "epochs", "target_tokens", "train_flops", "precision",
                            "stopped_by", "best_epoch", "best_step", "best_train_flops", "vocab"}
    assert metrics["epochs"] == 2 and metrics["steps"] > 0 and metrics["precision"] == "32-true"
    assert metrics["stopped_by"] == "max_epochs"
    assert metrics["vocab"] == vocab_id(json.loads(Path("data/tokenized/vocab.json").read_text()))
    saved = json.loads(open("metrics/tiny/seed42/train.json").read())
    provenance = saved.pop("provenance")  # what produced the figures, beside them
    assert saved == metrics and provenance["wall_seconds"] >= metrics["train_seconds"]
    assert sorted(p.name for p in Path("models/tiny/seed42").iterdir()) == ["best.ckpt", "spm.model", "vocab.json"]
    (run,) = Path("wandb").glob("offline-run-*")
    logged = read_offline_run(run)
    assert logged["run"] == {"name": "tiny-seed42", "group": "unit", "job_type": "train",
                             "tags": ["tiny", "transformer", "seed42"]}
    assert (logged["config"]["model"], logged["config"]["seed"]) == ("tiny", 42)
    assert logged["config"]["provenance"] == provenance
    assert logged["summary"]["best_val_loss"] == metrics["best_val_loss"]
    val_losses = [r["val/loss"] for r in logged["history"] if "val/loss" in r]
    assert min(val_losses) == pytest.approx(metrics["best_val_loss"], abs=1e-4)


def test_the_learning_rate_is_logged_from_the_host_at_the_loggers_interval(project):
    # LearningRateMonitor reads it off the optimizer (self.log would copy it to the GPU at every step); the loggers
    # write every 10 steps: 8 epochs of 3 steps give steps 10 and 20, the warm-up's rise and then its decay
    params = set_train_params(max_epochs=8, warmup_steps=12)
    metrics = train(params, "tiny")
    (run,) = Path("wandb").glob("offline-run-*")
    rates = [r["train/lr"] for r in read_offline_run(run)["history"] if "train/lr" in r]
    peak, warmup = params.train.lr, params.train.warmup_steps
    assert metrics["steps"] == 24 and rates == pytest.approx([peak * 10 / warmup, peak * (warmup / 20) ** 0.5])


def test_a_second_training_of_one_run_refuses_in_one_line(project, capsys, monkeypatch):
    """The lock beside the run's folder holds the trainer's pid; one left by a dead process is taken over, and under
    DDP only rank 0 takes it (the other ranks are its own processes)."""
    lock = Path("models/tiny/seed42.lock")
    lock.parent.mkdir(parents=True)
    lock.write_text(f"{os.getppid()}\n")  # a live process: pytest's parent
    assert main(["train", "tiny"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"nmtbench train: error: another nmtbench train of tiny seed 42 (pid {os.getppid()}) is writing "
        f"models/tiny/seed42; wait for it or stop it (kill {os.getppid()}), then rerun"]
    assert not Path("models/tiny/seed42").exists()
    monkeypatch.setattr("nmtbench.training.train.fit", lambda *args: {"lock": lock.read_text()})  # what the run sees
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    assert train(project, "tiny") == {"lock": f"{os.getppid()}\n"}  # rank 0's, left alone
    monkeypatch.setattr(rank_zero_only, "rank", 0)
    lock.write_text("999999999\n")  # no such process: a training killed without cleaning up
    assert train(project, "tiny") == {"lock": f"{os.getpid()}\n"}
    assert not lock.exists()


def read_curve(path="metrics/tiny/seed42/learning_curve.csv"):
    with open(path) as f:
        reader = csv.DictReader(f)
        return tuple(reader.fieldnames), [{k: float(v) if v else None for k, v in row.items()} for row in reader]


@pytest.mark.slow
def test_val_bleu_drives_early_stopping_and_the_best_checkpoint(project, make_data_mirror):
    """Val equals train, so greedy BLEU climbs as the model memorises, then stalls and stops the run."""
    files = tiny_files()
    for lang in ("en", "de", "fr"):
        files[f"val.{lang}.gz"] = files[f"train.{lang}.gz"]
    mirror, checksums = make_data_mirror(files, name="memorise")
    prepare(DataConfig(max_length=8), mirror, checksums=checksums)
    tokenize(TokenizeConfig(vocab_size=305))
    cfg = project.train.model_copy(update={"max_epochs": 200, "lr": 0.01, "schedule": "constant",
                                           "val_bleu_sentences": None, "early_stopping_metric": "bleu",
                                           "early_stopping_patience": 15})
    model = {"family": "transformer", "d_model": 64, "heads": 2, "layers": 1, "d_ff": 128, "dropout": 0.0}
    metrics = train(project.model_copy(update={"train": cfg, "models": {"tiny": model}}), "tiny")

    columns, rows = read_curve()
    assert columns == CURVE_COLUMNS
    assert [row["epoch"] for row in rows] == [float(e) for e in range(1, metrics["epochs"] + 1)]
    assert rows[-1]["step"] == metrics["steps"] and rows[-1]["target_tokens"] == metrics["target_tokens"]
    assert rows[-1]["train_flops"] == metrics["train_flops"]  # no FLOP budget: counted all the same, per validation
    assert all(a["wall_seconds"] < b["wall_seconds"] and a["step"] < b["step"] and a["train_flops"] < b["train_flops"]
               for a, b in zip(rows, rows[1:]))
    bleus = [row["val_bleu"] for row in rows]
    best = bleus.index(max(bleus))
    assert max(bleus) > 0 and metrics["best_val_bleu"] == max(bleus)
    assert len(rows) < 200 and len(rows) - 1 - best == 15  # stopped 15 validations without a better BLEU
    assert metrics["stopped_by"] == "early_stopping"
    assert metrics["best_val_loss"] == min(row["val_loss"] for row in rows)
    saved = torch.load("models/tiny/seed42/best.ckpt", weights_only=False)["callbacks"]["LearningCurve"]["rows"]
    assert [row["step"] for row in saved] == [row["step"] for row in rows[: best + 1]]  # a resume continues the curve
    # train.json names the validation best.ckpt holds: the last row its saved curve has
    assert (metrics["best_epoch"], metrics["best_step"], metrics["best_train_flops"]) == (
        rows[best]["epoch"], saved[-1]["step"], rows[best]["train_flops"])

    tokenizer = Tokenizer("data/tokenized")
    val = load_tokenized("data/tokenized")["val"]
    translator = Translator(load_model("models/tiny/seed42/best.ckpt", tokenizer), tokenizer, GREEDY)
    found = translator.translate_ids(list(val["src_ids"]))
    assert score([tokenizer.decode(h[0].tokens) for h in found], list(val["tgt"]))["bleu"] == max(bleus)
    (run,) = Path("wandb").glob("offline-run-*")
    logged = [r["val/bleu"] for r in read_offline_run(run)["history"] if "val/bleu" in r]
    assert logged == pytest.approx(bleus, abs=1e-4)


def test_bf16_mixed_precision_trains_on_cpu_and_val_bleu_can_be_off(project):
    cfg = project.train.model_copy(update={"precision": "bf16-mixed", "val_bleu_sentences": 0})
    linear_outputs = set()  # proof that autocast ran the matrix products in bf16
    hook = torch.nn.modules.module.register_module_forward_hook(
        lambda module, inputs, output: (linear_outputs.add(output.dtype) if isinstance(module, torch.nn.Linear)
                                        else None))
    try:
        metrics = train(project.model_copy(update={"train": cfg}), "tiny")
    finally:
        hook.remove()
    assert torch.bfloat16 in linear_outputs
    _, rows = read_curve()
    assert metrics["steps"] > 0 and math.isfinite(metrics["best_val_loss"]) and metrics["precision"] == "bf16-mixed"
    assert len(rows) == 2 and all(math.isfinite(row["train_loss"]) and math.isfinite(row["val_loss"]) for row in rows)
    assert metrics["best_val_bleu"] is None and all(row["val_bleu"] is None for row in rows)


def test_bf16_training_stays_within_a_hundredth_of_fp32s_val_loss_at_the_same_updates(project):
    runs = {}
    for precision in ("32-true", "bf16-mixed"):
        cfg = project.train.model_copy(update={"precision": precision, "val_bleu_sentences": 0, "max_epochs": 6,
                                                 "lr": 0.005})
        runs[precision] = (train(project.model_copy(update={"train": cfg}), "tiny"), read_curve()[1])
    (fp32, fp32_curve), (bf16, bf16_curve) = runs["32-true"], runs["bf16-mixed"]
    assert bf16["steps"] == fp32["steps"] and [r["step"] for r in bf16_curve] == [r["step"] for r in fp32_curve]
    assert fp32_curve[-1]["val_loss"] < fp32_curve[0]["val_loss"] - 0.5  # it learns: the gap is not of two idle runs
    gaps = [abs(b["val_loss"] - f["val_loss"]) for b, f in zip(bf16_curve, fp32_curve)]
    assert max(gaps) < 0.01, gaps


def test_evaluate_and_beam_sweep_score_every_sentence(trained, capfd):
    metrics = evaluate(trained, "tiny")
    bars = capfd.readouterr().err  # a progress bar per test set, on standard error
    assert "decoding test_2016_flickr: 100%" in bars and "decoding test_2017_flickr: 100%" in bars
    test_sets = load_tokenized("data/tokenized")
    for split in ("test_2016_flickr", "test_2017_flickr"):
        text = open(f"results/tiny/seed42/{split}.txt", "rb").read()
        hypotheses = text.decode().split("\n")[:-1]
        assert len(hypotheses) == metrics[split]["sentences"] == len(test_sets[split]) > 0
        assert metrics[split]["hypotheses_sha256"] == hashlib.sha256(text).hexdigest()
        scores = score(hypotheses, list(test_sets[split]["tgt"]))  # the written translations give the figures
        assert {key: metrics[split][key] for key in scores} == scores
        assert metrics[split]["beam"] == 2
    assert main(["compare"]) == 0  # reads the translations back, checked against their hashes
    comparison = json.loads(open("results/comparison.json").read())
    assert comparison["models"]["tiny"]["test_2017_flickr"]["bleu"]["mean"] == metrics["test_2017_flickr"]["bleu"]
    assert comparison["examples"]["test_2017_flickr"][0]["outputs"]["tiny"] == open(
        "results/tiny/seed42/test_2017_flickr.txt").read().rstrip("\n")
    capfd.readouterr()
    sweep = beam_sweep(trained)
    assert "beam sweep of tiny: 100%" in capfd.readouterr().err
    assert [(r["beam"], r["alpha"]) for r in sweep["rows"]] == [(1, 1.0), (2, 1.0)]
    assert json.loads(open("results/beam_sweep.json").read())["provenance"] == sweep["provenance"]
    rounding = 0.005 * (len(sweep["rows"]) + 1)  # each figure is rounded to hundredths of a second
    assert sweep["provenance"]["wall_seconds"] + rounding >= sum(row["seconds"] for row in sweep["rows"])
    assert open("results/beam_sweep.png", "rb").read(4) == b"\x89PNG"
    assert f"| 2 | 1 | {sweep['rows'][1]['bleu']:.2f} | {sweep['rows'][1]['bleu_breakdown']} |" in open(
        "results/beam_sweep.md").read()


def test_the_evaluations_wall_time_covers_every_test_set(trained, monkeypatch):
    """#69: eval.json's provenance.wall_seconds timed the last test set alone."""
    decode = Translator.translate_ids

    def slow(self, *args, **kwargs):
        time.sleep(0.5)
        return decode(self, *args, **kwargs)
    monkeypatch.setattr(Translator, "translate_ids", slow)
    evaluate(trained, "tiny")
    saved = json.loads(Path("metrics/tiny/seed42/eval.json").read_text())
    assert saved["provenance"]["wall_seconds"] >= 1.0 and saved["test_2016_flickr"]["decode_seconds"] >= 0.5


def test_evaluate_keeps_one_attention_map_and_logs_every_translation(trained):
    metrics = evaluate(trained, "tiny")
    attention = json.loads(open("metrics/tiny/seed42/attention.json").read())
    assert (attention["split"], attention["sentence"]) == ("test_2016_flickr", 0)
    assert "".join(attention["source_pieces"]).replace("\u2581", " ").strip() == "A cat."
    weights = attention["weights"]
    assert len(weights) == len(attention["target_pieces"]) >= 1
    for row in weights:  # a Transformer's cross-attention: a distribution over the source pieces
        assert len(row) == len(attention["source_pieces"]) and sum(row) == pytest.approx(1, abs=1e-3)
    late = trained.model_copy(update={"report": ReportConfig(attention_sentence=2)})
    outputs = [*Path("metrics/tiny/seed42").iterdir(), *Path("results/tiny/seed42").iterdir()]
    before = {path: path.read_bytes() for path in outputs}
    with pytest.raises(ConfigError, match="report.attention_sentence: 2 is beyond the 2 sentences of test_2016_flickr"):
        evaluate(late, "tiny")
    assert {path: path.read_bytes() for path in outputs} == before  # refused before any output

    runs = {read_offline_run(r)["run"]["job_type"]: r for r in Path("wandb").glob("offline-run-*")}
    assert sorted(runs) == ["evaluate"]  # the session's project was trained without W&B
    logged = read_offline_run(runs["evaluate"])
    assert logged["run"] == {"name": "tiny-seed42", "group": "unit", "job_type": "evaluate",
                             "tags": ["tiny", "transformer", "seed42"]}
    assert logged["config"]["beam"] == 2 and logged["config"]["family"] == "transformer"
    saved = json.loads(open("metrics/tiny/seed42/eval.json").read())
    assert list(saved) == ["test_2016_flickr", "test_2017_flickr", "provenance"]  # the test sets, then what scored them
    assert logged["config"]["provenance"] == saved["provenance"]
    assert logged["summary"]["test_2016_flickr/bleu"] == metrics["test_2016_flickr"]["bleu"]
    table = read_table(runs["evaluate"], logged["summary"]["translations/test_2016_flickr"])
    hypotheses = open("results/tiny/seed42/test_2016_flickr.txt").read().splitlines()
    assert table["columns"] == ["index", "source", "reference", "hypothesis"]
    assert table["data"] == [[0, "A cat.", "Eine Katze.", hypotheses[0]],
                             [1, "Two birds fly.", "Zwei Vögel fliegen.", hypotheses[1]]]


def test_a_translation_is_written_and_scored_as_one_line():
    assert one_line("Ein\nHund\r\nrennt\x0c.") == "Ein Hund  rennt\x0c."


def test_evaluate_refuses_a_checkpoint_its_params_no_longer_describe(trained, capsys):
    """A model block or train key changed without retraining: the checkpoint is another run, refused in one line
    naming each key; a raised epoch ceiling is the same run (the fingerprint leaves it out)."""
    raw = yaml.safe_load(Path("params.yaml").read_text())
    edited = {**raw, "models": {**raw["models"], "tiny": {**raw["models"]["tiny"], "d_ff": 64,
                                                          "train": {"lr": 0.01}}}}
    Path("params.yaml").write_text(yaml.safe_dump(edited))
    before = Path("metrics/tiny/seed42/eval.json").read_bytes()
    assert main(["evaluate", "tiny"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "nmtbench evaluate: error: models/tiny/seed42/best.ckpt is not the run params.yaml describes for tiny "
        "(models.tiny.d_ff: 64 in params.yaml, 32 in the checkpoint; models.tiny.train.lr: 0.01 in params.yaml, "
        f"{trained.train.lr} in the checkpoint); retrain it (dvc repro train@tiny-42) or restore the params it was "
        "trained with"]
    assert Path("metrics/tiny/seed42/eval.json").read_bytes() == before
    tokenizer, block = Tokenizer("data/tokenized"), trained.models["tiny"]
    ceiling = trained.train.model_copy(update={"max_epochs": 9}).model_dump()
    load_model("models/tiny/seed42/best.ckpt", tokenizer, run=Run("tiny", block, ceiling, 42))
    with pytest.raises(CheckpointError, match=r"\(seed: 7 in params.yaml, 42 in the checkpoint\); retrain it "
                                              r"\(dvc repro train@tiny-7\)"):
        load_model("models/tiny/seed42/best.ckpt", tokenizer, run=Run("tiny", block, trained.train.model_dump(), 7))


def test_a_checkpoint_from_another_vocabulary_is_refused(trained, tmp_path):
    other = tokenize(TokenizeConfig(vocab_size=304), out_dir=tmp_path / "other")
    with pytest.raises(CheckpointError, match=r"was trained with another vocabulary than .*other/spm.model; "
                                              r"retrain it \(dvc repro train@tiny-42\)"):
        load_model("models/tiny/seed42/best.ckpt", other)
    with pytest.raises(CheckpointError, match="is missing; train the model first"):
        load_model("models/absent/best.ckpt", Tokenizer("data/tokenized"))
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(Path("models/tiny/seed42/best.ckpt").read_bytes()[:4096])
    with pytest.raises(CheckpointError, match=r"truncated.ckpt is not a readable nmtbench checkpoint \(\w+\); retrain"):
        load_model(truncated, Tokenizer("data/tokenized"))


def test_a_checkpoint_from_before_one_vocabulary_per_side_still_loads(trained, tmp_path):
    """Such checkpoints kept the vocabulary as the hyperparameters vocab_size, pad_id and vocab_sha256."""
    checkpoint = torch.load("models/tiny/seed42/best.ckpt", weights_only=False)
    vocab = checkpoint["hyper_parameters"].pop("vocab")
    checkpoint["hyper_parameters"].update(vocab_size=vocab["size"], pad_id=vocab["pad"], vocab_sha256=vocab["sha256"])
    torch.save(checkpoint, tmp_path / "old.ckpt")
    tokenizer = Tokenizer("data/tokenized")
    old, new = load_model(tmp_path / "old.ckpt", tokenizer), load_model("models/tiny/seed42/best.ckpt", tokenizer)
    assert_same_tensors(old.state_dict(), new.state_dict())
    with pytest.raises(CheckpointError, match="was trained with another vocabulary"):
        load_model(tmp_path / "old.ckpt", tokenize(TokenizeConfig(vocab_size=304), out_dir=tmp_path / "other"))


PER_SIDE = TokenizeConfig(joint=False, vocab_size=290, target_vocab_size=300)


def test_one_vocabulary_per_side_trains_translates_reloads_and_refuses_another(project, tmp_path, monkeypatch,
                                                                              capsys):
    """tokenize.joint false: a model reads the source model's ids and writes the target model's; its folder holds
    both sentencepiece models and translates alone, and a vocabulary that differs on either side is refused."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    tokenize(PER_SIDE)
    models = {"tiny": {**project.models["tiny"], "tie_embeddings": "none"},  # null would tie target and output
              "tiny_rnn": {"family": "rnn", "cell": "gru", "attention": "additive", "embed_dim": 12, "hidden_dim": 16}}
    params = project.model_copy(update={"models": models})
    for name, tie in (("tiny", "none"), ("tiny_rnn", "target_output")):
        metrics = train(params, name)
        folder = Path(f"models/{name}/seed42")
        assert sorted(p.name for p in folder.iterdir()) == ["best.ckpt", "spm.src.model", "spm.tgt.model",
                                                            "vocab.json"]
        model = load_model(folder / "best.ckpt", Tokenizer("data/tokenized"))
        assert (model.embed.num_embeddings, model.output.out_features, model.tie) == (290, 300, tie)
        assert metrics["params"] == model.num_parameters()
    evaluate(params, "tiny")
    attention = json.loads(Path("metrics/tiny/seed42/attention.json").read_text())
    assert "".join(attention["source_pieces"]).replace("\u2581", " ").strip() == "A cat."  # the source model's pieces
    Path("in.txt").write_text("A cat.\nTwo birds fly.\n")  # test_2016_flickr's sources
    capsys.readouterr()
    assert main(["translate", "models/tiny/seed42", "in.txt"]) == 0  # params.yaml's evaluate block, as evaluate
    assert capsys.readouterr().out == Path("results/tiny/seed42/test_2016_flickr.txt").read_text()

    joint = tokenize(TokenizeConfig(vocab_size=305), out_dir=tmp_path / "joint")
    other_target = tokenize(PER_SIDE.model_copy(update={"target_vocab_size": 301}), out_dir=tmp_path / "other")
    assert other_target.source.sha256 == Tokenizer("data/tokenized").source.sha256  # only the target differs
    for tokenizer, named in ((joint, "joint/spm.model"),
                             (other_target, "other/spm.src.model and .*other/spm.tgt.model")):
        with pytest.raises(CheckpointError, match=f"was trained with another vocabulary than .*{named}; retrain"):
            load_model("models/tiny/seed42/best.ckpt", tokenizer)
    tied = params.model_copy(update={"models": {"tiny": {**models["tiny"], "tie_embeddings": "all"}}})
    with pytest.raises(ConfigError, match="^models.tiny.tie_embeddings: all makes the source and the target embedding "
                                          "one matrix, which needs one joint vocabulary"):
        train(tied, "tiny")


def test_translate_reads_a_file_or_standard_input(trained, capsys, monkeypatch):
    """In-process, except the pipe: the one test of `python -m nmtbench` reading a real standard input."""
    Path("in.txt").write_text("A dog runs.\nTwo birds fly.\n")
    assert main(["translate", "models/tiny/seed42", "in.txt", "--beam", "3"]) == 0
    from_file = capsys.readouterr()
    piped = subprocess.run([sys.executable, "-m", "nmtbench", "translate", "models/tiny/seed42", "--beam", "3"],
                           input="A dog runs.\nTwo birds fly.\n", capture_output=True, text=True, check=True)
    assert from_file.out == piped.stdout and len(piped.stdout.splitlines()) == 2
    assert "2/2" in from_file.err and piped.stderr == ""  # a progress bar for files only
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"A dog runs.\n")))
    assert main(["translate", "models/tiny/seed42", "--nbest", "2", "--beam", "3"]) == 0
    nbest = [line.split(" ||| ") for line in capsys.readouterr().out.splitlines()]
    assert [index for index, _, _ in nbest] == ["0", "0"]
    assert nbest[0][1] == piped.stdout.splitlines()[0]  # the best of the n best is the translation
    assert float(nbest[0][2]) >= float(nbest[1][2])
    assert main(["translate", "models/absent"]) == 2
    assert capsys.readouterr().err.startswith("nmtbench translate: error: models/absent does not exist")


def test_translate_writes_each_line_of_standard_input_once_it_has_arrived(trained):
    """A line typed at a terminal (or written to a pipe that stays open) is translated and written before the next
    arrives, not when the input ends."""
    process = subprocess.Popen([sys.executable, "-m", "nmtbench", "translate", "models/tiny/seed42", "--beam", "3"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        process.stdin.write("A dog runs.\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], 120)  # the model loads, then the line is translated
        assert ready, "no translation of the first line while standard input stayed open"
        first = process.stdout.readline()
        process.stdin.write("Two birds fly.\n")
        process.stdin.close()
        rest = process.stdout.read()
    except BaseException:
        process.kill()
        raise
    assert process.wait(timeout=60) == 0
    whole = subprocess.run([sys.executable, "-m", "nmtbench", "translate", "models/tiny/seed42", "--beam", "3"],
                           input="A dog runs.\nTwo birds fly.\n", capture_output=True, text=True, check=True)
    assert first + rest == whole.stdout and len(whole.stdout.splitlines()) == 2


def test_translate_leaves_a_line_too_long_for_the_model_empty_and_translates_the_others(trained, capsys):
    """A hybrid whose convolutional decoder places 16 tokens, after an encoder that reads any length: a source
    longer than that is named with its own length, and every other line is translated as it is alone."""
    block = {"family": "hybrid", "encoder": {"family": "transformer", "d_model": 16, "heads": 2, "layers": 1,
                                             "d_ff": 32},
             "decoder": {"family": "cnn", "embed_dim": 16, "channels": 16, "max_positions": 16}}
    folder = Path("models/hybrid/seed42")
    folder.mkdir(parents=True)
    module = TranslationModule("hybrid", block, json.loads(Path("data/tokenized/vocab.json").read_text()),
                               trained.train.model_dump(), 42)
    torch.save({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, folder / "best.ckpt")
    for name in ("spm.model", "vocab.json"):
        (folder / name).write_bytes(Path("models/tiny/seed42", name).read_bytes())
    long = "A dog runs. " * 100
    tokens = len(Tokenizer("data/tokenized").encode(long))
    alone = []
    for line in ("A dog runs.", "Two birds fly."):
        Path("in.txt").write_text(line + "\n")
        assert main(["translate", str(folder), "in.txt"]) == 0
        alone.append(capsys.readouterr().out)
    Path("in.txt").write_text(f"A dog runs.\n{long}\nTwo birds fly.\n")
    assert main(["translate", str(folder), "in.txt"]) == 0
    found = capsys.readouterr()
    assert found.out == alone[0] + "\n" + alone[1]
    assert [line for line in found.err.splitlines() if line.strip() and "translating" not in line] == [
        f"nmtbench translate: line 2 has {tokens:,} tokens, {tokens - 16:,} more than the 16 this model translates "
        "(max_positions of its model block); its output line is left empty"]
    assert main(["translate", str(folder), "in.txt", "--nbest", "2"]) == 0
    rows = capsys.readouterr().out.split("\n")[:-1]  # an untrained model writes any character, \x1c say
    assert [row.split(" ||| ")[0] for row in rows] == ["0", "0", "1", "2", "2"] and rows[2] == "1 |||  ||| -inf"


@pytest.mark.slow
def test_two_process_data_parallel_training_on_cpu(project, tmp_path):
    """train with devices=2 strategy=ddp (gloo): both ranks step through disjoint halves of the batches."""
    raw = yaml.safe_load(open("params.yaml"))
    # early stopping and the best checkpoint on BLEU: every rank must see the same val/bleu or one would raise or hang
    raw["train"].update({"devices": 2, "strategy": "ddp", "accelerator": "cpu", "num_threads": 1,
                         "early_stopping_metric": "bleu", "early_stopping_patience": 2})
    open("params.yaml", "w").write(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "nmtbench", "train", "tiny"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads(open("metrics/tiny/seed42/train.json").read())
    data = TranslationData(Path("data/tokenized"), batch_tokens=64, seed=project.seeds[0])
    data.setup()
    train = data.splits["train"]
    batches = TokenBatchSampler(train.src_lens, train.tgt_lens, 64, True).batches()
    assert metrics["steps"] == metrics["epochs"] * (len(batches) // 2)
    assert len(list(Path("wandb").glob("offline-run-*"))) == 1  # rank 0 alone logs
    _, rows = read_curve()  # one row per validation, tokens summed over both ranks, BLEU broadcast from rank 0
    assert [row["step"] for row in rows] == [metrics["steps"] // 2, metrics["steps"]]
    assert rows[-1]["target_tokens"] == metrics["target_tokens"]
    assert max(row["val_bleu"] for row in rows) == metrics["best_val_bleu"]


def set_train_params(**train):
    raw = yaml.safe_load(open("params.yaml"))
    raw["train"].update(train)
    open("params.yaml", "w").write(yaml.safe_dump(raw))
    return parse_params(raw)


def checkpoint_state(path):
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    return checkpoint["state_dict"], checkpoint["optimizer_states"]


def assert_same_tensors(a, b):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same_tensors(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_tensors(x, y)
    else:
        assert a == b


def without_wall_time(rows):
    return [{key: value for key, value in row.items() if key != "wall_seconds"} for row in rows]


class Crash(Exception):
    pass


def test_a_run_crashed_again_and_again_resumes_to_the_uninterrupted_result(project, tmp_path, monkeypatch, capfd):
    """Crashes mid-epoch 0, in the validation after epoch 0's last batch, on epoch 1's first batch and mid-epoch 1,
    each resuming the run resumed before; with early stopping on val BLEU, as the converged grid trains."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    params = set_train_params(checkpoint_every_steps=1, deterministic=True, max_epochs=3, early_stopping_patience=2,
                              early_stopping_metric="bleu")
    whole = train(params, "tiny", root=tmp_path / "whole")

    steps = {hook: getattr(TranslationModule, hook) for hook in ("training_step", "validation_step")}
    # (where, at which update, the step resumed from, the step last.ckpt holds after the crash): 3 updates an epoch
    for hook, crash_at, resumed_at, kept in [("training_step", 2, None, 2), ("validation_step", 3, 2, 2),
                                             ("training_step", 3, 2, 3), ("training_step", 4, 3, 4)]:
        def crash(module, batch, batch_idx, hook=hook, crash_at=crash_at):
            if module.global_step == crash_at:
                raise Crash  # as a kill would, after last.ckpt of the step before, or of crash_at
            if crash_at == 2 and module.global_step == 1 and hook == "training_step":
                time.sleep(1.0)  # a second of the first process' training, which train.json must still count
            return steps[hook](module, batch, batch_idx)
        monkeypatch.setattr(TranslationModule, hook, crash)
        capfd.readouterr()
        with pytest.raises(Crash):
            train(params, "tiny")
        monkeypatch.setattr(TranslationModule, hook, steps[hook])
        if resumed_at is not None:
            assert f"resuming models/tiny/seed42/unfinished/last.ckpt at step {resumed_at}" in capfd.readouterr().err
        kept_checkpoint = torch.load("models/tiny/seed42/unfinished/last.ckpt", weights_only=False)
        assert kept_checkpoint["global_step"] == kept
        # every validation it saw is in early stopping's and best.ckpt's state: a resume carries on from all of them
        states = kept_checkpoint["callbacks"]
        early = next(state for key, state in states.items() if key.startswith("EarlyStopping"))
        best = next(state for key, state in states.items() if key.startswith("ModelCheckpoint{'monitor': 'val/bleu'"))
        bleus = [row["val_bleu"] for row in states["LearningCurve"]["rows"]]
        if bleus:
            assert early["best_score"].item() == pytest.approx(max(bleus), abs=0.005)
            assert best["best_model_score"].item() == pytest.approx(max(bleus), abs=0.005)
            assert early["wait_count"] == len(bleus) - 1 - bleus.index(max(bleus))
    capfd.readouterr()
    resumed = train(params, "tiny")
    assert "resuming models/tiny/seed42/unfinished/last.ckpt at step 4" in capfd.readouterr().err
    assert without_timings(resumed) == without_timings(whole)
    _, rows = read_curve()  # the time of every process of the run, not only the last one's
    assert resumed["train_seconds"] >= max(1.0, rows[-1]["wall_seconds"])
    # every validation, the one after the crash on epoch 0's last batch included: early stopping counts them all
    _, whole_rows = read_curve(tmp_path / "whole/metrics/tiny/seed42/learning_curve.csv")
    assert without_wall_time(rows) == without_wall_time(whole_rows)
    assert_same_tensors(checkpoint_state("models/tiny/seed42/best.ckpt"),
                        checkpoint_state(tmp_path / "whole/models/tiny/seed42/best.ckpt"))
    assert not Path("models/tiny/seed42/unfinished").exists()


def test_a_run_that_reaches_its_ceiling_before_early_stopping_continues_when_the_ceiling_is_raised(
        project, tmp_path, monkeypatch, capfd):
    """Not converged at max_epochs 2: it keeps its last checkpoint; at max_epochs 3 it goes on to the result of a run
    trained with 3 from the start."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    params = set_train_params(early_stopping_patience=10, deterministic=True, max_epochs=3)
    whole = train(params, "tiny", root=tmp_path / "whole")
    capfd.readouterr()
    ceiling = train(set_train_params(max_epochs=2), "tiny")
    assert (ceiling["stopped_by"], ceiling["epochs"]) == ("max_epochs", 2)
    assert "tiny reached max_epochs (2) before early stopping" in capfd.readouterr().err
    assert Path("models/tiny/seed42/unfinished/last.ckpt").is_file()
    resumed = train(set_train_params(max_epochs=3), "tiny")
    assert f"resuming models/tiny/seed42/unfinished/last.ckpt at step {ceiling['steps']}" in capfd.readouterr().err
    assert without_timings(resumed) == without_timings(whole) and resumed["stopped_by"] == "max_epochs"
    assert_same_tensors(checkpoint_state("models/tiny/seed42/best.ckpt"),
                        checkpoint_state(tmp_path / "whole/models/tiny/seed42/best.ckpt"))


@pytest.mark.parametrize("within_epoch", [False, True])
def test_a_run_that_spends_its_budget_before_early_stopping_continues_when_the_budget_is_raised(
        project, tmp_path, monkeypatch, capfd, within_epoch):
    """Not converged when its FLOP budget ends it, at epoch 2's end or within epoch 2 (the FLOPs the uninterrupted
    run had spent there): it keeps a checkpoint to go on from, its own at an epoch's end, else its last periodic one
    (every step here); with the budget lifted it goes on to the uninterrupted run's result. A time budget is the same
    mechanism, raised across the calls of a GPU grid (docs/gpu.md)."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    params = set_train_params(early_stopping_patience=10, deterministic=True, max_epochs=3, checkpoint_every_steps=1,
                              early_stopping_metric="bleu")  # val BLEU, which a resume must validate to have
    whole = train(params, "tiny", root=tmp_path / "whole")
    _, rows = read_curve(tmp_path / "whole/metrics/tiny/seed42/learning_curve.csv")  # a row at each epoch's end
    budget = (rows[0]["train_flops"] + rows[1]["train_flops"]) / 2 if within_epoch else rows[1]["train_flops"]
    capfd.readouterr()
    spent = train(set_train_params(budget={"kind": "flops", "value": budget}), "tiny")
    assert spent["stopped_by"] == "budget" and rows[0]["step"] < spent["steps"] <= rows[1]["step"]
    assert (spent["steps"] < rows[1]["step"]) == within_epoch
    assert "tiny reached its flops budget" in capfd.readouterr().err
    resumed = train(set_train_params(budget={"kind": "none", "value": None}), "tiny")
    assert f"resuming models/tiny/seed42/unfinished/last.ckpt at step {spent['steps']}" in capfd.readouterr().err
    assert without_timings(resumed) == without_timings(whole)
    assert_same_tensors(checkpoint_state("models/tiny/seed42/best.ckpt"),
                        checkpoint_state(tmp_path / "whole/models/tiny/seed42/best.ckpt"))


def test_a_run_stopped_by_its_ceiling_without_early_stopping_keeps_nothing_to_resume(project, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert train(set_train_params(max_epochs=1), "tiny")["stopped_by"] == "max_epochs"
    assert not Path("models/tiny/seed42/unfinished").exists()


def test_a_flop_budget_stops_training_early_and_is_reported(trained, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    whole = json.loads(Path("metrics/tiny/seed42/train.json").read_text())  # the same run without a budget
    budget = whole["train_flops"] // 2
    params = set_train_params(budget={"kind": "flops", "value": float(budget)})
    spent = train(params, "tiny")
    assert spent["steps"] < whole["steps"] and budget <= spent["train_flops"] < whole["train_flops"]
    assert (spent["stopped_by"], whole["stopped_by"]) == ("budget", "max_epochs")
    assert (Path("models/tiny/seed42/best.ckpt")).is_file()


def test_a_time_budget_that_ends_the_run_is_named_in_train_json(project, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    metrics = train(set_train_params(budget={"kind": "time", "value": 0.01}, max_epochs=50), "tiny")
    assert metrics["stopped_by"] == "budget" and metrics["epochs"] < 50


def test_averaging_puts_the_mean_of_the_last_validations_into_best(project, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setattr("nmtbench.training.train.shutil.rmtree", lambda *args, **kwargs: None)  # keep the snapshots
    params = set_train_params(average_last=2, max_epochs=3)
    metrics = train(params, "tiny")
    assert metrics["averaged_steps"] == [6, 9]  # 3 steps an epoch, validated at the end of each
    snapshots = [torch.load(f"models/tiny/seed42/unfinished/validated-{s}.ckpt", weights_only=False)["state_dict"]
                 for s in (6, 9)]
    best = checkpoint_state("models/tiny/seed42/best.ckpt")[0]
    for key, weight in best.items():
        assert torch.equal(weight, ((snapshots[0][key].double() + snapshots[1][key].double()) / 2).to(weight.dtype))
    load_model("models/tiny/seed42/best.ckpt", Tokenizer("data/tokenized"))  # still a checkpoint evaluation reads


def test_averaging_at_epoch_ends_leaves_out_the_last_steps_validation_within_an_epoch(project, monkeypatch):
    """3 steps an epoch, max_steps 8: validations at 3, 6 and 8; fairseq's epoch checkpoints are those at 3 and 6."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setattr("nmtbench.training.train.shutil.rmtree", lambda *args, **kwargs: None)
    every = train(set_train_params(average_last=2, max_steps=8, max_epochs=5), "tiny")
    assert every["averaged_steps"] == [6, 8]
    ends = train(set_train_params(average_last=2, max_steps=8, max_epochs=5, average_at="epoch_ends"), "tiny")
    assert ends["averaged_steps"] == [3, 6] and ends["steps"] == 8


def test_a_run_stopped_by_max_steps_mid_epoch_validates_its_last_step(project, monkeypatch):
    """3 steps an epoch, max_steps 4: the 4th step is validated and can become best.ckpt."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    metrics = train(set_train_params(max_steps=4, max_epochs=3), "tiny")
    _, rows = read_curve()
    assert [row["step"] for row in rows] == [3, 4] and metrics["steps"] == 4 and metrics["stopped_by"] == "max_steps"
    best = min(rows, key=lambda row: row["val_loss"])
    assert metrics["best_val_loss"] == best["val_loss"]
    assert torch.load("models/tiny/seed42/best.ckpt", weights_only=False)["global_step"] == best["step"]


@pytest.mark.slow
@pytest.mark.parametrize("accelerator, moved", [("cpu", False), ("cpu", True), pytest.param("gpu", False, marks=[
    pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])])
def test_a_killed_training_command_resumes_to_the_uninterrupted_result(project, tmp_path, monkeypatch, accelerator,
                                                                       moved):
    """SIGKILL `nmtbench train` right after its first last.ckpt (mid-epoch), rerun it: the same weights and figures.
    moved: the killed run's model folder copied into a workspace made afresh from the same params and a mirror
    written again (another machine's), where the rerun resumes it: the same data make the same subwords."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    set_train_params(batch_tokens=16, max_epochs=4, checkpoint_every_steps=3, deterministic=True,
                     accelerator=accelerator)
    command = [sys.executable, "-m", "nmtbench", "train", "tiny"]
    subprocess.run(command, capture_output=True, check=True, timeout=600)
    Path("models/tiny/seed42").rename(tmp_path / "whole")
    whole = json.loads(Path("metrics/tiny/seed42/train.json").read_text())
    Path("metrics/tiny/seed42/train.json").unlink()

    killed = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = Path("models/tiny/seed42/unfinished/last.ckpt")
    while not last.exists() and killed.poll() is None:
        time.sleep(0.005)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL and not Path("metrics/tiny/seed42/train.json").exists()
    state = torch.load(last, map_location="cpu", weights_only=False)
    position = state["TranslationData"]
    assert 0 < position["batches_done"] < whole["steps"] // whole["epochs"]  # killed in the middle of an epoch
    if moved:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        write_tiny_project(elsewhere, *write_mirror(tmp_path / "mirror-elsewhere"))
        shutil.copy("params.yaml", elsewhere / "params.yaml")
        shutil.copytree("models/tiny/seed42", elsewhere / "models/tiny/seed42")
        monkeypatch.chdir(elsewhere)

    resumed = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    assert f"resuming {last} at step {state['global_step']}" in resumed.stderr
    assert "exists and is not empty" not in resumed.stderr  # Lightning's warning about the run's own folder
    per_epoch = whole["steps"] // whole["epochs"]  # the resumed epoch's bar has its name and length from the start
    assert re.search(rf"Epoch {state['epoch']}: +\d+%\S* +\d+/{per_epoch} ", resumed.stdout)
    metrics = json.loads(Path("metrics/tiny/seed42/train.json").read_text())
    assert without_timings(metrics) == without_timings(whole)
    assert_same_tensors(checkpoint_state("models/tiny/seed42/best.ckpt"),
                        checkpoint_state(tmp_path / "whole/best.ckpt"))
    assert sorted(p.name for p in Path("models/tiny/seed42").iterdir()) == ["best.ckpt", "spm.model", "vocab.json"]


def test_tokens_and_time_are_counted_over_stretches_without_reading_the_device_per_step(project, monkeypatch):
    """The steps add their token counts to a device tensor; the host reads it at validations only."""
    read_at = []
    fold = TranslationModule._fold_tokens

    def counting_fold(module):
        read_at.append(module.trainer.global_step)
        fold(module)

    monkeypatch.setattr(TranslationModule, "_fold_tokens", counting_fold)
    metrics = train(project, "tiny")
    data = TranslationData("data/tokenized", project.train.batch_tokens, 42)
    data.setup()
    train_set = data.splits["train"]
    per_epoch = int((train_set[list(range(len(train_set)))]["tgt_out"] != 0).sum())  # every pair once, eos included
    assert metrics["target_tokens"] == 2 * per_epoch
    steps_per_epoch = metrics["steps"] // 2
    # read at each validation, at the best checkpoint saved after it and at the end: never between validations
    assert set(read_at) == {steps_per_epoch, 2 * steps_per_epoch} and steps_per_epoch > 1
    _, rows = read_curve()
    assert [row["target_tokens"] for row in rows] == [per_epoch, 2 * per_epoch]
    assert 0 < metrics["train_seconds"] and metrics["train_tokens_per_s"] > 0


@pytest.mark.slow
def test_compiled_training_matches_eager_training_and_keeps_the_checkpoint_keys(project):
    # without dropout: a compiled model draws its masks with the compiler's own random numbers, not eager's
    project = project.model_copy(update={"models": {"tiny": {**project.models["tiny"], "dropout": 0.0}}})
    eager = train(project, "tiny")
    eager_state, _ = checkpoint_state("models/tiny/seed42/best.ckpt")
    compiled = train(project.model_copy(update={"train": project.train.model_copy(update={"compile": True})}), "tiny",
                     root=Path("compiled"))
    compiled_state, _ = checkpoint_state("compiled/models/tiny/seed42/best.ckpt")
    assert compiled_state.keys() == eager_state.keys()  # evaluate and load_model read it as before
    assert compiled["steps"] == eager["steps"] and compiled["target_tokens"] == eager["target_tokens"]
    assert compiled["best_val_loss"] == pytest.approx(eager["best_val_loss"], abs=2e-3)


def test_an_own_model_outside_the_package_trains_decodes_and_is_budgeted(project, tmp_path, monkeypatch):
    """A module the test writes, named in params as package.module:Class, goes through train and evaluate."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "mine.py").write_text((Path(__file__).parents[1] / "examples/own_model/bag_gru.py").read_text())
    monkeypatch.syspath_prepend(str(own))
    block = {"family": "mine:BagGRU", "embed_dim": 16, "hidden_dim": 16, "dropout": 0.0}
    cfg = project.train.model_copy(update={"budget": project.train.budget.model_copy(
        update={"kind": "flops", "value": 4.0e+6})})
    params = project.model_copy(update={"train": cfg, "models": {"mine": block}, "seeds": [42]})
    metrics = train(params, "mine")
    assert 0 < metrics["steps"] and 4.0e6 <= metrics["train_flops"]  # counted like a built-in, stopped by the budget
    model = load_model("models/mine/seed42/best.ckpt", Tokenizer("data/tokenized"))
    assert type(model).__name__ == "BagGRU" and metrics["params"] == model.num_parameters()
    scores = evaluate(params, "mine")
    assert set(scores) == set(params.data.eval_splits)
    found = Path(f"results/mine/seed42/{params.data.eval_splits[0]}.txt").read_text().splitlines()
    assert len(found) == scores[params.data.eval_splits[0]]["sentences"]
