import importlib.metadata
import json
import re
import subprocess
import sys
import time

import pytest

from nmtbench.cli import main
from nmtbench.provenance import COMMIT_FILE, code_text, cpu_features, cpu_model, git_state, stamp, versions

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]


def test_git_state_outside_a_checkout_and_before_the_first_commit(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "dirty": None}  # pytest's folders are in no repository
    subprocess.run([*GIT, "init", "-q"], cwd=tmp_path, check=True)
    assert git_state(tmp_path) == {"commit": None, "dirty": None}  # a workspace without commits


def test_git_state_is_the_commit_and_whether_tracked_files_changed(tmp_path):
    subprocess.run([*GIT, "init", "-q"], cwd=tmp_path, check=True)
    for name in ("params.yaml", "dvc.lock"):
        (tmp_path / name).write_text("a\n")
    (tmp_path / "src").mkdir()
    subprocess.run([*GIT, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*GIT, "commit", "-qm", "one"], cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_state(tmp_path / "src") == {"commit": head, "dirty": False}  # any folder of the checkout
    (tmp_path / "dvc.lock").write_text("b\n")  # dvc repro rewrites it: not a change to the code or params
    (tmp_path / "new.py").write_text("")  # untracked, as git describe --dirty counts
    assert git_state(tmp_path / "src") == {"commit": head, "dirty": False}
    (tmp_path / "params.yaml").write_text("b\n")
    assert git_state(tmp_path / "src") == {"commit": head, "dirty": True}


def committed_checkout(folder):
    subprocess.run([*GIT, "init", "-q"], cwd=folder, check=True)
    (folder / "params.yaml").write_text("a\n")
    subprocess.run([*GIT, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*GIT, "commit", "-qm", "one"], cwd=folder, check=True)
    (folder / "params.yaml").write_text("b\n")  # a change not yet committed
    return git_state(folder)


@pytest.mark.parametrize("without", ["git", ".git"])
def test_without_git_the_state_recorded_in_the_checkout_names_the_commit(tmp_path, monkeypatch, without):
    """A GPU machine gets the code without its .git, maybe without git: every stamp still names the commit."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    recorded = committed_checkout(checkout)
    assert re.fullmatch(r"[0-9a-f]{40}", recorded["commit"]) and recorded["dirty"] is True
    (tmp_path / "COMMIT").write_text(json.dumps(recorded))  # what tools/gpu_bundle.py carries
    if without == "git":
        monkeypatch.setenv("PATH", str(tmp_path / "no-programs"))
    else:
        monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-repository"))
    assert git_state(checkout) == {"commit": None, "dirty": None}  # nothing recorded: unknown, as before
    monkeypatch.setenv(COMMIT_FILE, str(tmp_path / "COMMIT"))
    assert git_state(checkout) == recorded and stamp(time.perf_counter())["git"] == recorded


def test_the_recorded_state_wins_over_a_copied_trees_stale_checkout(tmp_path, monkeypatch):
    """A tree copied to a GPU machine can carry the .git of an older commit: the carried COMMIT names the code."""
    stale = committed_checkout(tmp_path)
    carried = {"commit": "0" * 40, "dirty": False}
    (tmp_path / "COMMIT").write_text(json.dumps(carried))
    assert git_state(tmp_path) == stale
    monkeypatch.setenv(COMMIT_FILE, str(tmp_path / "COMMIT"))
    assert git_state(tmp_path) == carried


@pytest.mark.parametrize("text", ["", '{"commit": null, "dirty": false}', '{"commit": "abc", "dirty": false}',
                                  '{"dirty": false}', None])
def test_a_recorded_state_that_names_no_commit_is_refused_in_one_line(tmp_path, monkeypatch, text):
    if text is not None:
        (tmp_path / "COMMIT").write_text(text)
    monkeypatch.setenv(COMMIT_FILE, str(tmp_path / "COMMIT"))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-repository"))
    with pytest.raises(ValueError, match=r"^NMTBENCH_COMMIT_FILE=.*COMMIT: not a record of the commit .*make "
                                         r"gpu-commit[^\n]*$"):
        git_state(tmp_path)


def test_code_text():
    assert code_text({"commit": "0123456789abcdef", "dirty": True}) == "commit 0123456789, with uncommitted changes"
    assert code_text({"commit": "0123456789abcdef", "dirty": False}) == "commit 0123456789"
    assert code_text({"commit": None, "dirty": None}) == "commit unknown (not in a git checkout with a commit)"


def test_cpu_model_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n")
    assert cpu_model(cpuinfo) == "AMD EPYC 7B13 64-Core Processor"
    assert cpu_model(tmp_path / "absent") != ""  # another system: platform's name for it


def test_cpu_features_name_the_instruction_sets_that_tell_two_cpus_of_one_model_apart(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_bf16 avx512_vnni\n")
    assert cpu_features(cpuinfo) == ["avx2", "avx512f", "avx512_bf16"]
    cpuinfo.write_text("model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 fma\n")
    assert cpu_features(cpuinfo) == ["avx2"]
    assert cpu_features(tmp_path / "absent") == []


def test_versions_of_installed_and_absent_packages():
    assert versions(["sacrebleu", "no-such-distribution"]) == {
        "sacrebleu": importlib.metadata.version("sacrebleu"), "no-such-distribution": None}


def test_a_stamp_holds_code_software_machine_and_wall_time():
    started = time.perf_counter() - 1.5  # a stage that began 1.5 s ago
    found = stamp(started)
    assert set(found) == {"git", "python", "packages", "device", "wall_seconds", "finished"}
    assert 1.5 <= found["wall_seconds"] < 60
    assert {"torch", "lightning", "dvc", "sacrebleu", "sentencepiece"} <= set(found["packages"])
    assert set(found["device"]) == {"cpu", "cpu_features", "cores", "memory_gib", "gpus", "torch_threads",
                                   "platform"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", found["finished"])


@pytest.mark.parametrize("imports", ["", "import torch"])
def test_a_stamp_records_torchs_view_only_where_the_stage_runs_torch(imports):
    """The comparison imports no torch; its stamp must not import it either, only to count torch's threads."""
    code = (f"{imports}\nimport json, sys, time\nfrom nmtbench.provenance import stamp\n"
            "device = stamp(time.perf_counter())['device']\n"
            "print(json.dumps([device['gpus'], device['torch_threads'], 'torch' in sys.modules]))")
    gpus, threads, loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                      check=True).stdout)
    if imports:
        assert isinstance(gpus, list) and threads >= 1 and loaded
    else:
        assert (gpus, threads, loaded) == (None, None, False)


def test_version_option_prints_the_version_and_the_commit(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert re.fullmatch(r"nmtbench \S+ \(commit ([0-9a-f]{10}(, with uncommitted changes)?|unknown \(.*\))\)\n",
                        capsys.readouterr().out)
