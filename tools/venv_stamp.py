"""Whether .venv holds what pyproject.toml asks to install, judged by content, never by file times.

make's usual rule (.venv/.installed older than pyproject.toml: reinstall) rebuilds a working .venv
whenever pyproject.toml is newer, as in a fresh clone that reuses one. Instead .venv/.installed holds
the sha256 of the lines pip reads (the tables build-system, project and tool.setuptools; comments,
blank lines and other tools' settings aside), and the Makefile reinstalls only when it differs.

    python3 tools/venv_stamp.py check VENV PYPROJECT   exit 0: up to date; 1: say why, to reinstall
    python3 tools/venv_stamp.py write VENV PYPROJECT   after installing: record what was installed

The standard library only, and Python 3.10 (no tomllib): it runs before .venv exists.
"""
from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

STAMP = ".installed"
TABLE = re.compile(r"\[\[?\s*([\w.-]+)\s*\]\]?\s*(#.*)?")
INSTALL_TABLES = re.compile(r"build-system|project(\..+)?|tool\.setuptools(\..+)?")


def install_digest(pyproject: str) -> str:
    """sha256 of the install tables' lines, each stripped, comment lines and blank lines left out."""
    kept, installing = [], False
    for line in map(str.strip, pyproject.splitlines()):
        if header := TABLE.fullmatch(line):
            installing = bool(INSTALL_TABLES.fullmatch(header.group(1)))
        if installing and line and not line.startswith("#"):
            kept.append(line)
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()


def stale(venv: Path, pyproject: Path) -> str | None:
    """Why venv must be (re)installed from pyproject, or None when it holds what pyproject asks for."""
    stamp = venv / STAMP
    if not stamp.is_file():
        return f"no {stamp} yet: installing .venv"
    if stamp.read_text().strip() != install_digest(pyproject.read_text()):
        return f"{pyproject}: the dependencies changed since {venv} was installed: reinstalling"
    return None


def main(argv: list[str]) -> int:
    action, venv, pyproject = argv[0], Path(argv[1]), Path(argv[2])
    if action == "write":
        (venv / STAMP).write_text(install_digest(pyproject.read_text()) + "\n")
        return 0
    reason = stale(venv, pyproject)
    if reason:
        print(f"make: {reason}", file=sys.stderr)
    return 1 if reason else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
