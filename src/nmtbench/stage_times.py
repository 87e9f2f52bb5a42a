"""How long each `nmtbench` command took, from its process's start to its end, imports included: where the
environment variable NMTBENCH_STAGE_TIMES names a file, every command appends one JSON line to it. The benchmark
of the pipeline's own cost (benchmarks/smoke_breakdown.py) sets it around `make smoke` and tells the stages' time
apart from DVC's and make's, and the work inside a stage (training, decoding) from its start-up."""
from __future__ import annotations

import json
import os
from pathlib import Path

ENV = "NMTBENCH_STAGE_TIMES"


def process_seconds() -> float | None:
    """Seconds since this process started, from Linux's /proc (10 ms resolution); None where there is none."""
    try:
        # the fields after the command's name, which is in brackets and may hold spaces: starttime is the 22nd of
        # all, the 20th of these, in clock ticks since boot
        ticks = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return round(uptime - ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


def record(command: str, argv: list[str], code: int) -> None:
    """One line for this command, where NMTBENCH_STAGE_TIMES asks for it: its name, arguments, exit code, seconds
    and folder."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = {"command": command, "argv": argv, "exit": code, "seconds": process_seconds(), "folder": os.getcwd()}
    with open(path, "a", encoding="utf-8") as out:  # one write a line: processes running at once do not interleave
        out.write(json.dumps(line) + "\n")
