"""A throwaway PostgreSQL server on the loopback, from Debian's postgresql package (make test installs it where it
can), for tests of workers sharing one Optuna study through an RDB URL."""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

USER = "nmtbench"


def server_bin() -> Path | None:
    """The folder of initdb and pg_ctl, newest version first; None when PostgreSQL is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]), reverse=True)
    return Path(found[0]).parent if found else shutil.which("initdb") and Path(shutil.which("initdb")).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def postgres_server():
    """Yields the URL of an empty database nmtbench on a server of its own, stopped and deleted afterwards. The
    server refuses to run as root, so as root it runs as the package's postgres user."""
    bin_dir = server_bin()
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    folder = Path(tempfile.mkdtemp(prefix="nmtbench-pg-"))
    if as_user:
        shutil.chown(folder, "postgres")
    data, port = folder / "data", free_port()

    def run(*command):
        subprocess.run([*as_user, *command], check=True, capture_output=True, text=True)

    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust")
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "start", "-o",
            f"-p {port} -k {folder} -c listen_addresses=127.0.0.1")
        try:
            run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", USER, USER)
            yield f"postgresql://{USER}@127.0.0.1:{port}/{USER}"
        finally:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
