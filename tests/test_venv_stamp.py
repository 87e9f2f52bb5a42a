"""tools/venv_stamp.py: make reinstalls .venv when pyproject.toml's dependencies change, never because the
file is newer (a fresh clone's pyproject.toml is newer than the .venv it reuses)."""
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("venv_stamp", ROOT / "tools" / "venv_stamp.py")
venv_stamp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(venv_stamp)


@pytest.fixture
def installed(tmp_path):
    """(venv, pyproject): a copy of the project's pyproject.toml and a .venv stamped as installed from it."""
    pyproject, venv = tmp_path / "pyproject.toml", tmp_path / ".venv"
    shutil.copyfile(ROOT / "pyproject.toml", pyproject)
    venv.mkdir()
    assert venv_stamp.main(["write", str(venv), str(pyproject)]) == 0
    return venv, pyproject


def edit(path: Path, old: str, new: str):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_newer_pyproject_reinstalls_nothing(installed):
    venv, pyproject = installed
    later = (venv / ".installed").stat().st_mtime + 3600
    os.utime(pyproject, (later, later))
    assert venv_stamp.stale(venv, pyproject) is None
    assert venv_stamp.main(["check", str(venv), str(pyproject)]) == 0


@pytest.mark.parametrize("old, new", [
    ("line-length = 120", "line-length = 100"),                       # another tool's settings
    ('    "tqdm==4.70.1",', '\n    # a comment\n    "tqdm==4.70.1",'),  # a comment line and a blank line
    ('    "tqdm==4.70.1",', '        "tqdm==4.70.1",'),              # indentation
])
def test_edits_pip_does_not_read_reinstall_nothing(installed, old, new):
    venv, pyproject = installed
    edit(pyproject, old, new)
    assert venv_stamp.stale(venv, pyproject) is None


@pytest.mark.parametrize("old, new", [
    ('"tqdm==4.70.1"', '"tqdm==4.70.2"'),                             # a pin
    ('dev = ["pytest==9.2.0",', 'dev = ["pytest==9.2.1",'),           # an extra
    ('nmtbench = "nmtbench.cli:main"', 'nmtbench = "nmtbench.cli:run"'),  # an entry point
    ('where = ["src"]', 'where = ["lib"]'),                           # where setuptools finds the package
    ('requires = ["setuptools>=68"]', 'requires = ["setuptools>=70"]'),  # the build backend
])
def test_a_changed_dependency_reinstalls(installed, capsys, old, new):
    venv, pyproject = installed
    edit(pyproject, old, new)
    assert venv_stamp.stale(venv, pyproject) == (f"{pyproject}: the dependencies changed since {venv} was "
                                                 "installed: reinstalling")
    assert venv_stamp.main(["check", str(venv), str(pyproject)]) == 1
    assert capsys.readouterr().err == f"make: {venv_stamp.stale(venv, pyproject)}\n"


def test_a_venv_never_installed_installs(tmp_path):
    assert venv_stamp.stale(tmp_path / ".venv", ROOT / "pyproject.toml") == (
        f"no {tmp_path / '.venv' / '.installed'} yet: installing .venv")


def test_make_setup_reuses_a_venv_older_than_pyproject(installed):
    """The Makefile asks the stamp: in a fresh clone (pyproject.toml newer than .venv) make setup runs nothing."""
    venv, pyproject = installed
    checkout = pyproject.parent
    shutil.copyfile(ROOT / "Makefile", checkout / "Makefile")
    shutil.copytree(ROOT / "tools", checkout / "tools")
    later = (venv / ".installed").stat().st_mtime + 3600
    os.utime(pyproject, (later, later))
    # were it to install, it would fail at once without an index rather than download
    done = subprocess.run(["make", "--no-print-directory", "setup"], cwd=checkout, capture_output=True, text=True,
                          env={**os.environ, "PIP_NO_INDEX": "1"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert sorted(path.name for path in venv.iterdir()) == [".installed"]
