"""The launcher's loop: start each out-of-date stage once what it waits for is done, up to launch.jobs at once;
record each finished one in dvc.lock, one at a time (without dvc: launch/dvcfile.py); report progress, failures
with their logs, and Ctrl-C; stop at a time limit if given."""
from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from nmtbench.config import LaunchConfig, TrainConfig
from nmtbench.files import PidLock
from nmtbench.launch import dvcfile, jobs

FOLDER = Path("launch")  # logs, submitit's files and the lock; ignores itself for git
POLL_SECONDS = 1.0
SUMMARY_SECONDS = 60.0  # a progress line at least this often while jobs run
TAIL_LINES = 15


@dataclass
class Running:
    job: object  # a submitit.Job
    slot: int
    started: float = field(default_factory=time.monotonic)


def launch(cfg: LaunchConfig, targets: list[str] | None = None, out=sys.stdout, train: TrainConfig | None = None,
           prefer: list[str] | None = None, without_dvc: bool = False, single_item: bool = False,
           time_limit: float | None = None) -> int:
    """Run what DVC finds out of date in the current folder, the root of a DVC project (as `dvc repro` does); 0 when
    every stage ended recorded, 1 when one failed or the time limit cut it, 130 on Ctrl-C. train: the project's
    train block, whose num_nodes and devices size a DDP training's SLURM job. prefer: stage names in the order to
    start them when several are ready (the rest after them, in dvc.yaml's order); without it, dvc.yaml's order.
    without_dvc: dvc.yaml's commands run on a machine without dvc (launch/dvcfile.py says when a stage runs).
    single_item: the targets alone, not what they wait for. time_limit: seconds after which the running jobs are
    cancelled and the pending ones not started."""
    root = Path.cwd()
    folder = FOLDER
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_text("*\n")
    with LaunchLock(folder / "launch.lock"):
        kind = jobs.executor_kind(cfg)
        here = kind in ("local", "process")
        gpus = jobs.visible_gpus() if here and cfg.gpus_per_job else []
        slots = jobs.local_slots(cfg, gpus) if here else cfg.jobs
        if without_dvc:
            pipeline = dvcfile.Pipeline(root, single_item)
        else:
            from nmtbench.launch.stages import DvcPipeline  # imports dvc

            pipeline = DvcPipeline(root, single_item)
        todo = pipeline.plan(targets)
        if prefer:
            rank = preference_ranks(todo, prefer)
            todo.sort(key=lambda stage: rank.get(stage.name, len(prefer)))  # stable: the rest keep dvc.yaml's order
        if not todo:
            print("nmtbench launch: every stage is up to date", file=out)
            return 0
        executor = jobs.make_executor(cfg, kind, folder / "submitit")
        print(f"nmtbench launch: {len(todo)} stage(s) to check, {slots} {kind} job(s) at once, "
              f"{jobs.threads_per_job(cfg)} thread(s) each; logs in {folder / 'logs'}", file=out)
        deadline = None if time_limit is None else time.monotonic() + time_limit
        return Loop(cfg, root, kind, gpus, slots, executor, pipeline, todo, out, train, deadline).run()


def preference_ranks(todo: list, prefer: list[str]) -> dict[str, int]:
    """Each stage's place in `prefer`; a stage not named there takes the earliest place of the stages that wait on
    it, so that the upstream of the first preferred stage (its tuning, say) starts before another's."""
    rank = {name: index for index, name in enumerate(prefer)}
    for stage in reversed(todo):  # upstream first in todo: every stage's waiters are ranked before it
        for upstream in stage.needs:
            if stage.name in rank:
                rank[upstream] = min(rank.get(upstream, len(prefer)), rank[stage.name])
    return rank


class Loop:
    def __init__(self, cfg, root, kind, gpus, slots, executor, pipeline, todo, out, train, deadline):
        self.cfg, self.root, self.kind, self.gpus, self.slots = cfg, root, kind, gpus, slots
        self.executor, self.pipeline, self.out, self.train, self.deadline = executor, pipeline, out, train, deadline
        self.pending = list(todo)  # upstream first
        self.running: dict[str, Running] = {}
        self.done: set[str] = set()  # run and recorded, or found up to date
        self.failed: dict[str, str] = {}  # stage -> why
        self.started = time.monotonic()

    def run(self) -> int:
        last_summary = 0.0
        asked, previous = catch_cancel_signals()
        try:
            while (self.pending or self.running) and not asked:
                if self.deadline is not None and time.monotonic() > self.deadline:
                    self.stop_at_time_limit()
                    break
                changed = self.start_ready() | self.collect_finished()
                if changed or time.monotonic() - last_summary > SUMMARY_SECONDS:
                    self.summary()
                    last_summary = time.monotonic()
                time.sleep(POLL_SECONDS)
            if asked:
                self.cancel()  # under the loop's handlers: a second signal is noted, not a kill
        except BaseException:  # the launcher's own failure (say, sbatch refusing a job) leaves no job behind
            self.cancel()
            raise
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if asked:
            print(f"\nnmtbench launch: interrupted; cancelled {len(self.running)} job(s): "
                  f"{', '.join(self.running) or 'none'} (a rerun resumes what is missing)", file=self.out)
            return 130
        for name, why in self.failed.items():
            print(f"failed: {name}: {why}", file=self.out)
        return 1 if self.failed else 0

    def start_ready(self) -> bool:
        changed = False
        for stage in list(self.pending):
            if stage.needs & set(self.failed):
                self.pending.remove(stage)
                self.failed[stage.name] = f"not run: {', '.join(sorted(stage.needs & set(self.failed)))} failed"
                changed = True
            elif stage.needs <= self.done and len(self.running) < self.slots:
                self.pending.remove(stage)
                changed = True
                if not self.pipeline.prepare(stage.name):
                    self.done.add(stage.name)
                    print(f"up to date: {stage.name}", file=self.out)
                    continue
                self.submit(stage)
        return changed

    def submit(self, stage: dvcfile.Stage) -> None:
        slot = min(set(range(self.slots)) - {r.slot for r in self.running.values()})
        gpus = jobs.slot_gpus(slot, self.gpus, self.cfg.gpus_per_job) if self.kind != "slurm" else None
        log = self.log(stage.name)
        log.write_text(f"$ {stage.cmd}\n")
        if self.kind == "slurm":
            self.executor.update_parameters(**jobs.slurm_tasks(stage.name, self.cfg, self.train))
        job = jobs.submit(self.executor, self.kind, jobs.run_stage, stage.cmd, str(self.root), str(self.root / log),
                          jobs.job_env(jobs.threads_per_job(self.cfg), gpus),
                          os.getpid() if self.kind == "local" else None)  # a SLURM job outlives its launcher
        self.running[stage.name] = Running(job, slot)
        where = f" on GPU {','.join(gpus)}" if gpus else ""
        print(f"started: {stage.name} (job {job.job_id}{where})", file=self.out)

    def collect_finished(self) -> bool:
        finished = [(name, running) for name, running in self.running.items() if running.job.done()]
        for name, running in finished:
            del self.running[name]
            elapsed = clock(time.monotonic() - running.started)
            error = running.job.exception()
            problem = error_line(error) if error else self.pipeline.record(name)
            if problem is None:
                self.done.add(name)
                print(f"done: {name} in {elapsed}", file=self.out)
            else:
                self.pipeline.restore(name)
                self.failed[name] = f"{problem} after {elapsed}; log: {self.log(name)}"
                print(f"FAILED: {name} ({problem}) after {elapsed}; last lines of {self.log(name)}:\n"
                      f"{tail(self.log(name))}", file=self.out)
        return bool(finished)

    def stop_at_time_limit(self) -> None:
        """The jobs still running are cancelled and fail, the pending ones are not run: what finished stays."""
        self.cancel()
        for name, running in self.running.items():
            self.failed[name] = f"cut at the time limit after {clock(time.monotonic() - running.started)}; " \
                                f"log: {self.log(name)}"
        for stage in self.pending:
            self.failed[stage.name] = "not run: the time limit passed"
        print(f"nmtbench launch: the time limit passed; cancelled {len(self.running)} job(s), "
              f"{len(self.pending)} not started", file=self.out)
        self.running, self.pending = {}, []

    def cancel(self) -> None:
        for running in self.running.values():
            jobs.cancel(running.job, self.kind)

    def summary(self) -> None:
        running = ", ".join(f"{name} {clock(time.monotonic() - r.started)}" for name, r in self.running.items())
        print(f"[{clock(time.monotonic() - self.started)}] {len(self.done)} done, {len(self.running)} running"
              f"{f' ({running})' if running else ''}, {len(self.pending)} pending, {len(self.failed)} failed",
              file=self.out)

    def log(self, name: str) -> Path:
        return FOLDER / "logs" / f"{name}.log"


def catch_cancel_signals() -> tuple[list[str], dict]:
    """Ctrl-C and `kill` cancel the jobs, however the launcher was started: a process inherits ignored and blocked
    signals from its parent (a shell script's background job ignores SIGINT; a parent may block both), and would
    then run on, its jobs with it, when asked to stop. The handler notes the signal in the list returned, which the
    loop reads between its steps: raised from the handler, an exception could cut a step (recording a stage in
    dvc.lock, a Popen's wait holding its lock) in the middle, and a second signal the cancelling. Returns that
    list and the handlers it replaced."""
    asked: list[str] = []
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    previous = {signum: signal.signal(signum, lambda signum, frame: asked.append(signal.Signals(signum).name))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    return asked, previous


def error_line(error: BaseException) -> str:
    """The line naming what ended a job: submitit wraps the job's exception in its traceback between two rules of
    dashes; a job that died without one (killed) has submitit's own first line."""
    parts = str(error).split("-" * 22)
    lines = [line.strip() for line in (parts[1] if len(parts) > 2 else parts[0]).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    last = lines[-1] if len(parts) > 2 else lines[0]
    kind, colon, message = last.partition(": ")
    return f"{kind.rsplit('.', 1)[-1]}{colon}{message}"


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    text = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []
    return "\n".join(f"    {line}" for line in text[-lines:])


def clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s"


class LaunchLock(PidLock):
    """One launch per workspace: a file holding the launcher's pid, taken over when that process is gone."""

    def __init__(self, path: Path):
        super().__init__(path, "another nmtbench launch (pid {pid}) is running in this workspace; wait for it or stop "
                               "it (kill {pid}), then rerun")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
