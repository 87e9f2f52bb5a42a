"""`nmtbench gpu probe-jobs`: how many trainings at once move the most target tokens through this machine's GPU,
the number a timed grid packs (timed_grid.py, docs/gpu.md). Each level trains one model that many times at once for a
few seconds, in a workspace of its own made as the grid's are.
    nmtbench gpu probe-jobs runs/gpu-check/probe --profile ... --levels 1 4 8 --train-seconds 20
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from nmtbench.files import write_text
from nmtbench.gpu.timed_grid import STARTUP_SECONDS, GpuMemory, launched, overrides, prepare_workspace, train_row


def choose_jobs(probe: dict[int, dict]) -> int:
    """The number of trainings at once that moved the most target tokens per second through the GPU."""
    return max(probe, key=lambda jobs: (probe[jobs]["total_tokens_per_s"], -jobs))


def probe_jobs(project: Path, folder: Path, profiles: list[Path], settings: list[dict], tokenized: Path,
               levels: list[int], train_seconds: int, model: str, tiny_models: Path | None = None,
               startup: float = STARTUP_SECONDS) -> int:
    """`levels` trainings of one model at once, each level in its own workspace, for train_seconds each: target
    tokens/s per job and for the GPU, and the GPU's peak memory, then the number of jobs to pack. probe.json is
    rewritten after each level, so a probe cut short still tells the grid what it measured."""
    found = {"model": model, "train_seconds": train_seconds, "levels": {}}
    os.environ.update(WANDB_MODE="disabled", PYTHONUNBUFFERED="1")
    for jobs in levels:
        workspace = folder / f"jobs{jobs}"
        extra = overrides([*settings, {"seeds": list(range(1, jobs + 1)), "beam_sweep": {"seed": 1},
                                        "train": {"budget": {"kind": "time", "value": train_seconds}}}], tiny_models)
        prepare_workspace(workspace, project, profiles, extra, tokenized)
        runs = [(model, seed) for seed in range(1, jobs + 1)]
        started = time.monotonic()
        with GpuMemory(workspace) as memory:  # a training's start, its budget and the validation that ends it
            code = launched(workspace, [f"train@{model}-{seed}" for _, seed in runs], jobs,
                            train_seconds + 2 * startup)
        rates = [train_row(workspace, *run)["train_tokens_per_s"] or 0 for run in runs]
        found["levels"][jobs] = {"per_job_tokens_per_s": rates, "total_tokens_per_s": round(sum(rates), 1),
                                 "gpu_peak_memory_mib": memory.peak_mib, "all_ok": code == 0,
                                 "wall_seconds": round(time.monotonic() - started, 1)}
        found["chosen_jobs"] = choose_jobs(found["levels"])
        write_text(folder / "probe.json", json.dumps(found, indent=1) + "\n")
        print(f"  {jobs} at once: {sum(rates):,.0f} target tokens/s in all, peak GPU memory "
              f"{memory.peak_mib} MiB", flush=True)
    print(f"jobs per GPU chosen: {found['chosen_jobs']}")
    return 0 if all(level["all_ok"] for level in found["levels"].values()) else 1
