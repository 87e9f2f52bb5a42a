"""Scratch projects: the tiny mirror prepared and tokenized under this project's params, and DVC workspaces."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from nmtbench.config import DataConfig, TokenizeConfig
from nmtbench.data.prepare import prepare
from nmtbench.data.tokenizer import tokenize
from nmtbench.profiles import merge

# params of a scratch project on the tiny mirror: merged onto params.yaml, with these models only
TINY_PARAMS = {
    "data": {"max_length": 8},
    "tokenize": {"vocab_size": 305},
    "train": {"batch_tokens": 64, "max_epochs": 2, "warmup_steps": 2, "budget": {"kind": "none"}},
    "evaluate": {"beam": 2, "max_len_a": 1.0, "max_len_b": 2},
    "beam_sweep": {"model": "tiny", "seed": 42, "beams": [1, 2], "alphas": [1.0]},
    "compare": {"baseline": "tiny", "bootstrap_resamples": 10, "examples": [0]},
    "wandb": {"group": "unit"},
    "models": {"tiny": {"family": "transformer", "d_model": 16, "heads": 2, "layers": 1, "d_ff": 32}},
}
ROOT = Path(__file__).resolve().parents[2]


def write_tiny_project(folder: Path, mirror: Path, checksums: dict[str, str], models: dict | None = None,
                       data: dict | None = None) -> dict:
    """params.yaml, data/prepared and data/tokenized of the tiny mirror in folder (the current folder
    for the stages), data's keys over TINY_PARAMS' data block; returns the raw params."""
    raw = merge(yaml.safe_load((ROOT / "params.yaml").read_text()), merge(TINY_PARAMS, {"data": data or {}}))
    raw["models"] = models or TINY_PARAMS["models"]
    (folder / "params.yaml").write_text(yaml.safe_dump(raw))
    prepare(DataConfig(**{**TINY_PARAMS["data"], **(data or {})}), mirror, folder / "data/prepared",
            folder / "data/stats.json", folder / "data/raw", checksums)
    tokenize(TokenizeConfig(vocab_size=305), folder / "data/prepared", folder / "data/tokenized")
    return raw


# the trained project: one Transformer and one attention LSTM, so each family's decoding is covered
TRAINED_MODELS = {"tiny": TINY_PARAMS["models"]["tiny"],
                  "tiny_rnn": {"family": "rnn", "cell": "lstm", "attention": "dot", "embed_dim": 12, "hidden_dim": 16}}


def pipeline_env(**extra: str) -> dict[str, str]:
    """The environment for a pipeline run in a child process."""
    # the stages call `nmtbench` and `dvc`: put this interpreter's scripts first on PATH
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    # An in-process W&B run earlier in the session leaves WANDB_SERVICE set; children that inherit it
    # log to this process's wandb-core service, and their offline runs lose their .wandb files.
    inherited = {key: value for key, value in os.environ.items() if key != "WANDB_SERVICE"}
    return {**inherited, "WANDB_SILENT": "true", "PATH": path, **extra}


def pipeline_workspace(workspace: Path, profile: Path, **env: str):
    """A DVC workspace of this project's params.yaml + profile; returns run(*cmd), which runs a command there."""
    env = pipeline_env(**env)
    subprocess.run([sys.executable, "-m", "nmtbench", "--params", str(ROOT / "params.yaml"),
                    "workspace", str(workspace), "--profile", str(profile)], check=True, env=env)
    return lambda *cmd: subprocess.run(cmd, cwd=workspace, env=env, check=True, capture_output=True, text=True)


def keep_models(workspace: Path, names: tuple[str, ...], **blocks: dict) -> dict:
    """Cut a workspace's params.yaml to these of its models, the first the baseline and the beam sweep's model, and
    merge blocks into it ({"tune": {"trials": 0}} changes that key alone); returns the params written."""
    params = merge(yaml.safe_load((workspace / "params.yaml").read_text()), blocks)
    params["models"] = {name: params["models"][name] for name in names}
    params["compare"]["baseline"] = params["beam_sweep"]["model"] = names[0]
    (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return params


# what differs between two runs of the same params: how long things took, and when and where they ran
TIMINGS = {"train_seconds", "train_tokens_per_s", "sentences_per_s", "decode_seconds", "provenance"}


def scores(comparison: dict) -> dict:
    """comparison.json without what measures time or records the run (its provenance)."""
    if isinstance(comparison, dict):
        return {key: scores(value) for key, value in comparison.items() if key not in TIMINGS}
    return comparison
