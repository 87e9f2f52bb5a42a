"""The command line: every command and option says what it is for, and options may come before or after
the command."""
import argparse
import shutil

import pytest
import yaml

from helpers.project import ROOT
from nmtbench.cli import build_parser, main
from nmtbench.profiles import merge


def undocumented(parser: argparse.ArgumentParser, path: str = "nmtbench") -> list[str]:
    """'path: what' for every option, argument and command of parser and of the commands below it that has no help
    line, and every command without a description for its own --help."""
    found = [] if parser.description else [f"{path}: no description"]
    for action in parser._actions:
        found += [f"{path}: {action.option_strings or action.dest}"] if not action.help else []
        if isinstance(action, argparse._SubParsersAction):
            listed = {line.dest: line.help for line in action._choices_actions}  # the list of commands in --help
            for name, command in action.choices.items():
                found += ([] if listed.get(name) else [f"{path}: {name}"]) + undocumented(command, f"{path} {name}")
    return found


def test_every_command_and_option_has_a_help_line():
    assert undocumented(build_parser()) == []


def test_the_help_check_finds_what_is_missing():
    parser = build_parser()
    (commands,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    commands.choices["check"].add_argument("--fast")
    commands.add_parser("silent").add_argument("target")
    assert undocumented(parser) == ["nmtbench check: ['--fast']", "nmtbench: silent", "nmtbench silent: no description",
                                    "nmtbench silent: target"]


@pytest.mark.parametrize("argv", [["check", "--params", "mine.yaml"], ["--params", "mine.yaml", "check"],
                                  ["--params", "other.yaml", "check", "--params", "mine.yaml"]])
def test_options_come_before_or_after_the_command(tmp_path, monkeypatch, capsys, argv):
    shutil.copyfile(ROOT / "params.yaml", tmp_path / "mine.yaml")
    monkeypatch.chdir(tmp_path)  # no params.yaml here: only the option finds the file
    assert main(argv) == 0
    assert capsys.readouterr().out == "mine.yaml: valid (17 models x 1 seeds)\n"


def test_the_default_params_file_stays_the_default(tmp_path, monkeypatch, capsys):
    shutil.copyfile(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 0
    assert capsys.readouterr().out == "params.yaml: valid (17 models x 1 seeds)\n"


@pytest.mark.parametrize("changes, message", [
    ({"models": {"transformer": {"tie_embeddings": "maybe"}}},
     "models.transformer.tie_embeddings: 'maybe' is not valid; choose one of all, source_target, target_output, none"),
    ({"models": {"cnn": {"family": "no_such_module:Model"}}},
     "models.cnn.family: cannot import no_such_module (No module named 'no_such_module'); put its folder on "
     "PYTHONPATH or install it, or choose one of cnn, decoder_only, hybrid, rnn, transformer"),
    ({"models": {"hybrid_lstm_transformer": {"encoder": {"family": "decoder_only"}}}},
     "models.hybrid_lstm_transformer.encoder.family: decoder_only has no encoder and decoder halves of its own"),
    ({"tokenize": {"joint": False}, "models": {"rnn": {"tie_embeddings": "source_target"}}},
     "models.rnn.tie_embeddings: source_target makes the source and the target embedding one matrix, which needs "
     "one joint vocabulary, but the tokenize stage makes one per side (tokenize.joint: false)"),
    ({"analyze": {"models": {"cnn": {"kernel": 4}}}}, "models.cnn.kernel: must be odd and positive, got 4"),
])
def test_check_builds_every_model_block_whatever_tune_trials_is(tmp_path, monkeypatch, capsys, changes, message):
    """make repro runs check before dvc repro, which would delete a model's train.json and learning curve before
    its training refused the block (tests/test_dvc_runs.py shows it end to end): with tune.trials 0, the default,
    check builds every model's config and what the params tell of its vocabularies."""
    params = merge(yaml.safe_load((ROOT / "params.yaml").read_text()), changes)
    assert params["tune"]["trials"] == 0
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"nmtbench check: error: {message}") and error.count("\n") == 1

