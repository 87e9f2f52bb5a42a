"""The command line: every command and option says what it is for, and options may come before or after
the command."""
import argparse
import shutil

import pytest

from helpers.project import ROOT
from nmtbench.cli import build_parser, main


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
    assert capsys.readouterr().out == "mine.yaml: valid (14 models x 1 seeds)\n"


def test_the_default_params_file_stays_the_default(tmp_path, monkeypatch, capsys):
    shutil.copyfile(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 0
    assert capsys.readouterr().out == "params.yaml: valid (14 models x 1 seeds)\n"
