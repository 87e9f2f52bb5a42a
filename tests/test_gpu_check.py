"""tools/gpu_check.sh: a part that cannot run, fails or outlasts its limit still leaves its line in summary.txt and
what it had in OUT, so a call on the GPU machine returns something whatever happens."""
import os
import re
import subprocess
import tarfile
from pathlib import Path

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
