"""Profiles merged onto params.yaml in order, a later one winning, and nmtbench workspace: a folder that behaves like
the project. It holds params.yaml merged with its profiles in order, the project's .gitignore and a Makefile with the
pipeline's make targets, and the README's workspace instructions run there as written."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.project import ROOT, pipeline_env
from nmtbench.cli import main
from nmtbench.config import parse_params
from nmtbench.files import read_yaml
from nmtbench.models.registry import build_model
from nmtbench.models.vocabulary import Vocab
from nmtbench.param_blocks import ConfigError
from nmtbench.profiles import apply_profile, merge, merged_params

PIPELINE_TARGETS = ["help", "setup", "repro", "converge", "tune", "report", "exp", "exp-show", "claims"]
# what a run leaves in a workspace besides what DVC tracks: none of it is ever committed
RUN_FILES = ["wandb/offline-run-20261124_101010-abc/run-abc.wandb", "models/transformer/seed42/best.ckpt",
             "metrics/transformer/seed42/eval.json", "results/report.html", "lightning_logs/version_0/hparams.yaml",
             "runs/inner/params.yaml", "data/raw/train.en.gz", "tuning/transformer/study.db"]


def test_merge_is_deep_and_leaves_its_inputs_alone():
    base = {"a": {"b": 1, "c": 2}, "d": [1]}
    assert merge(base, {"a": {"c": 3}, "d": [2]}) == {"a": {"b": 1, "c": 3}, "d": [2]}
    assert base == {"a": {"b": 1, "c": 2}, "d": [1]}


def test_apply_profile_replaces_only_the_named_blocks():
    base = {"models": {"a": {"x": 1}}, "train": {"lr": 1, "steps": 2}}
    assert apply_profile(base, {"replace": ["models"], "models": {"b": {}}, "train": {"lr": 3}}) == {
        "models": {"b": {}}, "train": {"lr": 3, "steps": 2}}
    with pytest.raises(ConfigError, match=r"^replace: expected a list of params blocks .* got \['modles'\]"):
        apply_profile(base, {"replace": ["modles"]})


def test_profiles_apply_in_order_a_later_one_winning():
    base = {"data": {"source": {"kind": "multi30k"}, "max_train_pairs": None, "max_length": 80},
            "models": {"a": {"x": 1}, "b": {"x": 1}}}
    corpus = {"data": {"source": {"kind": "files", "path": "/c"}, "max_train_pairs": None},
              "replace": ["models"], "models": {"a": {"x": 2}}}
    smoke = {"data": {"max_train_pairs": 400}, "models": {"a": {"x": 3}}}
    assert apply_profile(base, corpus, smoke) == {
        "data": {"source": {"kind": "files", "path": "/c"}, "max_train_pairs": 400, "max_length": 80},
        "models": {"a": {"x": 3}}}
    assert apply_profile(base, smoke, corpus) == {
        "data": {"source": {"kind": "files", "path": "/c"}, "max_train_pairs": None, "max_length": 80},
        "models": {"a": {"x": 2}}}
    assert apply_profile(base) == base


def test_a_size_for_a_model_the_grid_no_longer_has_is_left_out_and_a_second_family_is_refused():
    base = {"models": {"a": {"family": "rnn", "x": 1}}}
    recipe = {"replace": ["models"], "models": {"b": {"family": "transformer", "x": 2}}}
    sizes = {"models": {"a": {"x": 3}, "b": {"x": 4}}}  # smoke.yaml's way: a size for each model of any recipe
    assert apply_profile(base, recipe, sizes) == {"models": {"b": {"family": "transformer", "x": 4}}}
    assert apply_profile(base, sizes) == {"models": {"a": {"family": "rnn", "x": 3}}}
    assert apply_profile(base, {"models": {"a": {"family": "rnn", "x": 5}}}) == {"models": {"a": {"family": "rnn",
                                                                                                  "x": 5}}}
    names = ["params.yaml", "one.yaml", "two.yaml"]
    with pytest.raises(ConfigError, match=r"^models\.b: two\.yaml makes it a rnn, one\.yaml a transformer; rename "
                                          r"the model in one file, or replace the grid in two\.yaml with "
                                          r"`replace: \[models\]`$"):
        apply_profile(base, recipe, {"models": {"b": {"family": "rnn", "x": 4}}}, names=names)
    with pytest.raises(ConfigError, match=r"^models\.a: one\.yaml makes it a cnn, params\.yaml a rnn;"):
        apply_profile(base, {"models": {"a": {"family": "cnn"}}}, names=names[:2])


def test_a_misspelt_model_name_in_a_sizing_block_is_refused_but_a_size_for_another_recipes_model_is_not(tmp_path,
                                                                                                      capsys):
    """#69: `models: {transfomer: {d_model: 32}}` was left out without a word and the model trained at full size; a
    name of the project's own files (smoke.yaml's size of a model another recipe has) still sizes nothing."""
    typo = tmp_path / "typo.yaml"
    typo.write_text("models:\n  transfomer: {d_model: 32}\n")
    argv = ["--params", str(ROOT / "params.yaml"), "workspace", str(tmp_path / "ws"), "--profile", str(typo)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nmtbench workspace: error: models.transfomer: {typo} sizes a model the grid does not "
                          "have; did you mean transformer? (the grid: ") and err.endswith(
        "); fix the name, or give the block a family to add a model\n")
    assert not (tmp_path / "ws").exists()
    known = apply_profile({"models": {"transformer": {"family": "transformer"}}},
                          {"models": {"transformer_tiny": {"d_model": 32}}}, known=frozenset({"transformer_tiny"}))
    assert known == {"models": {"transformer": {"family": "transformer"}}}


def test_a_profile_that_gives_a_hybrids_half_another_family_is_refused_as_a_second_family():
    """Merged, the new family's half was refused the keys of the old one that params.yaml set (cell, attention)."""
    base = {"models": {"h": {"family": "hybrid", "encoder": {"family": "transformer", "layers": 3},
                             "decoder": {"family": "rnn", "cell": "lstm"}}}}
    names = ["params.yaml", "one.yaml", "two.yaml"]
    with pytest.raises(ConfigError) as error:
        apply_profile(base, {"models": {"h": {"decoder": {"family": "cnn", "kernel": 3}}}}, names=names[:2])
    assert str(error.value) == ("models.h.decoder: one.yaml makes it a cnn, params.yaml a rnn; rename the model in "
                                "one file, or replace the grid in one.yaml with `replace: [models]`")
    recipe = {"replace": ["models"], "models": {"h": {"family": "hybrid", "encoder": {"family": "cnn"},
                                                      "decoder": {"family": "rnn"}}}}
    with pytest.raises(ConfigError, match=r"^models\.h\.encoder: two\.yaml makes it a transformer, one\.yaml a cnn;"):
        apply_profile(base, recipe, {"models": {"h": {"encoder": {"family": "transformer"}}}}, names=names)
    sizes = {"models": {"h": {"encoder": {"layers": 1}, "decoder": {"family": "rnn", "layers": 1}}}}  # same families
    assert apply_profile(base, sizes)["models"]["h"] == {"family": "hybrid", "encoder": {"family": "transformer",
                                                                                        "layers": 1},
                                                         "decoder": {"family": "rnn", "cell": "lstm", "layers": 1}}



def make(folder: Path, *args: str) -> str:
    done = subprocess.run(["make", "--no-print-directory", *args], cwd=folder, capture_output=True, text=True,
                          env=pipeline_env(), check=True)
    return done.stdout


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A workspace of the project: the own-corpus profile, then the smoke sizes."""
    folder = tmp_path_factory.mktemp("workspaces") / "mine"
    argv = ["--params", str(ROOT / "params.yaml"), "workspace", str(folder),
            "--profile", str(ROOT / "profiles/own_corpus.yaml"), "--profile", str(ROOT / "profiles/smoke.yaml")]
    assert main(argv) == 0
    return folder


def test_profiles_merge_in_order_and_the_header_names_them(workspace):
    text = (workspace / "params.yaml").read_text()
    params = yaml.safe_load(text)
    assert text.splitlines()[0] == ("# generated from params.yaml + own_corpus.yaml + smoke.yaml; "
                                    "edit those, not this file")
    data = params["data"]
    assert (data["source"], data["src_lang"], data["tgt_lang"], data["eval_splits"]) == (
        {"kind": "files", "path": "/data/my-corpus", "name": None, "config": None, "revision": None, "splits": {}},
        "en", "fr", ["mytest"])  # own_corpus.yaml's
    # own_corpus.yaml sets max_train_pairs null, smoke.yaml, applied after it, 400
    assert (data["max_train_pairs"], data["max_eval_pairs"], data["max_length"]) == (400, 40, 80)
    assert (params["tokenize"]["vocab_size"], params["models"]["rnn"]) == (500, {
        "family": "rnn", "cell": "rnn", "bidirectional": True, "layers": 1, "embed_dim": 32, "hidden_dim": 32,
        "attention": "none", "input_feeding": True, "dropout": 0.2})
    log = subprocess.run(["git", "log", "--format=%s"], cwd=workspace, capture_output=True, text=True, check=True)
    assert log.stdout == "profile own_corpus + smoke\n"


def test_the_workspace_has_the_pipeline_make_targets(workspace):
    assert [line.split()[1] for line in make(workspace, "help").splitlines()] == PIPELINE_TARGETS
    report = make(workspace, "-n", "report").splitlines()
    assert report[-1] == "dvc repro --force --single-item compare report"
    assert f"{ROOT}/.venv" in report[0]  # the project's .venv, set up or checked first


def test_git_ignores_what_runs_leave_in_the_workspace(workspace):
    assert (workspace / ".gitignore").read_text() == (ROOT / ".gitignore").read_text()
    for name in RUN_FILES:
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("x")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=workspace,
                            capture_output=True, text=True, check=True)
    assert status.stdout == ""  # the Makefile and .gitignore themselves are in the first commit


def readme_workspace_commands() -> str:
    """The README's workspace instructions: the code block of its paragraph 'Run a profile in a workspace'."""
    section = (ROOT / "README.md").read_text().split("**Run a profile in a workspace of its own.**", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.DOTALL)[1]


def copy_project(folder: Path) -> Path:
    """A copy of the project's pipeline, params and profiles in folder, without its outputs or .venv."""
    for name in ("Makefile", "tools", "params.yaml", "dvc.yaml", "plots", "systems", "profiles", ".gitignore",
                 "pyproject.toml"):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copyfile
        copy(ROOT / name, folder / name)
    return folder


def test_the_readme_workspace_instructions_run_as_written(tmp_path):
    """In a copy of the project with a .venv: the workspace is made, and make in it runs the pipeline (dry run:
    make -n, training nothing)."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "nmtbench").is_file():
        pytest.skip("the README runs .venv/bin/nmtbench: run the tests from the project's .venv")
    copy_project(tmp_path)
    (tmp_path / ".venv").symlink_to(venv)
    dry_run = "make() { command make --no-print-directory --dry-run \"$@\"; }\n"
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", dry_run + readme_workspace_commands()], cwd=tmp_path,
                          capture_output=True, text=True, env=pipeline_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["nmtbench check", "nmtbench warm -- dvc repro"]  # make repro
    workspace = tmp_path / "runs" / "mine"
    assert f"NMTBENCH_PROJECT ?= {tmp_path}" in (workspace / "Makefile").read_text().splitlines()
    assert [line.split()[1] for line in make(workspace, "help").splitlines()] == PIPELINE_TARGETS
    assert make(workspace, "-n", "report").splitlines()[-1] == "dvc repro --force --single-item compare report"
    converge = {(): "nmtbench converge",
                ("JOBS=2", "THREADS=1", "MODELS=rnn"): "nmtbench converge rnn --jobs 2 --threads 1",
                ("JOBS=2", "FROM=../done"): "nmtbench converge --jobs 2 --from ../done",
                ("PLOT=a.png",): "nmtbench converge --plot a.png",
                ("PLOT=a.png", "FROM=../done"): "nmtbench converge --plot a.png --from ../done",
                ("PAGE=p.md", "JOBS=2", "FROM=../done"): "nmtbench converge --page p.md --jobs 2 --from ../done",
                ("COMPARE=so-far", "BASELINE=rnn"): "nmtbench converge --compare so-far --baseline rnn"}
    for variables, command in converge.items():
        assert " ".join(make(workspace, "-n", "converge", *variables).splitlines()[-1].split()) == command


def makefiles(folder: Path) -> str:
    """The makefiles make reads in folder, as it found them: one found through make's search path of include
    folders (/usr/include and the like) would show under that folder."""
    return make(folder, "--eval", "makefiles: ; @echo $(MAKEFILE_LIST)", "makefiles")


@pytest.mark.parametrize("place", ["one/two/three/mine", "mine"])
def test_a_copied_or_moved_workspace_still_finds_its_project(workspace, tmp_path, place):
    """The include names the project by its absolute path: a workspace copied deeper, or into another folder
    tree, reads the project's pipeline.mk itself, not one make happened to find on its search path."""
    copy = tmp_path / place
    shutil.copytree(workspace, copy, symlinks=True)
    assert makefiles(copy) == f"Makefile {ROOT}/tools/pipeline.mk\n"
    assert [line.split()[1] for line in make(copy, "help").splitlines()] == PIPELINE_TARGETS


def workspace_argv(project: Path, folder: Path, *options: str) -> list[str]:
    return ["--params", str(project / "params.yaml"), "workspace", str(folder),
            "--profile", str(project / "profiles/smoke.yaml"), *options]


def test_a_workspace_whose_project_moved_says_so_in_one_line_with_the_fix(tmp_path, capsys):
    (tmp_path / "checkout").mkdir()
    project, workspace = copy_project(tmp_path / "checkout"), tmp_path / "runs" / "mine"
    assert main(workspace_argv(project, workspace)) == 0
    moved = project.rename(tmp_path / "moved")
    done = subprocess.run(["make", "--no-print-directory", "help"], cwd=workspace, capture_output=True, text=True,
                          env=pipeline_env())
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"Makefile:6: *** no nmtbench project at {project}, which this workspace runs with; from "
                           f"the project's folder run .venv/bin/nmtbench workspace {workspace} --profile "
                           "profiles/smoke.yaml, or name it: make NMTBENCH_PROJECT=<folder>.  Stop.\n")
    assert [line.split()[1] for line in make(workspace, f"NMTBENCH_PROJECT={moved}", "help").splitlines()] == \
        PIPELINE_TARGETS
    capsys.readouterr()
    assert main(workspace_argv(moved, workspace)) == 0  # the other fix: the Makefile, unchanged since, is refreshed
    assert capsys.readouterr().err == ""
    assert makefiles(workspace) == f"Makefile {moved}/tools/pipeline.mk\n"


def test_a_refresh_rewrites_what_nobody_changed_and_refuses_a_hand_edit(tmp_path, capsys):
    workspace = tmp_path / "mine"
    assert main(workspace_argv(ROOT, workspace)) == 0
    written = (workspace / "params.yaml").read_text()
    assert main(workspace_argv(ROOT, workspace)) == 0  # unchanged since written: refreshed silently
    capsys.readouterr()
    edited = written.replace("lr: ", "lr: 0.5 # ", 1)
    (workspace / "params.yaml").write_text(edited)
    assert main(workspace_argv(ROOT, workspace)) == 2
    assert capsys.readouterr().err == (f"nmtbench workspace: error: {workspace}: params.yaml not written by nmtbench "
                                       "workspace, or edited since; keep your changes in a profile, or rerun with "
                                       "--force to replace them, each kept as <file>.bak-<time>\n")
    assert (workspace / "params.yaml").read_text() == edited
    assert main(workspace_argv(ROOT, workspace, "--force")) == 0
    [kept] = workspace.glob("params.yaml.bak-*")
    assert re.fullmatch(r"params\.yaml\.bak-\d{8}-\d{6}", kept.name)
    assert capsys.readouterr().err == (f"nmtbench workspace: replacing {workspace / 'params.yaml'}; the old one is "
                                       f"kept as {kept}\n")
    assert (kept.read_text(), (workspace / "params.yaml").read_text()) == (edited, written)
    assert main(workspace_argv(ROOT, workspace)) == 0  # what --force wrote is the workspace's own again
    assert capsys.readouterr().err == ""


def test_a_folder_holding_the_users_own_makefile_and_params_is_refused_untouched(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "Makefile").write_text("all:\n\techo mine\n")
    (folder / "params.yaml").write_text("train: {lr: 0.1}\n")
    assert main(workspace_argv(ROOT, folder)) == 2
    assert capsys.readouterr().err.startswith(f"nmtbench workspace: error: {folder}: Makefile, params.yaml not "
                                              "written by nmtbench workspace, or edited since;")
    assert sorted(path.name for path in folder.iterdir()) == ["Makefile", "params.yaml"]
    assert (folder / "Makefile").read_text() == "all:\n\techo mine\n"


def test_the_project_itself_is_refused_as_the_target(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(copy_project(tmp_path))
    before = Path("params.yaml").read_text()
    assert main(["workspace", ".", "--profile", "profiles/smoke.yaml"]) == 2
    assert capsys.readouterr().err == ("nmtbench workspace: error: .: is the project itself; make the workspace "
                                       "another folder, e.g. nmtbench workspace runs/mine --profile "
                                       "profiles/smoke.yaml\n")
    assert Path("params.yaml").read_text() == before and not Path(".nmtbench-workspace.json").exists()


def test_the_params_are_written_without_yaml_anchors(workspace):
    """Every family's block written out in full: with an anchor and its aliases, editing one family's tuning
    range would edit them all."""
    text = (workspace / "params.yaml").read_text()
    assert [event for event in yaml.parse(text) if getattr(event, "anchor", None)] == []  # an anchor, or an alias
    profiles = [ROOT / "profiles/own_corpus.yaml", ROOT / "profiles/smoke.yaml"]
    assert yaml.safe_load(text) == merged_params(ROOT, profiles)


SHIPPED_PROFILES = sorted(path.name for path in (ROOT / "profiles").glob("*.yaml"))


@pytest.mark.parametrize("profile", SHIPPED_PROFILES)
def test_every_shipped_profile_runs_at_smoke_size_after_it(profile):
    """The smoke sizes go with every recipe, a grid-replacing one included (published.yaml, wmt14_ende.yaml): every
    model the profile trains is sized by smoke.yaml and validates, and smoke.yaml's sizes for models the profile
    replaced away are left out instead of becoming blocks without a family."""
    smoke = ROOT / "profiles" / "smoke.yaml"
    merged = merged_params(ROOT, [ROOT / "profiles" / profile, smoke])  # validates every model block
    alone = parse_params(apply_profile(read_yaml(ROOT / "params.yaml"), read_yaml(ROOT / "profiles" / profile)))
    assert list(merged["models"]) == list(alone.models)  # smoke.yaml adds no model and drops none
    assert set(merged["models"]) <= set(read_yaml(smoke)["models"])
    vocab = Vocab.of(read_yaml(smoke)["tokenize"]["vocab_size"])
    for name, block in parse_params(merged).models.items():
        assert build_model(name, block, vocab).num_parameters() < 100_000, name  # smoke size, not the recipe's


@pytest.mark.parametrize("profile", ["converge_cpu.yaml", "gpu.yaml"])
def test_the_grid_recipes_give_every_model_the_same_dropout(profile):
    """converge_cpu and gpu regularise the whole grid alike; a model added to params.yaml but not to them would
    train with its own dropout, and every contrast it enters would mix two recipes."""
    merged = merged_params(ROOT, [ROOT / "profiles" / profile])
    assert list(merged["models"]) == list(read_yaml(ROOT / "params.yaml")["models"])
    assert {name: block["dropout"] for name, block in merged["models"].items()} == dict.fromkeys(merged["models"], 0.3)


def test_two_profiles_giving_one_model_two_families_are_refused_naming_both(tmp_path, capsys):
    first, second = tmp_path / "one.yaml", tmp_path / "two.yaml"
    first.write_text("replace: [models]\nmodels:\n  mine: {family: transformer, d_model: 32, heads: 2}\n")
    second.write_text("models:\n  mine: {family: rnn, hidden_dim: 32}\n")
    argv = ["--params", str(ROOT / "params.yaml"), "workspace", str(tmp_path / "ws"),
            "--profile", str(first), "--profile", str(second)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (f"nmtbench workspace: error: models.mine: {second} makes it a rnn, {first} a "
                                       f"transformer; rename the model in one file, or replace the grid in {second} "
                                       "with `replace: [models]`\n")
    assert not (tmp_path / "ws").exists()
