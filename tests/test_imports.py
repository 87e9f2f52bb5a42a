"""What each stage kind imports before its first real work: every stage is a process of its own, and torch, Lightning
and torch._dynamo (which Lightning pulls in) take seconds to import, paid by every stage that loads them. So a stage
that neither trains nor decodes loads none of them (the comparison and `nmtbench check` read every model block, and
build none), a stage that decodes loads no Lightning, and only training loads Lightning (docs/pipeline.md, "What a
stage imports"). Hugging Face `datasets` (pandas under it) takes seconds too: only the stages that write the dataset
(prepare, tokenize) and training load it; the rest read test sets with pyarrow (data/tokenized.py). Each stage
runs in a child process of the trained tiny project, which then names the libraries it holds."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from helpers.project import ROOT, pipeline_env
from nmtbench.cli import main
from nmtbench.models.registry import FAMILIES

WATCHED = ("torch", "lightning", "torch._dynamo", "datasets")
NONE_OF_THEM = WATCHED
NO_TORCH = ("torch", "lightning", "torch._dynamo")  # the data stages, which write with datasets
NO_LIGHTNING = ("lightning", "torch._dynamo", "datasets")
NO_DATASETS = ("datasets",)  # training and analyze: they need Lightning, and read the tokenized splits with pyarrow

# the command's output goes to standard error; the last line of standard output is its exit code and what it loaded
RUN_STAGE = f"""
import contextlib, json, sys
from nmtbench.cli import main
from nmtbench.models.registry import FAMILIES
with contextlib.redirect_stdout(sys.stderr):
    code = main(sys.argv[1:])
print(json.dumps([code, [name for name in {WATCHED!r} if name in sys.modules]]))
"""
IMPORT_MODULES = f"""
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps([0, [name for name in {WATCHED!r} if name in sys.modules]]))
"""


def loaded(code: str, *args: str) -> list[str]:
    """What of WATCHED a child process running code with args holds at its end; the child must succeed."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=pipeline_env(WANDB_MODE="disabled"))
    assert done.returncode == 0 and done.stdout.strip(), done.stdout + done.stderr[-2000:]
    exit_code, found = json.loads(done.stdout.splitlines()[-1])
    assert exit_code == 0, done.stderr[-2000:]
    return found


@pytest.mark.parametrize(("modules", "absent"), [
    (["nmtbench.cli"], NONE_OF_THEM),  # every command's start: nmtbench --help, --version
    (["nmtbench.data.prepare"], NO_TORCH),
    (["nmtbench.data.tokenizer"], NO_TORCH),
    (["nmtbench.evaluation.report"], NONE_OF_THEM),
    (["nmtbench.training.tuning"], NONE_OF_THEM),  # what train and evaluate import to read tuned/<model>.yaml too
    (["nmtbench.models.registry", "nmtbench.models.hybrid_config"], NONE_OF_THEM),  # every family's config
    (["nmtbench.evaluation.compare", "nmtbench.evaluation.verdict"], NONE_OF_THEM),
    (["nmtbench.analysis.claims"], NONE_OF_THEM),  # analyze's tables; the stage itself trains its probes
    (["nmtbench.evaluation.evaluate", "nmtbench.decoding.translator"], NO_LIGHTNING),
    (["nmtbench.training.train", "nmtbench.analysis.analyze"], NO_DATASETS),
], ids=["cli", "prepare", "tokenize", "report", "tune", "registry", "compare", "claims", "decoding", "training"])
def test_a_stage_module_imports_only_what_its_stage_uses(modules, absent):
    """The stages without a cheap run here: the module each one's command imports."""
    assert set(loaded(IMPORT_MODULES, *modules)) & set(absent) == set()


@pytest.mark.parametrize(("command", "absent"), [
    (["tune", "tiny"], NONE_OF_THEM),  # params.yaml's tune.trials 0: it writes tuned/tiny.yaml and nothing else
    (["check"], NONE_OF_THEM),
    (["evaluate", "tiny"], NO_LIGHTNING),
    (["translate", "models/tiny/seed42", "input.txt"], NO_LIGHTNING),
    (["beam-sweep"], NO_LIGHTNING),
    (["compare"], NONE_OF_THEM),
], ids=["tune-no-trials", "check", "evaluate", "translate", "beam_sweep", "compare"])
def test_a_stage_run_imports_only_what_it_uses(trained_copy, command, absent):
    (trained_copy / "input.txt").write_text("a man\n")
    assert set(loaded(RUN_STAGE, *command)) & set(absent) == set()


def test_the_report_imports_neither_torch_nor_lightning(trained_copy, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert main(["compare"]) == 0  # the table the report draws
    assert loaded(RUN_STAGE, "report") == []


@pytest.mark.parametrize("trials", [0, 2])
def test_check_validates_every_family_without_torch(tmp_path, trials):
    """The project's params.yaml holds a model of every built-in family, hybrids too; with trials, check also reads
    each model's search space against its family."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["tune"]["trials"] = trials
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert {block["family"] for block in params["models"].values()} == set(FAMILIES)
    assert loaded(RUN_STAGE, "--params", str(tmp_path / "params.yaml"), "check") == []
