"""sbatch, srun, sacct and scancel stand-ins for a machine without SLURM: sbatch keeps each submitted script and
runs it at once in the background, as a one-node job of one task would run; sacct reports it running until its
script ends."""
from __future__ import annotations

from pathlib import Path

SBATCH = """#!/bin/bash
record={record}
id=$(( $(ls "$record" | grep -c '\\.sbatch$') + 1000 ))
cp "$1" "$record/$id.sbatch"
( export SLURM_JOB_ID=$id SLURM_NTASKS=1 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_JOB_NUM_NODES=1 \\
    SLURM_JOB_NODELIST=localhost
  bash "$1"; touch "$record/$id.done" ) </dev/null >/dev/null 2>&1 &
echo $! > "$record/$id.pid"
echo "Submitted batch job $id"
"""
# srun --unbuffered --output <path> [--error <path>] command...: the task's output where submitit reads it
SRUN = """#!/bin/bash
out=/dev/null; err=
while [[ $1 == --* ]]; do
  case $1 in --output) out=$2; shift 2;; --error) err=$2; shift 2;; *) shift;; esac
done
out=${out//%j/$SLURM_JOB_ID}; out=${out//%t/0}; err=${err//%j/$SLURM_JOB_ID}; err=${err//%t/0}
exec "$@" >>"$out" 2>>"${err:-$out}"
"""
SACCT = """#!/bin/bash
record={record}
while [[ $# -gt 0 && $1 != -j ]]; do shift; done
echo "JobID|State|NodeList"
for id in ${{2//,/ }}; do
  if [[ -e $record/$id.done ]]; then echo "$id|COMPLETED|localhost"; else echo "$id|RUNNING|localhost"; fi
done
"""
SCANCEL = """#!/bin/bash
record={record}
for id in "$@"; do kill -INT -- "-$(cat "$record/$id.pid")" 2>/dev/null; touch "$record/$id.done"; done
"""


def fake_slurm(folder: Path) -> tuple[Path, Path]:
    """The stand-ins in folder/bin (put it first on PATH); returns that folder and the one keeping each submitted
    script as <job id>.sbatch."""
    bin_dir, record = folder / "bin", folder / "submitted"
    bin_dir.mkdir(parents=True)
    record.mkdir()
    for name, text in (("sbatch", SBATCH), ("srun", SRUN), ("sacct", SACCT), ("scancel", SCANCEL)):
        (bin_dir / name).write_text(text.replace("{record}", str(record)).replace("{{", "{").replace("}}", "}"))
        (bin_dir / name).chmod(0o755)
    return bin_dir, record
