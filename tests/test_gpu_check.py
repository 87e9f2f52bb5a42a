"""tools/gpu_check.sh: a part that cannot run, fails or outlasts its limit still leaves its line in summary.txt and
what it had in OUT, so a call on the GPU machine returns something whatever happens."""
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def gpu_check(tmp_path: Path, *parts: str, **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(ROOT / "tools" / "gpu_check.sh"), *parts], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OUT": str(out), "GPU_CHECK_WORK": str(tmp_path / "work"),
                                            **env})
    return done, out


def test_without_the_carried_folder_setup_fails_and_nothing_after_it_runs(tmp_path):
    done, out = gpu_check(tmp_path, "setup", "tests", GPU_BUNDLE=str(tmp_path / "missing"))
    summary = (out / "summary.txt").read_text()
    assert done.returncode == 1
    assert "setup: FAILED" in summary and "no carried folder" in summary and "nothing else can run" in summary
    assert "tests:" not in summary and sorted(p.name for p in out.iterdir()) == ["setup.tar.gz", "summary.txt"]


def test_a_part_without_time_left_is_not_started(tmp_path):
    done, out = gpu_check(tmp_path, "grid", GPU_CHECK_SECONDS="40")
    assert done.returncode == 0
    assert re.search(r"grid: not run, 2\d s left", (out / "summary.txt").read_text())  # 40 s less 15 to pack
    assert not (out / "grid.tar.gz").exists()


@pytest.mark.slow
def test_more_without_a_grid_on_this_machine_says_so_and_one_after_it_packs_the_grid(tmp_path):
    done, out = gpu_check(tmp_path, "more", GPU_CHECK_SECONDS="100")
    assert done.returncode == 0 and "more: not run, no grid part ran on this machine before" in (
        out / "summary.txt").read_text()
    (tmp_path / "work" / "grid" / "metrics").mkdir(parents=True)  # as the grid part of an earlier call left it
    (tmp_path / "work" / "grid" / "part.log").write_text("the grid part's log\n")
    stand_in = tmp_path / "python"
    stand_in.write_text("#!/bin/sh\necho \"more: $*\"\n")
    stand_in.chmod(0o755)
    done, out = gpu_check(tmp_path, "more", GPU_CHECK_SECONDS="100", PYTHON=str(stand_in))
    assert "more: passed" in (out / "summary.txt").read_text()
    with tarfile.open(out / "grid.tar.gz") as packed:  # the grid's folder and log, the earlier call's lines kept
        log = packed.extractfile("grid/part.log").read().decode().splitlines()
    assert log[0] == "the grid part's log"
    assert log[1].startswith(f"more: -m nmtbench gpu timed-grid-more {tmp_path}/work/grid")


def test_the_grid_part_trains_the_models_and_seeds_named(tmp_path):
    stand_in = tmp_path / "python"
    stand_in.write_text("#!/bin/sh\necho \"grid: $*\"\n")
    stand_in.chmod(0o755)
    done, out = gpu_check(tmp_path, "grid", GPU_CHECK_SECONDS="100", PYTHON=str(stand_in),
                          GPU_GRID_MODELS="transformer lstm", GPU_GRID_SEEDS="42 43 44",
                          GPU_GRID_SET="train.early_stopping_patience=6 train.max_epochs=200")
    assert "grid: passed" in (out / "summary.txt").read_text()
    with tarfile.open(out / "grid.tar.gz") as packed:
        said = packed.extractfile("grid/part.log").read().decode()
    assert said.split("--jobs 9 ")[1].splitlines()[0] == (
        "--models transformer lstm --set seeds=[42,43,44] --set beam_sweep.seed=42 "
        "--set train.early_stopping_patience=6 --set train.max_epochs=200")


def test_a_part_past_its_limit_is_cut_and_what_it_wrote_comes_back(tmp_path):
    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\necho 'started, then hanging'\nsleep 300\n")
    hanging.chmod(0o755)
    done, out = gpu_check(tmp_path, "probe", "grid", PYTHON=str(hanging), GPU_PROBE_SECONDS="31",
                          GPU_CHECK_SECONDS="70")
    summary = (out / "summary.txt").read_text()
    assert "probe: CUT at its limit of 31 s" in summary and "grid: not run" in summary
    with tarfile.open(out / "probe.tar.gz") as packed:
        log = packed.extractfile("probe/part.log").read().decode()
    assert "started, then hanging" in log


def test_each_call_of_the_plan_runs_its_parts_and_a_wrong_call_or_part_is_refused(tmp_path):
    done, out = gpu_check(tmp_path, GPU_CALL="2", GPU_CHECK_SECONDS="40")
    summary = (out / "summary.txt").read_text()
    assert done.returncode == 0 and "parts setup more; GPU, 40 s in all" in summary
    assert re.search(r"setup: not run, 2\d s left\nmore: not run", summary)
    done, out = gpu_check(tmp_path, GPU_CALL="3")
    assert done.returncode == 2 and done.stderr == "gpu_check: GPU_CALL=3: expected 1 (setup tests grid) or 2 " \
                                                   "(setup more)\n"
    done, _ = gpu_check(tmp_path / "misspelt", "setup", "gird")
    assert done.returncode == 2 and done.stderr == "gpu_check: no part 'gird': expected setup, tests, grid, " \
                                                   "more, published or probe\n"
    assert not (tmp_path / "misspelt").exists()  # refused before anything is written


def test_the_gpu_tests_run_each_under_a_timeout_and_their_failures_come_back(tmp_path):
    """pytest (a stand-in here) gets a per-test timeout and writes the failures' tracebacks; the summary names the
    failed test and the part's tarball holds its traceback."""
    python = tmp_path / "python"
    python.write_text(f"""#!/bin/sh
[ "$1" = -c ] && exit 0  # pytest-timeout is installed
echo "$@" >{tmp_path / "pytest-arguments"}
echo "$NMTBENCH_TEST_FAILURES" >{tmp_path / "failures-file"}
echo "____ test_ddp_on_one_gpu ____"
echo "E   Failed: Timeout (>45.0s) from pytest-timeout."
echo "FAILED tests/test_gpu.py::test_ddp_on_one_gpu - Failed: Timeout (>45.0s) from pytest-timeout."
echo "1 failed, 18 passed in 80.1s"
exit 1
""")
    python.chmod(0o755)
    done, out = gpu_check(tmp_path, "tests", PYTHON=str(python))
    arguments = (tmp_path / "pytest-arguments").read_text().split()
    assert arguments[:4] == ["-m", "pytest", "-m", "gpu"]
    assert {"-rfE", "--tb=short", "faulthandler_timeout=55"} <= set(arguments)
    assert arguments[arguments.index("--timeout") + 1] == "45" and "tests/test_gpu.py" in arguments
    # each failure's traceback as it happens (tests/conftest.py), into the part's folder that is packed
    assert (tmp_path / "failures-file").read_text().strip().endswith("tests/failures.txt")
    summary = (out / "summary.txt").read_text()
    assert "tests: FAILED, exit 1" in summary
    assert "    FAILED tests/test_gpu.py::test_ddp_on_one_gpu - Failed: Timeout (>45.0s)" in summary
    with tarfile.open(out / "tests.tar.gz") as packed:
        assert "E   Failed: Timeout (>45.0s)" in packed.extractfile("tests/part.log").read().decode()


def wheel(folder: Path, name: str, version: str, module: str | None = None) -> Path:
    """A pure-Python wheel of name, holding module.py when given."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    if module:
        files[f"{module}.py"] = "CARRIED = True\n"
    with zipfile.ZipFile(path, "w") as packed:
        for inside, text in files.items():
            packed.writestr(inside, text)
        packed.writestr(f"{info}/RECORD", "".join(f"{inside},,\n" for inside in [*files, f"{info}/RECORD"]))
    return path


@pytest.mark.slow
def test_where_the_machines_packages_are_read_only_setup_installs_beside_them_and_the_runs_see_it(tmp_path):
    """pip install --target into the work folder, on PYTHONPATH after the checkout's src: the carried package the
    machine lacks and the project's metadata are found there, the machine's own packages stay as they are."""
    bundle = tmp_path / "bundle"
    (bundle / "wheels").mkdir(parents=True)
    wheel(bundle / "wheels", "gpucheck_carried", "0.1", module="gpucheck_carried")
    wheel(bundle / "wheels", "nmtbench", "0.0.1")
    (bundle / "requirements.txt").write_text("gpucheck_carried==0.1\n")
    (bundle / "COMMIT").write_text('{"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": false}\n')
    site = tmp_path / "site"
    done, out = gpu_check(tmp_path, "setup", PYTHON=sys.executable, GPU_BUNDLE=str(bundle), GPU_CHECK_CPU="1",
                          GPU_PIP_TARGET=str(site), PIP_CONFIG_FILE=os.devnull)
    summary = (out / "summary.txt").read_text()
    assert done.returncode == 0, summary
    assert (site / "gpucheck_carried.py").is_file() and (site / "nmtbench-0.0.1.dist-info").is_dir()
    assert f"carried, as imported: gpucheck_carried 0.1 from {site}\n" in summary  # through PYTHONPATH
    assert f"nmtbench code from {ROOT / 'src' / 'nmtbench'}" in summary  # the checkout's code still first
    assert importlib.metadata.version("nmtbench") != "0.0.1"  # this environment untouched


def test_a_failures_traceback_is_written_as_it_happens_for_a_part_cut_short(tmp_path, monkeypatch):
    """The first GPU run's tests part was cut at its limit before pytest printed its one failure."""
    from conftest import pytest_runtest_logreport

    failures = tmp_path / "failures.txt"
    report = SimpleNamespace(nodeid="tests/test_x.py::test_y", when="call", longreprtext="E   assert 1 == 2")
    pytest_runtest_logreport(SimpleNamespace(**vars(report), failed=True))  # unset: nothing written
    assert not failures.exists()
    monkeypatch.setenv("NMTBENCH_TEST_FAILURES", str(failures))
    pytest_runtest_logreport(SimpleNamespace(**vars(report), failed=False))
    pytest_runtest_logreport(SimpleNamespace(**vars(report), failed=True))
    assert failures.read_text() == "FAILED tests/test_x.py::test_y (call)\nE   assert 1 == 2\n\n"
