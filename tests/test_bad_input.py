"""Bad input through the command line, as a new user meets it: one line on stderr naming the problem
and the fix, exit status 2, and every output written before left exactly as it was.

Each test runs `nmtbench` in-process on a copy of one tiny project trained once per session
(conftest.trained_copy); the numbers in the names are those of the issue that listed the defects.
"""
import errno
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import wandb
import yaml

from nmtbench.cli import main


@pytest.fixture
def project(trained_copy, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    return trained_copy


PROGRESS_BAR = re.compile(r"\|.*\[\d+:\d\d<[^]]*\]$")  # tqdm's "decoding x: 50%|##  | 1/2 [00:01<00:01, 1.0sent/s]"


def outputs(folder: Path = Path(".")) -> dict[str, tuple[str, int]]:
    """Every file under folder with its hash and modification time: a rewrite with equal bytes shows too."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def refused(capsys, *argv: str) -> str:
    """Run nmtbench with argv; assert exit 2, no output, one line on stderr besides the progress bar of the work
    done before the failure; return that line's message."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    (line,) = [line for line in err.splitlines() if line.strip() and not PROGRESS_BAR.search(line)]
    command = argv[2] if argv[0] == "--params" else argv[0]
    prefix = f"nmtbench {command}: error: "
    assert line.startswith(prefix)
    return line.removeprefix(prefix)


def set_params(path="params.yaml", **blocks):
    raw = yaml.safe_load(Path(path).read_text())
    for block, values in blocks.items():
        merge = isinstance(values, dict) and isinstance(raw.get(block), dict)
        raw[block] = {**raw[block], **values} if merge else values
    Path(path).write_text(yaml.safe_dump(raw))


def stdin(monkeypatch, data: bytes):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def translate(capsys, monkeypatch, data: bytes, *options: str, model="tiny") -> list[str]:
    stdin(monkeypatch, data)
    assert main(["translate", f"models/{model}/seed42", *options]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out.splitlines()


# 1 (Transformer) and 3 (RNN)
@pytest.mark.parametrize("model", ["tiny", "tiny_rnn"])
def test_1_3_a_blank_line_gives_a_blank_line_in_its_place(project, capsys, monkeypatch, model):
    alone = [translate(capsys, monkeypatch, line, model=model)[0] for line in (b"A dog runs.\n", b"A man sits.\n")]
    assert translate(capsys, monkeypatch, b"A dog runs.\n\nA man sits.\n", model=model) == [alone[0], "", alone[1]]
    nbest = translate(capsys, monkeypatch, b"A dog runs.\n\nA man sits.\n", "--nbest", "2", model=model)
    assert [line.split(" ||| ")[0] for line in nbest] == ["0", "0", "1", "2", "2"]
    assert nbest[2] == "1 |||  ||| 0.0000"


def test_4_text_that_is_not_utf8_names_the_line_and_the_fix(project, capsys, monkeypatch):
    before = outputs()
    stdin(monkeypatch, b"A dog.\ncaf\xe9\n")
    assert refused(capsys, "translate", "models/tiny_rnn/seed42") == (
        "standard input, line 2: not UTF-8 text (unexpected end of data at byte 3); convert the input to "
        "UTF-8, e.g. iconv -f latin1 -t utf-8")
    Path("in.txt").write_bytes(b"\x00\x01\x02 binary\n")
    assert refused(capsys, "translate", "models/tiny_rnn/seed42", "in.txt") == (
        "in.txt, line 1: holds a NUL byte, so it is binary, not text; pass a text file with one sentence per line")
    Path("in.txt").unlink()
    assert outputs() == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a GPU")
def test_5_a_gpu_accelerator_without_a_gpu(project, capsys):
    set_params(train={"accelerator": "gpu"})
    before = outputs()
    assert refused(capsys, "train", "tiny").startswith("train.accelerator: gpu, but torch finds no CUDA GPU")
    assert outputs() == before


@pytest.mark.parametrize("argv, message", [
    (["evaluate", "tiny"], "evaluate.device: cuda, but torch finds no CUDA GPU on this machine; use evaluate.device "
                           "auto or cpu, or run where a GPU and a CUDA build of torch are"),
    (["beam-sweep"], "evaluate.device: cuda, but torch finds no CUDA GPU on this machine; use evaluate.device "
                     "auto or cpu, or run where a GPU and a CUDA build of torch are"),
    (["translate", "models/tiny/seed42", "--device", "cuda"], "--device: cuda, but torch finds no CUDA GPU on this "
                                                              "machine; use --device auto or cpu, or run where a GPU "
                                                              "and a CUDA build of torch are"),
])
def test_5_also_decoding_on_cuda_without_a_gpu(project, capsys, monkeypatch, argv, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    if argv[0] != "translate":
        set_params(evaluate={"device": "cuda"})
    stdin(monkeypatch, b"A dog runs.\n")
    before = outputs()
    assert refused(capsys, *argv) == message
    assert outputs() == before


@pytest.fixture
def no_wandb_account(tmp_path, monkeypatch):
    for key in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(key)
    for key, value in {"HOME": tmp_path, "WANDB_CONFIG_DIR": tmp_path, "NETRC": tmp_path / "netrc"}.items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield
    # The online attempt leaves a wandb-core service behind: held by wandb's in-process singleton and named
    # by WANDB_SERVICE, which monkeypatch does not undo (the key was absent). Later W&B runs of this process,
    # and every child process, would log through it and lose their offline .wandb files: shut it down.
    wandb.teardown()
    os.environ.pop("WANDB_SERVICE", None)


@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_6_wandb_online_without_a_key(project, capsys, monkeypatch, no_wandb_account, command):
    monkeypatch.setenv("WANDB_MODE", "online")
    before = outputs()
    assert refused(capsys, command, "tiny") == (
        "W&B online: no W&B API key is set; run `wandb login` (or set WANDB_API_KEY) on a machine with network, "
        "or log offline: wandb.mode: offline in params.yaml, or WANDB_MODE=offline for one command")
    assert outputs() == before


@pytest.mark.slow  # W&B's own login check takes about 10 seconds to give up, twice
def test_6_wandb_online_with_a_wrong_key_or_no_network(project, capsys, monkeypatch, no_wandb_account):
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    set_params(wandb={"mode": "online"})
    before = outputs()
    assert refused(capsys, "train", "tiny").startswith("W&B online: W&B refused the API key or could not be "
                                                       "reached (AuthenticationError); run `wandb login`")
    assert refused(capsys, "dashboard").startswith("W&B refused the API key or could not be reached "
                                                   "(AuthenticationError); needs a W&B account: run `wandb login`")
    assert outputs() == before


def test_7_a_yaml_syntax_error_names_the_file_line_and_column(project, capsys):
    Path("params.yaml").write_text("train:\n  lr: [0.001\n  max_steps: 5\n")
    Path("profile.yaml").write_text("train: {lr: 0.001\n")
    before = outputs()
    assert refused(capsys, "train", "tiny") == ("params.yaml, line 3, column 12: not valid YAML (expected ',' or "
                                                "']', but got ':'); fix the syntax there")
    assert refused(capsys, "--params", str(Path(__file__).parents[1] / "params.yaml"), "workspace", "ws", "--profile",
                   "profile.yaml").startswith("profile.yaml, line 2, column 1: not valid YAML")
    assert outputs() == before


@pytest.mark.parametrize("code, message", [
    (errno.EACCES, "Permission denied; make it writable (chmod u+w) or run where you can write"),
    (errno.ENOSPC, "No space left on device; free disk space"),
])
def test_8_a_read_only_or_full_folder(project, capsys, monkeypatch, code, message):
    """Tests run as root, whom permissions do not stop.

    The system's refusal is raised where the writers create files.
    """
    def refuse(*args, dir=None, **kwargs):
        raise OSError(code, os.strerror(code), str(dir))
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    before = outputs()
    assert refused(capsys, "evaluate", "tiny") == (
        f"results/tiny: {message}, then rerun (outputs written before are unchanged)")
    assert outputs() == before


@pytest.mark.parametrize("steps", [0, -5])
def test_9_max_steps_must_be_positive_or_minus_one(project, capsys, steps):
    set_params(train={"max_steps": steps})
    before = outputs()
    assert refused(capsys, "train", "tiny") == f"train.max_steps: must be > 0, or -1 for no step limit; got {steps}"
    assert outputs() == before


@pytest.mark.parametrize("options, message", [
    (["--nbest", "0"], "--nbest: must be at least 1, got 0"),
    (["--nbest", "-2"], "--nbest: must be at least 1, got -2"),
    (["--nbest", "3"], "--nbest: 3 is more than the beam size 2; raise --beam to at least 3"),
    (["--beam", "0"], "--beam: must be at least 1, got 0"),  # "Also": it was reported as evaluate.beam
    (["--batch-tokens", "0"], "--batch-tokens: must be at least 1, got 0"),
    (["--alpha", "-1"], "--alpha: must be at least 0, got -1.0"),
])
def test_10_translate_options_out_of_range(project, capsys, monkeypatch, options, message):
    stdin(monkeypatch, b"A dog runs.\n")
    assert refused(capsys, "translate", "models/tiny/seed42", *options) == message


def test_11_a_checkpoint_as_the_model_folder_and_a_folder_as_the_input(project, capsys):
    before = outputs()
    assert refused(capsys, "translate", "models/tiny/seed42/best.ckpt") == (
        "models/tiny/seed42/best.ckpt is a file, not a model folder; pass a trained model folder such as "
        "models/transformer/seed42 (train one with dvc repro train@<name>-<seed>)")
    assert refused(capsys, "translate", "models/tiny/seed42", "data") == (
        "data is a folder; pass a text file with one sentence per line, or - for standard input")
    assert refused(capsys, "translate", "models/tiny/seed42", "absent.txt") == (
        "absent.txt: no such input file; pass a text file with one sentence per line")
    assert outputs() == before


KILLED_WRITING = """
import os, signal
from pathlib import Path
from nmtbench.files import atomic_dir
with atomic_dir(Path("data/tokenized")) as tmp:
    (tmp / "half").write_text("x")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_12_a_killed_tokenize_leaves_nothing_behind_after_the_next_run(project, capsys):
    # SIGKILL inside the atomic writer, as a kill during the stage would: its temp folder stays
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITING], check=False)
    assert killed.returncode == -9
    (leftover,) = Path("data").glob(".tokenized.*")
    capsys.readouterr()
    assert main(["tokenize"]) == 0
    assert capsys.readouterr().out.startswith("data/tokenized: a joint subword vocabulary of ")  # its result
    assert not leftover.exists() and [p.name for p in Path("data").iterdir() if p.name.startswith(".")] == []


KILLED_DECODING = """
import os, signal
from nmtbench.cli import main
from nmtbench.decoding.translator import Translator
decode, calls = Translator.translate_ids, []
def kill_at_the_second_split(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return decode(self, *args, **kwargs)
Translator.translate_ids = kill_at_the_second_split
main(["evaluate", "tiny"])
"""


def test_13_a_killed_evaluate_leaves_the_previous_outputs_whole(project, capsys):
    set_params(evaluate={"beam": 1, "max_len_b": 6})  # the new translations would differ
    before = outputs()
    # SIGKILL after the first test set is decoded, before the second
    killed = subprocess.run([sys.executable, "-c", KILLED_DECODING], check=False)
    assert killed.returncode == -9
    assert outputs() == before
    assert main(["evaluate", "tiny"]) == 0 and main(["compare"]) == 0  # the next run replaces the whole unit


def test_14_a_missing_model_folder_or_tokenizer_names_the_right_fix(project, capsys):
    assert refused(capsys, "translate", "models/nosuch/seed42") == (
        "models/nosuch/seed42 does not exist; pass a trained model folder such as models/transformer/seed42 "
        "(train one with dvc repro train@<name>-<seed>)")
    Path("models/tiny/seed42/spm.model").unlink()
    assert refused(capsys, "translate", "models/tiny/seed42") == (
        "models/tiny/seed42 has no spm.model (nor spm.src.model and spm.tgt.model); pass a trained model folder such "
        "as models/transformer/seed42, which holds best.ckpt, its sentencepiece model(s) and vocab.json once its "
        "training has finished")


def test_15_blocks_of_the_wrong_shape(project, capsys):
    set_params(train=5)
    before = outputs()
    assert refused(capsys, "train", "tiny") == ("train: expected a block of `key: value` lines, got 5; "
                                                "indent its keys under `train:`")
    Path("params.yaml").write_text("- train\n- models\n")
    assert refused(capsys, "check") == ("params: expected blocks such as `train:` and `models:`, "
                                        "got list ['train', 'models']")
    Path("profile.yaml").write_text("- train: {lr: 0.1}\n")
    assert refused(capsys, "--params", str(Path(__file__).parents[1] / "params.yaml"), "workspace", "ws", "--profile",
                   "profile.yaml") == ("profile.yaml: expected params blocks to override, such as `train:`, got a "
                                       "list; see profiles/smoke.yaml")
    assert not Path("ws").exists()
    Path("profile.yaml").unlink()
    def without_params(files):
        return {k: v for k, v in files.items() if k != "params.yaml"}

    assert without_params(outputs()) == without_params(before)


def test_16_no_test_sets_to_evaluate(project, capsys):
    set_params(data={"eval_splits": []})
    before = outputs()
    assert refused(capsys, "evaluate", "tiny") == (
        "data.eval_splits: empty; list at least one test set to evaluate, e.g. [test_2016_flickr]")
    assert outputs() == before


def test_17_seeds_null_is_named_by_check_before_dvc_reads_it(project, capsys):
    """DVC reads `seeds` to expand the grid before any stage runs, and names no key; `nmtbench check`,
    which make repro runs before dvc repro, does."""
    set_params(seeds=None)
    assert refused(capsys, "check") == ("seeds: expected a list of distinct integers from 0 to 2**32 - 1 (numpy's "
                                        "range of seeds), e.g. [42] or [1, 2, 3], got None")
    set_params(seeds=[42])
    assert main(["check"]) == 0
    assert capsys.readouterr().out == "params.yaml: valid (2 models x 1 seeds)\n"


def test_also_a_missing_mirror_folder_is_named_as_a_folder(project, capsys, monkeypatch):
    monkeypatch.setenv("NMTBENCH_DATA_MIRROR", "no/such/mirror")
    before = outputs()
    assert refused(capsys, "prepare") == ("the mirror folder no/such/mirror does not exist; point NMTBENCH_DATA_MIRROR "
                                          "at a folder holding the Multi30k raw files, or unset NMTBENCH_DATA_MIRROR "
                                          "to download from upstream")
    assert outputs() == before


def test_52_a_byte_order_mark_opening_the_input_is_no_part_of_its_first_line(project, capsys, monkeypatch):
    plain = translate(capsys, monkeypatch, b"A dog runs.\nA man sits.\n")
    assert translate(capsys, monkeypatch, b"\xef\xbb\xbfA dog runs.\nA man sits.\n") == plain


def test_44_a_published_figure_without_its_bleu_is_named_by_check(tmp_path, capsys):
    """The issue's entry, `{transformer: {split: test_2016_flickr}}`, ended check with a TypeError traceback."""
    raw = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())
    raw["compare"]["published"] = {"transformer": {"split": "test_2016_flickr"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    assert refused(capsys, "--params", str(tmp_path / "params.yaml"), "check") == (
        "compare.published.transformer.bleu: missing; add `bleu: <float>` to the block")



PROJECT = Path(__file__).parents[1]


def shipped_with(tmp_path: Path, change) -> str:
    """The project's params.yaml as change(raw) leaves it, written to tmp_path; its path."""
    raw = yaml.safe_load((PROJECT / "params.yaml").read_text())
    change(raw)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    return str(tmp_path / "params.yaml")


@pytest.mark.parametrize("text, message", [
    ("train:\n  lr: 0.001\n  max_epochs: 2\n  lr: 0.002\n", "duplicate key 'lr' under train (lines 2 and 4)"),
    ("models:\n  tiny:\n    family: rnn\n  tiny:\n    family: cnn\n",
     "duplicate key 'tiny' under models (lines 2 and 4)"),
])
def test_52_a_key_given_twice_is_named_by_check_before_dvc_reads_it(tmp_path, capsys, text, message):
    """check said valid, keeping the last; dvc repro then refused the file in many lines (found duplicate key)."""
    (tmp_path / "params.yaml").write_text(text)
    assert refused(capsys, "--params", str(tmp_path / "params.yaml"), "check") == (
        f"{tmp_path / 'params.yaml'}: {message}; keep one")


@pytest.mark.parametrize("seeds", [[-1], [2**32]])
def test_52_a_seed_numpy_refuses_is_named_by_check(tmp_path, capsys, seeds):
    """Training refused it with numpy's words, after dvc repro had deleted the run's outputs."""
    path = shipped_with(tmp_path, lambda raw: raw.update(seeds=seeds))
    assert refused(capsys, "--params", path, "check") == (
        f"seeds: expected a list of distinct integers from 0 to 2**32 - 1 (numpy's range of seeds), e.g. [42] or "
        f"[1, 2, 3], got {seeds}")


@pytest.mark.parametrize("half, example", [("decoder", "{family: rnn, cell: lstm, attention: general}"),
                                           ("encoder", "{family: transformer, layers: 6}")])
def test_52_a_hybrid_without_a_half_names_the_block_and_an_example(tmp_path, capsys, half, example):
    path = shipped_with(tmp_path, lambda raw: raw["models"]["hybrid_transformer_lstm"].pop(half))
    assert refused(capsys, "--params", path, "check") == (
        f"models.hybrid_transformer_lstm.{half}: missing; a hybrid needs both halves, each a block of its family's "
        f"keys, e.g. {half}: {example}")


@pytest.mark.parametrize("argv", [["check"], ["train", "transformer"], ["evaluate", "transformer"], ["compare"],
                                  ["converge"], ["workspace", "ws", "--profile", "smoke.yaml"]])
def test_52_a_command_outside_a_project_says_where_to_run(tmp_path, capsys, monkeypatch, argv):
    """nmtbench workspace read params.yaml past load_params' check: [Errno 2] No such file or directory."""
    monkeypatch.chdir(tmp_path)
    where = tmp_path / "params.yaml" if argv[0] == "workspace" else "params.yaml"  # the project is its folder
    assert refused(capsys, *argv) == f"{where}: no such params file; run from the project root or pass --params"
    assert list(tmp_path.iterdir()) == []


def test_52_a_profile_that_changes_a_hybrid_halfs_family_is_told_to_replace_the_grid(tmp_path, capsys, monkeypatch):
    """It was told to remove a key that params.yaml set: the old decoder's cell, not a key of the cnn decoder."""
    monkeypatch.chdir(tmp_path)
    Path("profile.yaml").write_text("models:\n  hybrid_transformer_lstm:\n    decoder: {family: cnn, kernel: 3}\n")
    assert refused(capsys, "--params", str(PROJECT / "params.yaml"), "workspace", "ws", "--profile",
                   "profile.yaml") == (
        "models.hybrid_transformer_lstm.decoder: profile.yaml makes it a cnn, params.yaml a rnn; rename the model in "
        "one file, or replace the grid in profile.yaml with `replace: [models]`")
    assert not Path("ws").exists()


def test_52_launch_outside_a_project_says_where_to_run(tmp_path, capsys, monkeypatch):
    """DVC's own line, "you are not inside of a DVC repository", named no fix."""
    monkeypatch.chdir(tmp_path)
    assert refused(capsys, "launch") == (
        f"{tmp_path}: no dvc.yaml here; run nmtbench launch in the project's folder or in a workspace "
        "(nmtbench workspace runs/mine --profile profiles/smoke.yaml)")
    assert list(tmp_path.iterdir()) == []
