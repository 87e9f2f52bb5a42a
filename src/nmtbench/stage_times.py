"""How long each `nmtbench` command took, from its process's start to its end, imports included: where the
environment variable NMTBENCH_STAGE_TIMES names a file, every command appends one JSON line to it. The benchmark
of the pipeline's own cost (benchmarks/smoke_breakdown.py) sets it around `make smoke` and tells the stages' time
apart from DVC's and make's, and the work inside a stage (training, decoding) from its start-up."""
from __future__ import annotations

import json
import os
from pathlib import Path

ENV = "NMTBENCH_STAGE_TIMES"
# in a copy forked from the warm interpreter (warm.py): the seconds the command's own process ran before handing over
_handed_over_after: float | None = None


def handed_over(seconds: float | None) -> None:
    """This process runs a command whose own process started `seconds` before it."""
    global _handed_over_after
    _handed_over_after = seconds or 0.0


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
    (from its own process's start where a warm copy ran it), folder, and whether a warm copy ran it."""
    path = os.environ.get(ENV)
    if not path:
        return
    seconds = process_seconds()
    if seconds is not None and _handed_over_after is not None:
        seconds = round(seconds + _handed_over_after, 2)
    line = {"command": command, "argv": argv, "exit": code, "seconds": seconds, "folder": os.getcwd(),
            "warm": _handed_over_after is not None}
    with open(path, "a", encoding="utf-8") as out:  # one write a line: processes running at once do not interleave
        out.write(json.dumps(line) + "\n")
