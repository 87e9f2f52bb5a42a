"""The jobs: one stage's command per job, with its threads and GPUs set and its output in a log file of its own.
A job is a submitit job, on this machine (LocalExecutor) or on SLURM, or, where submitit is not installed, a
process of the launcher's own (executor: process)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from nmtbench.config import ConfigError, LaunchConfig, TrainConfig

LOCAL_TIMEOUT_MIN = 7 * 24 * 60  # submitit's local jobs stop after 2 minutes unless told otherwise


class StageFailed(RuntimeError):
    """A stage's command ended with a non-zero exit status."""


def start_stage(cmd: str, cwd: str, log: str, env: dict[str, str]) -> subprocess.Popen:
    """cmd started in cwd, its output appended to log, in a session of its own, so that ending the job ends
    everything it started: a cancelled job (Ctrl-C, scancel) leaves no training behind."""
    with open(log, "a", encoding="utf-8") as out:
        return subprocess.Popen(cmd, shell=True, cwd=cwd, env={**os.environ, **env}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


# what stops a job process: the launcher's cancel (passed on by submitit's controller), Ctrl-C, scancel, a kill, a
# closed terminal
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_stage(cmd: str, cwd: str, log: str, env: dict[str, str], launcher: int | None = None) -> None:
    """Run cmd to its end (the function each submitit job runs). Any of STOP_SIGNALS to this process stops the stage
    at once, and so does the end of the launcher whose pid is `launcher` (a local job's): killed alone, with no
    chance to cancel, it left its trainings running, beside the next launch's. submitit's job process lets SIGTERM
    pass (it waits for its own timeout signal), and a signal to the launcher's whole process group (kill -TERM
    -<group>, a closed terminal's SIGHUP) reaches submitit's local controller too, which kills this process a second
    after passing its stop on, or dies at once on SIGHUP: the stage, in a session of its own, trained on, and the
    next launch started the same run beside it.

    The handler passes the stop on and notes it, and raises nothing: an exception raised from it could strike inside
    Popen.wait while that held the Popen's lock, and the wait for the stopping stage then waited on the lock for
    ever (about one signal to the launcher's group in twenty, under load: the job process outlived its stage)."""
    started: list[subprocess.Popen] = []
    stopped_by: list[str] = []

    def stop(signum, frame):
        stopped_by.append(signal.Signals(signum).name)
        for process in started:
            signal_stage(process)

    previous = {}
    if threading.current_thread() is threading.main_thread():  # where Python lets a handler be set
        previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        process = start_stage(cmd, cwd, log, env)
        started.append(process)
        if stopped_by:  # the stop came while the stage was being started
            signal_stage(process)
        try:
            code = wait_while_alive(process, launcher)
        finally:
            end(process)
    finally:
        for signum, handler in previous.items():  # submitit's own, for the rest of its job process
            signal.signal(signum, handler)
    if stopped_by:  # a stage that stopped cleanly when told has not finished: the launcher must not record it
        raise StageFailed(f"stopped by {stopped_by[0]}")
    if code:
        raise StageFailed(f"exit status {code}")


def submit(executor, kind: str, *args):
    """executor.submit(*args). A local job's controller, the process submitit starts for it, starts with SIGINT
    ignored, which it keeps through exec and for which Python then installs no KeyboardInterrupt: Ctrl-C on the
    terminal reaches the job's own process, whose run_stage stops the stage, but not the controller, whose
    KeyboardInterrupt printed a traceback under the launcher's one-line "interrupted". cancel stops it instead."""
    if kind != "local":
        return executor.submit(*args)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return executor.submit(*args)
    finally:
        signal.signal(signal.SIGINT, previous)


def cancel(job, kind: str) -> None:
    """Stop a job. A local job's controller (its job_id is the controller's pid) is sent SIGTERM, which it passes on
    to the job's process and then ends with it, quietly; submitit's own cancel sends SIGINT, which it now ignores."""
    if kind != "local":
        job.cancel(check=False)
        return
    try:
        os.kill(int(job.job_id), signal.SIGTERM)
    except ProcessLookupError:  # it has ended
        pass


WATCH_SECONDS = 2.0  # how often a local job looks for its launcher


def wait_while_alive(process: subprocess.Popen, launcher: int | None) -> int:
    """process's exit status; with a launcher pid, the stage is stopped (signal_stage) once that process is gone."""
    while True:
        try:
            return process.wait(timeout=None if launcher is None else WATCH_SECONDS)
        except subprocess.TimeoutExpired:
            if not alive(launcher):
                signal_stage(process)
                launcher = None  # then wait for the stage to stop after its step


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's: the pid was reused, so the launcher is gone
        return False
    return True


def signal_stage(process: subprocess.Popen) -> None:
    """SIGTERM to everything the stage started (a training stops after its step), unless it has ended."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:  # its whole group ended since the poll
            pass


def end(process: subprocess.Popen) -> None:
    signal_stage(process)
    process.wait()


class ProcessJob:
    """A stage's command as a process of the launcher's, with the part of submitit's Job the launcher uses."""

    def __init__(self, process: subprocess.Popen):
        self.process, self.job_id = process, str(process.pid)

    def done(self) -> bool:
        return self.process.poll() is not None

    def exception(self) -> StageFailed | None:
        code = self.process.poll()
        return StageFailed(f"exit status {code}") if code else None

    def cancel(self, check: bool = True) -> None:
        end(self.process)


class Processes:
    """The executor where submitit is not installed: each job a process of the launcher's."""

    def submit(self, function, cmd: str, cwd: str, log: str, env: dict[str, str], launcher=None) -> ProcessJob:
        if function is not run_stage:
            raise TypeError("the process executor runs stage commands only (run_stage)")
        return ProcessJob(start_stage(cmd, cwd, log, env))


def executor_kind(cfg: LaunchConfig) -> str:
    if cfg.executor == "auto":
        if shutil.which("sbatch"):
            return "slurm"
        return "local" if importable("submitit") else "process"
    if cfg.executor == "slurm" and not shutil.which("sbatch"):
        raise ConfigError("launch.executor: slurm, but sbatch is not on PATH; run on a SLURM login node, or set "
                          "launch.executor: local")
    if cfg.executor in ("local", "slurm") and not importable("submitit"):
        raise ConfigError(f"launch.executor: {cfg.executor} needs submitit, which is not installed here; install it "
                          "(pip install submitit) or set launch.executor: process")
    return cfg.executor


def importable(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def threads_per_job(cfg: LaunchConfig, cores: int | None = None) -> int:
    """launch.threads_per_job, or this machine's cores split between the jobs."""
    return cfg.threads_per_job or max(1, (cores or os.cpu_count() or 1) // cfg.jobs)


def make_executor(cfg: LaunchConfig, kind: str, folder: Path):
    if kind == "process":
        return Processes()
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster=kind)
    if kind == "slurm":
        slurm = cfg.slurm
        executor.update_parameters(
            timeout_min=slurm.time_min, cpus_per_task=slurm.cpus_per_job or threads_per_job(cfg, 1),
            **{f"slurm_{key}": value for key, value in (("partition", slurm.partition), ("account", slurm.account))
               if value is not None},
            **({"mem_gb": slurm.mem_gb} if slurm.mem_gb else {}),
            **({"slurm_additional_parameters": dict(slurm.extra)} if slurm.extra else {}))
    else:
        executor.update_parameters(timeout_min=LOCAL_TIMEOUT_MIN)
    return executor


def slurm_tasks(stage: str, cfg: LaunchConfig, train: TrainConfig | None) -> dict[str, int]:
    """The nodes, tasks and GPUs of a stage's SLURM job: one task, but a training of train.num_nodes x
    train.devices processes (DDP) gets one job of that many tasks, each task one of Lightning's ranks (Lightning
    reads its rank from SLURM), as `srun` of the training would."""
    if train is None or not stage.startswith("train@") or train.num_nodes * train.devices == 1:
        return {"nodes": 1, "tasks_per_node": 1, "gpus_per_node": cfg.gpus_per_job}
    gpus = train.devices if train.accelerator != "cpu" else 0
    return {"nodes": train.num_nodes, "tasks_per_node": train.devices, "gpus_per_node": gpus}


def visible_gpus() -> list[str]:
    """The GPUs this machine lets the launcher use: CUDA_VISIBLE_DEVICES when set, else every one torch sees."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [gpu for gpu in listed.split(",") if gpu.strip()]
    import torch

    return [str(index) for index in range(torch.cuda.device_count())]


def local_slots(cfg: LaunchConfig, gpus: list[str]) -> int:
    """How many jobs run at once on this machine: launch.jobs, fewer when the GPUs cannot hold that many."""
    if not cfg.gpus_per_job:
        return cfg.jobs
    groups = len(gpus) // cfg.gpus_per_job
    if not groups:
        raise ConfigError(f"launch.gpus_per_job: {cfg.gpus_per_job}, but this machine shows {len(gpus)} GPU(s); "
                          "set it to 0 for CPU jobs, or lower it")
    return min(cfg.jobs, groups * cfg.jobs_per_gpu)


def slot_gpus(slot: int, gpus: list[str], gpus_per_job: int) -> list[str] | None:
    """The GPUs of the job in slot (0 .. local_slots - 1): slots go round the groups of gpus_per_job GPUs, so
    every GPU gets a job before any gets two (jobs_per_gpu packs them). None with gpus_per_job 0: the launcher
    hands out no GPUs, and the job sees those the launcher sees (an empty list would hide them all, and a packed
    grid's `accelerator: gpu` trainings would find none)."""
    if not gpus_per_job:
        return None
    groups = len(gpus) // gpus_per_job
    group = slot % groups
    return gpus[group * gpus_per_job:(group + 1) * gpus_per_job]


def job_env(threads: int, gpus: list[str] | None) -> dict[str, str]:
    """A job's environment: its threads (torch takes OMP_NUM_THREADS for its thread pool) and, on this machine,
    its GPUs (SLURM sets them itself)."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    return env
