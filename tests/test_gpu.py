"""The GPU lane (`make test-gpu`): tests marked gpu, skipped without CUDA. Not yet run on a GPU.

Also marked gpu elsewhere: the resume-after-kill test of test_train_evaluate.py, on accelerator gpu.
"""
import json
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml

from helpers.models import make_tiny_model
from helpers.project import TINY_PARAMS, write_tiny_project
from nmtbench.config import DecodeConfig, parse_params
from nmtbench.data.datamodule import TranslationData
from nmtbench.decoding.translator import Translator
from nmtbench.evaluation.evaluate import evaluate
from nmtbench.loading import read_vocab
from nmtbench.training.module import TranslationModule
from nmtbench.training.train import train

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

FAMILIES = {  # one tiny model of every family
    "tiny": TINY_PARAMS["models"]["tiny"],
    "tiny_rnn": {"family": "rnn", "cell": "lstm", "attention": "dot", "embed_dim": 12, "hidden_dim": 16},
    "tiny_cnn": {"family": "cnn", "embed_dim": 12, "channels": 16, "kernel": 3},
    "tiny_decoder_only": {"family": "decoder_only", "d_model": 16, "heads": 2, "layers": 1, "d_ff": 32},
    "tiny_hybrid": {"family": "hybrid", "encoder": {"family": "rnn", "embed_dim": 16, "hidden_dim": 16},
                    "decoder": {"family": "transformer", "d_model": 16, "heads": 2, "layers": 1, "d_ff": 32}},
}


@pytest.fixture
def project(tmp_path, monkeypatch, make_data_mirror):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    # fp32 on the GPU as on the CPU: no TF32 matrix products or convolutions
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    mirror, checksums = make_data_mirror()
    return parse_params(write_tiny_project(tmp_path, mirror, checksums, FAMILIES))


def on(params, **train):
    return params.model_copy(update={"train": params.train.model_copy(update=train)})


@pytest.mark.parametrize("name", FAMILIES)
def test_bf16_training_of_every_family(project, name):
    metrics = train(on(project, accelerator="gpu", precision="bf16-mixed"), name)
    assert metrics["steps"] > 0 and metrics["best_val_loss"] < 50 and metrics["train_tokens_per_s"] > 0


@pytest.mark.parametrize("name", ["transformer_post", "lstm_general", "gru_additive_2layers", "decoder_only", "cnn"])
@pytest.mark.parametrize("beam", [1, 4])
def test_decoding_on_the_gpu_gives_the_tokens_of_the_cpu(project, name, beam):
    sources = [[4 + (i * 7 + j) % 16 for j in range(1 + i % 6)] for i in range(24)]
    cfg = DecodeConfig(beam=beam, max_len_a=1.0, max_len_b=3)
    on_cpu = Translator(make_tiny_model(name), None, cfg).translate_ids(sources)
    on_gpu = Translator(make_tiny_model(name).cuda(), None, cfg).translate_ids(sources)
    assert [h[0].tokens for h in on_gpu] == [h[0].tokens for h in on_cpu]


def test_a_checkpoint_evaluates_on_the_other_device(project):
    """Trained on the CPU, evaluated on the GPU and on the CPU: the same translations; and the reverse."""
    hashes = {}
    for trained_on in ("cpu", "gpu"):
        trained = on(project, accelerator=trained_on)  # evaluate refuses a checkpoint of other train keys
        train(trained, "tiny")
        for device in ("cuda", "cpu"):
            params = trained.model_copy(update={"evaluate": trained.evaluate.model_copy(update={"device": device})})
            metrics = evaluate(params, "tiny")
            hashes[trained_on, device] = [split["hypotheses_sha256"] for split in metrics.values()]
    assert hashes["cpu", "cuda"] == hashes["cpu", "cpu"] and hashes["gpu", "cuda"] == hashes["gpu", "cpu"]


def test_ddp_on_one_gpu(project):
    raw = yaml.safe_load(open("params.yaml"))
    raw["train"].update({"accelerator": "gpu", "devices": 1, "strategy": "ddp"})
    open("params.yaml", "w").write(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "nmtbench", "train", "tiny"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(Path("metrics/tiny/seed42/train.json").read_text())["steps"] > 0


class NoSyncInSteps(L.Callback):
    """Turns any host synchronisation inside a training step (forward, backward, optimiser) into an error."""

    def __init__(self):
        self.steps = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        torch.cuda.set_sync_debug_mode("error")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        torch.cuda.set_sync_debug_mode("default")
        self.steps += 1


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
@pytest.mark.parametrize("name", FAMILIES)
def test_training_steps_never_wait_for_the_gpu(project, name, precision):
    cfg = project.train
    vocab = read_vocab(Path("data/tokenized"))
    module = TranslationModule(name, FAMILIES[name], vocab, cfg.model_dump(), 42)
    guard = NoSyncInSteps()
    trainer = L.Trainer(accelerator="gpu", devices=1, precision=precision, max_steps=6, limit_val_batches=0,
                        gradient_clip_val=cfg.gradient_clip_val, callbacks=[guard], logger=False,
                        enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)
    try:
        trainer.fit(module, datamodule=TranslationData(Path("data/tokenized"), cfg.batch_tokens, 42))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert guard.steps == 6 and module.target_tokens > 0
