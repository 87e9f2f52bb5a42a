"""Installs into .venv with uv, from where pip is configured to look.

uv installs the project's dependencies in well under a minute where pip takes about three, but it reads no pip
configuration. A machine may keep its CPU build of torch in a find-links folder, or cap releases with a constraints
file, both set in pip.conf or PIP_* variables; uv would then take PyPI's CUDA build of the same version. So pip's
own settings (`pip config list`: its files and its variables, in pip's order of precedence) become uv's flags,
and both install the same releases.

    python3 tools/uv_install.py VENV ARGS...   runs VENV/bin/uv pip install --python VENV/bin/python FLAGS ARGS

The standard library only: it runs before the project is installed.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

# pip's setting -> uv's flag; each may hold several values, separated by white space as pip reads them
FLAGS = {"index-url": "--default-index", "extra-index-url": "--index", "find-links": "--find-links",
         "constraint": "--constraints"}
VARIABLES = {"cert": "SSL_CERT_FILE", "default-timeout": "UV_HTTP_TIMEOUT"}
# pip's sections, the first found winning: its PIP_* variables, then its install and global sections
PRECEDENCE = (":env:", "install", "global")


def pip_settings(listed: str) -> dict[str, str]:
    """`pip config list` output (lines scope.key='value') -> each key's value as pip applies it to an install."""
    scopes: dict[str, dict[str, str]] = {}
    for line in listed.splitlines():
        name, _, value = line.partition("=")
        scope, _, key = name.rpartition(".")
        scopes.setdefault(key, {})[scope] = ast.literal_eval(value)
    return {key: next(found[scope] for scope in PRECEDENCE if scope in found)
            for key, found in scopes.items() if any(scope in found for scope in PRECEDENCE)}


def uv_arguments(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """pip's settings -> uv's flags and the variables uv reads instead."""
    flags = ["--index-strategy", "unsafe-best-match"]  # as pip: the best release across every index
    for key, flag in FLAGS.items():
        for value in settings.get(key, "").split():
            flags += [flag, value]
    return flags, {variable: settings[key] for key, variable in VARIABLES.items() if key in settings}


def main(argv: list[str]) -> int:
    bin_dir = Path(argv[0]) / "bin"
    listed = subprocess.run([bin_dir / "pip", "config", "list"], capture_output=True, text=True, check=True).stdout
    flags, variables = uv_arguments(pip_settings(listed))
    command = [bin_dir / "uv", "pip", "install", "--python", bin_dir / "python", *flags, *argv[1:]]
    return subprocess.run(command, env={**os.environ, **variables}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
