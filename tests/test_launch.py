"""nmtbench launch on a toy DVC project of shell stages (seconds, no training): concurrent jobs recorded as
`dvc repro` records them, a failed stage named while the others go on, reruns, the launch lock, GPUs per job."""
from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml

from helpers.fake_slurm import fake_slurm
from helpers.project import pipeline_env
from nmtbench.cli import main
from nmtbench.config import ConfigError, LaunchConfig, SlurmConfig, TrainConfig, parse_params
from nmtbench.launch import launch
from nmtbench.launch.dvcfile import Stage
from nmtbench.launch.jobs import job_env, local_slots, slot_gpus, slurm_tasks, threads_per_job
from nmtbench.launch.scheduler import LaunchLock, Loop, Running, alive, preference_ranks

# a fans out to b@1 and b@2, which c joins; b sleeps so that both b run at once
TOY = """
stages:
  a:
    cmd: echo a > a.txt
    outs: [a.txt]
  b:
    matrix:
      n: [1, 2]
    cmd: sleep 1 && cat a.txt > b${item.n}.txt && echo ${item.n} $OMP_NUM_THREADS >> b${item.n}.txt
    deps: [a.txt]
    outs: ["b${item.n}.txt"]
  c:
    cmd: cat b1.txt b2.txt > c.txt
    deps: [b1.txt, b2.txt]
    outs: [c.txt]
"""
LOCAL = LaunchConfig(executor="local", jobs=2, threads_per_job=1)


def runner(folder: Path):
    """run(*command): a command in folder, its output captured."""
    env = pipeline_env()

    def run(*command, check=True):
        return subprocess.run(command, cwd=folder, env=env, check=check, capture_output=True, text=True)
    return run


def toy_project(folder: Path, dvc_yaml: str = TOY):
    """A git + DVC project of dvc_yaml in folder; returns run(*command)."""
    folder.mkdir(parents=True, exist_ok=True)
    run = runner(folder)
    run("git", "init", "-q")
    run(sys.executable, "-m", "dvc", "init", "-q")
    (folder / "dvc.yaml").write_text(dvc_yaml)
    return run


def launched(folder: Path, cfg: LaunchConfig = LOCAL, targets=None) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        code = launch(cfg, targets, out)
    return code, out.getvalue()


def lock_stages(folder: Path) -> dict:
    return yaml.safe_load((folder / "dvc.lock").read_text())["stages"]


@pytest.mark.slow
def test_two_jobs_write_the_dvc_lock_of_a_sequential_repro(tmp_path):
    run = toy_project(tmp_path / "launched")
    code, printed = launched(tmp_path / "launched")
    assert code == 0
    assert [line.split()[1] for line in printed.splitlines() if line.startswith("done:")][-1] == "c"
    assert "Data and pipelines are up to date." in run("dvc", "status").stdout
    assert "didn't change, skipping" in run("dvc", "repro").stdout
    sequential = toy_project(tmp_path / "sequential")
    sequential("dvc", "repro")
    assert lock_stages(tmp_path / "launched") == lock_stages(tmp_path / "sequential")
    assert (tmp_path / "launched/b2.txt").read_text() == "a\n2 1\n"  # OMP_NUM_THREADS: threads_per_job
    assert (tmp_path / "launched/launch/logs/c.log").read_text() == "$ cat b1.txt b2.txt > c.txt\n"
    assert launched(tmp_path / "launched") == (0, "nmtbench launch: every stage is up to date\n")


@pytest.mark.slow
def test_results_pushed_to_a_dvc_remote_are_pulled_elsewhere_without_rerunning(tmp_path):
    """Sharing the results of a launch the DVC way: dvc push on one machine, dvc pull in a fresh clone."""
    run = toy_project(tmp_path / "here")
    assert launched(tmp_path / "here")[0] == 0
    run("dvc", "remote", "add", "-d", "shared", str(tmp_path / "remote"))
    run("dvc", "push")
    run("git", "add", "-A")
    run("git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "results")
    subprocess.run(["git", "clone", "-q", str(tmp_path / "here"), str(tmp_path / "elsewhere")], check=True)
    elsewhere = runner(tmp_path / "elsewhere")
    elsewhere("dvc", "pull")
    assert (tmp_path / "elsewhere/c.txt").read_text() == "a\n1 1\na\n2 1\n"
    assert "Data and pipelines are up to date." in elsewhere("dvc", "status").stdout
    assert launched(tmp_path / "elsewhere") == (0, "nmtbench launch: every stage is up to date\n")


@pytest.mark.slow
def test_a_failed_stage_is_named_with_its_log_and_the_others_go_on(tmp_path):
    # b@2 fails until a file `fixed` appears (no dep: fixing it changes no stage)
    failing = TOY.replace("cat a.txt > b${item.n}.txt", "test ${item.n} = 1 || test -e fixed || "
                          "{ echo no b$(echo 2); exit 3; }; cat a.txt > b${item.n}.txt")
    run = toy_project(tmp_path, failing)
    code, printed = launched(tmp_path)
    log = tmp_path / "launch/logs/b@2.log"
    assert code == 1
    assert re.search(r"FAILED: b@2 \(StageFailed: exit status 3\) after \d+m\d\ds; last lines of ", printed)
    assert f"last lines of {log.relative_to(tmp_path)}:\n    $ sleep 1 && test 2 = 1 || test -e fixed" in printed
    assert "\n    no b2\n" in printed
    assert re.search(r"\nfailed: b@2: StageFailed: exit status 3 after \d+m\d\ds; log: ", printed)
    assert printed.endswith("\nfailed: c: not run: b@2 failed\n")
    assert "done: b@1" in printed and "started: c" not in printed
    assert "b@1" not in run("dvc", "status").stdout  # recorded though its sibling failed
    (tmp_path / "dvc.yaml").write_text(TOY.replace("cmd: echo a > a.txt", "cmd: echo a > not-a.txt"))
    code, printed = launched(tmp_path)  # a command that ends well without writing its output fails too
    assert code == 1 and "FAILED: a (dvc could not record it: output 'a.txt' does not exist) after " in printed
    (tmp_path / "dvc.yaml").write_text(failing)

    (tmp_path / "fixed").touch()  # the rerun runs what is missing only
    code, printed = launched(tmp_path)
    assert code == 0
    # a lost its output to the run that failed it; b@1 finds a rebuilt unchanged
    assert [line.split()[1] for line in printed.splitlines() if line.startswith("started:")] == ["a", "b@2", "c"]
    assert "up to date: b@1" in printed


def deaf_to_stop_signals():
    """What a launcher may inherit: SIGINT ignored (a shell script's background job) and both signals blocked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


@pytest.mark.slow
@pytest.mark.parametrize("inherited", [None, deaf_to_stop_signals], ids=["default", "ignored-and-blocked"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_cancels_the_running_jobs_and_says_so(tmp_path, signum, inherited):
    toy_project(tmp_path, "stages:\n  slow:\n    cmd: echo $$ > slow.pid && sleep 120 && touch slow.txt\n"
                          "    outs: [slow.txt]\n")
    command = [sys.executable, "-m", "nmtbench", "launch", "--executor", "local", "--jobs", "1"]
    launcher = subprocess.Popen(command, cwd=tmp_path, env=pipeline_env(), preexec_fn=inherited,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not (tmp_path / "slow.pid").is_file() or not (tmp_path / "slow.pid").read_text().endswith("\n"):
        assert launcher.poll() is None
        time.sleep(0.2)
    launcher.send_signal(signum)
    printed, errors = launcher.communicate(timeout=60)
    assert launcher.returncode == 130
    assert printed.endswith("nmtbench launch: interrupted; cancelled 1 job(s): slow (a rerun resumes what is "
                            "missing)\n")
    assert "Traceback" not in errors and "KeyboardInterrupt" not in errors  # submitit's controller's, once
    stage = int((tmp_path / "slow.pid").read_text())
    for _ in range(50):  # the job's process group ends within seconds
        if not alive(stage):
            break
        time.sleep(0.2)
    assert not alive(stage)
    assert not (tmp_path / "launch/launch.lock").exists()



# a stage that stops as a training does on SIGTERM (Lightning finishes its step): busy in Python until told, then it
# writes its stop and ends
GRACEFUL = """
import os, signal
told = []
signal.signal(signal.SIGTERM, lambda *_: told.append(1))
open("slow.pid", "w").write(f"{os.getpid()}\\n")
while not told:
    sum(range(100_000))
open("stopped.txt", "w").write("stopped\\n")
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum, whom", [(signal.SIGTERM, "group"), (signal.SIGHUP, "group"),
                                          (signal.SIGINT, "group"), (signal.SIGTERM, "job"),
                                          (signal.SIGKILL, "launcher")])
def test_a_signal_to_the_launchers_whole_process_group_stops_its_trainings(tmp_path, signum, whom):
    """kill -TERM -<group> (a service manager, `timeout`) or a closed terminal's SIGHUP reaches the launcher and every
    process of its group at once, submitit's local controller and job process among them. On SIGHUP the controller
    dies before it can pass the launcher's cancel on; on SIGTERM it kills the job process a second after passing it
    on, which a loaded machine can miss; and the job process itself lets SIGTERM pass (submitit waits for its own
    timeout signal; "job": SIGTERM to it alone). The stage, in a session of its own, trained on, and the next launch
    then started the same run beside it. "launcher": SIGKILL to the launcher alone, which can cancel nothing: the
    job process sees it gone and stops its stage."""
    (tmp_path / "graceful.py").write_text(GRACEFUL)
    toy_project(tmp_path, f"stages:\n  slow:\n    cmd: {sys.executable} graceful.py && touch slow.txt\n"
                          "    outs: [slow.txt]\n")
    command = [sys.executable, "-m", "nmtbench", "launch", "--executor", "local", "--jobs", "1"]
    launcher = subprocess.Popen(command, cwd=tmp_path, env=pipeline_env(), start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not (tmp_path / "slow.pid").is_file() or not (tmp_path / "slow.pid").read_text().endswith("\n"):
        assert launcher.poll() is None
        time.sleep(0.2)
    stage = int((tmp_path / "slow.pid").read_text())
    if whom == "launcher":
        launcher.send_signal(signum)
        launcher.wait(timeout=60)
    elif whom == "group":  # Ctrl-C is SIGINT to the terminal's whole group
        os.killpg(launcher.pid, signum)
        _, errors = launcher.communicate(timeout=60)
        assert signum == signal.SIGHUP or "Traceback" not in errors  # submitit's controller printed one on SIGINT
    else:
        job = next(parent for parent in psutil.Process(stage).parents() if "submitit.core._submit" in parent.cmdline())
        job.send_signal(signum)
    for _ in range(100):  # the stage stops within seconds
        if not alive(stage):
            break
        time.sleep(0.2)
    assert not alive(stage) and (tmp_path / "stopped.txt").read_text() == "stopped\n"
    if whom == "job":
        launcher.communicate(timeout=60)
        assert launcher.returncode == 1  # the stage failed, and the launcher says so

@pytest.mark.slow
def test_a_killed_job_is_rerun_by_the_next_launch_and_keeps_its_persistent_output(tmp_path):
    """As a killed training resumes from the checkpoint in its persistent model folder."""
    run = toy_project(tmp_path, """
stages:
  train:
    cmd: mkdir -p state && if [ -e state/runs ]; then echo resumed >> state/runs && cp state/runs done.txt;
      else echo started >> state/runs && echo $$ > train.pid && sleep 120; fi
    outs:
      - state:
          persist: true
      - done.txt
""")
    pid_file = tmp_path / "train.pid"

    def kill_the_stage():
        while not pid_file.is_file() or not pid_file.read_text().endswith("\n"):
            time.sleep(0.2)
        os.killpg(int(pid_file.read_text()), signal.SIGKILL)

    killer = threading.Thread(target=kill_the_stage)
    killer.start()
    code, printed = launched(tmp_path)
    killer.join()
    assert code == 1 and "FAILED: train (StageFailed: exit status -9)" in printed
    code, printed = launched(tmp_path)
    assert code == 0 and "started: train" in printed
    assert (tmp_path / "done.txt").read_text() == "started\nresumed\n"
    assert "Data and pipelines are up to date." in run("dvc", "status").stdout


def test_a_second_signal_while_the_jobs_are_cancelled_cancels_them_all(tmp_path):
    """#69: `timeout 60 make converge` said "cancelled 1 job(s)" while the training went on: make passed a second
    SIGTERM on, which cut the cancelling short. The handlers the loop set are gone once it has returned."""
    class Job:
        cancelled = False

        def done(self):
            return False

        def cancel(self, check=False):
            os.kill(os.getpid(), signal.SIGTERM)  # the second signal, arriving while the first is handled
            self.cancelled = True

    class Pipeline:
        def prepare(self, name):
            os.kill(os.getpid(), signal.SIGTERM)  # the first signal
            return False

    jobs = [Job(), Job()]
    # the process executor's jobs: cancel() is each job's own (a local job's controller is sent SIGTERM instead)
    out = io.StringIO()
    loop = Loop(LaunchConfig(), tmp_path, "process", [], 3, None, Pipeline(), [Stage("c", "true", frozenset())],
                out, None, None)
    loop.running = {f"job{i}": Running(job, i) for i, job in enumerate(jobs)}
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert loop.run() == 130
        assert {signum: signal.getsignal(signum) for signum in before} == before
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    assert [job.cancelled for job in jobs] == [True, True]
    assert out.getvalue().endswith("nmtbench launch: interrupted; cancelled 2 job(s): job0, job1 (a rerun resumes "
                                   "what is missing)\n")


# a job process as submitit runs it: run_stage in the main thread, its stage told to stop by signals in quick
# succession (the group's, the controller's passing it on, the launcher's cancel); it prints how the job ended
BOMBARDED_JOB = """
import sys
from nmtbench.launch.jobs import run_stage
try:
    run_stage(sys.argv[1], ".", "stage.log", {})
except Exception as error:
    print(f"{type(error).__name__}: {error}")
"""


@pytest.mark.slow
def test_a_job_told_to_stop_many_times_stops_its_stage_and_ends_failed(tmp_path):
    """A signal's handler raised KeyboardInterrupt, which could strike inside Popen.wait while it held the Popen's
    lock: the job's last wait then waited on it for ever (about one signal to a launcher's group in twenty)."""
    (tmp_path / "graceful.py").write_text(GRACEFUL)
    (tmp_path / "job.py").write_text(BOMBARDED_JOB)
    job = subprocess.Popen([sys.executable, "job.py", f"{sys.executable} graceful.py"], cwd=tmp_path,
                           env=pipeline_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not (tmp_path / "slow.pid").is_file() or not (tmp_path / "slow.pid").read_text().endswith("\n"):
        assert job.poll() is None
        time.sleep(0.05)
    for _ in range(200):
        if job.poll() is not None:
            break
        job.send_signal(signal.SIGTERM)
        time.sleep(0.002)
    printed, errors = job.communicate(timeout=30)
    assert (printed, errors) == ("StageFailed: stopped by SIGTERM\n", "")
    assert (tmp_path / "stopped.txt").read_text() == "stopped\n"


def test_a_stop_that_comes_while_the_stage_starts_stops_it(tmp_path, monkeypatch):
    """The signal lands after the stage's process exists and before the handler knows of it."""
    from nmtbench.launch import jobs

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("run_stage sets its handlers only in the main thread")
    started = jobs.start_stage

    def start_and_be_told(*args):
        process = started(*args)
        os.kill(os.getpid(), signal.SIGTERM)
        return process

    monkeypatch.setattr(jobs, "start_stage", start_and_be_told)
    began = time.monotonic()
    with pytest.raises(jobs.StageFailed, match="^stopped by SIGTERM$"):
        jobs.run_stage("sleep 60", str(tmp_path), str(tmp_path / "stage.log"), {})
    assert time.monotonic() - began < 30


def test_a_second_launch_in_one_workspace_refuses_in_one_line(tmp_path):
    lock = tmp_path / "launch.lock"
    lock.write_text(f"{os.getppid()}\n")  # a live process: pytest's parent
    with pytest.raises(ConfigError, match=rf"^another nmtbench launch \(pid {os.getppid()}\) is running in this "
                                          rf"workspace; wait for it or stop it \(kill {os.getppid()}\), then rerun$"):
        with LaunchLock(lock):
            pass
    lock.write_text("999999999\n")  # no such process: a launcher killed without cleaning up
    with LaunchLock(lock):
        assert lock.read_text() == f"{os.getpid()}\n"
    assert not lock.exists()


@pytest.mark.parametrize("slot, gpus, per_job, expected", [
    (0, ["0", "1"], 0, None),  # no GPUs handed out: the job inherits the launcher's
    (0, ["0", "1", "2", "3"], 1, ["0"]),
    (3, ["0", "1", "2", "3"], 1, ["3"]),
    (5, ["0", "1", "2", "3"], 1, ["1"]),  # packed: the second job on GPU 1
    (1, ["0", "1", "2", "3"], 2, ["2", "3"]),
    (1, ["4", "6"], 1, ["6"]),  # the launcher's own CUDA_VISIBLE_DEVICES, kept
])
def test_each_slot_sees_its_own_gpus(slot, gpus, per_job, expected):
    assert slot_gpus(slot, gpus, per_job) == expected


def test_a_preferred_stage_brings_its_upstream_forward():
    # a fresh workspace: nmtbench converge prefers lstm's train and evaluate; their tune stage, named nowhere, must
    # start before rnn's, which dvc.yaml lists first
    todo = [Stage("prepare", "", frozenset()),
            Stage("tune@rnn", "", frozenset({"prepare"})), Stage("tune@lstm", "", frozenset({"prepare"})),
            Stage("train@rnn-1", "", frozenset({"tune@rnn"})), Stage("train@lstm-1", "", frozenset({"tune@lstm"})),
            Stage("evaluate@lstm-1", "", frozenset({"train@lstm-1"}))]
    prefer = ["train@lstm-1", "evaluate@lstm-1", "train@rnn-1"]
    assert preference_ranks(todo, prefer) == {"train@lstm-1": 0, "evaluate@lstm-1": 1, "train@rnn-1": 2,
                                              "tune@lstm": 0, "tune@rnn": 2, "prepare": 0}
    ordered = sorted(todo, key=lambda stage: preference_ranks(todo, prefer).get(stage.name, len(prefer)))
    assert [stage.name for stage in ordered] == ["prepare", "tune@lstm", "train@lstm-1", "evaluate@lstm-1",
                                                 "tune@rnn", "train@rnn-1"]


def test_jobs_at_once_are_bounded_by_the_gpus():
    gpus = ["0", "1", "2", "3"]
    assert local_slots(LaunchConfig(jobs=16, gpus_per_job=1, jobs_per_gpu=2), gpus) == 8
    assert local_slots(LaunchConfig(jobs=3, gpus_per_job=1, jobs_per_gpu=2), gpus) == 3
    assert local_slots(LaunchConfig(jobs=16, gpus_per_job=2), gpus) == 2
    assert local_slots(LaunchConfig(jobs=16), []) == 16
    with pytest.raises(ConfigError, match=r"^launch.gpus_per_job: 1, but this machine shows 0 GPU\(s\); set it to 0"):
        local_slots(LaunchConfig(gpus_per_job=1), [])


def test_a_ddp_training_is_one_slurm_job_of_nodes_x_devices_tasks():
    cfg, ddp = LaunchConfig(gpus_per_job=1), TrainConfig(accelerator="gpu", devices=4, num_nodes=2, strategy="ddp")
    assert slurm_tasks("train@transformer-42", cfg, ddp) == {"nodes": 2, "tasks_per_node": 4, "gpus_per_node": 4}
    assert slurm_tasks("evaluate@transformer-42", cfg, ddp) == {"nodes": 1, "tasks_per_node": 1, "gpus_per_node": 1}
    assert slurm_tasks("train@transformer-42", cfg, TrainConfig()) == {"nodes": 1, "tasks_per_node": 1,
                                                                       "gpus_per_node": 1}
    assert slurm_tasks("train@cnn-1", cfg, TrainConfig(devices=2, strategy="ddp"))["gpus_per_node"] == 0  # CPU


def test_threads_and_devices_of_a_job():
    assert threads_per_job(LaunchConfig(jobs=2), cores=8) == 4
    assert threads_per_job(LaunchConfig(jobs=16), cores=8) == 1
    assert threads_per_job(LaunchConfig(jobs=2, threads_per_job=3), cores=8) == 3
    assert job_env(2, ["1", "3"]) == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "1,3"}
    assert job_env(1, []) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    # none handed out (gpus_per_job 0), or SLURM setting a job's GPUs itself: the job inherits what it is given
    assert "CUDA_VISIBLE_DEVICES" not in job_env(1, slot_gpus(0, ["0"], 0))
    assert "CUDA_VISIBLE_DEVICES" not in job_env(1, None)


@pytest.mark.parametrize("launch_block, message", [
    ({"executor": "ray"}, "launch.executor: 'ray' is not valid; choose one of auto, local, slurm"),
    ({"jobs": 0}, "launch.jobs: must be > 0, got 0"),
    ({"gpus_per_job": 2, "jobs_per_gpu": 2}, "launch.jobs_per_gpu: 2 jobs share a GPU only with gpus_per_job 1, "
                                             "got 2; set gpus_per_job: 1 or jobs_per_gpu: 1"),
    ({"slurm": {"queue": "x"}}, "launch.slurm: unknown key(s) queue; valid keys are partition, time_min"),
    ({"slurm": {"extra": ["--qos=high"]}}, "launch.slurm.extra: expected dict, got ['--qos=high']"),
])
def test_bad_launch_blocks_are_refused_in_one_line(launch_block, message):
    raw = yaml.safe_load(Path("params.yaml").read_text())
    raw["launch"] = launch_block
    with pytest.raises(ConfigError) as error:
        parse_params(raw)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_no_stage_depends_on_the_launch_block():
    """Changing how the grid runs must not rerun it."""
    stages = yaml.safe_load(Path("dvc.yaml").read_text())["stages"]
    assert not [name for name, stage in stages.items()
                if any(str(param).split(".")[0] == "launch" for param in stage.get("params", []))]


@pytest.mark.slow
def test_slurm_jobs_are_submitted_with_the_launch_blocks_flags(tmp_path, monkeypatch):
    """No SLURM here: sbatch, srun and sacct stand-ins run each job locally and keep what was submitted."""
    bin_dir, submitted = fake_slurm(tmp_path / "slurm")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    run = toy_project(tmp_path / "project")
    cfg = LaunchConfig(executor="auto", jobs=2, threads_per_job=3, gpus_per_job=1, slurm=SlurmConfig(
        partition="gpu", time_min=30, account="nmt", mem_gb=4, extra={"qos": "high"}))
    code, printed = launched(tmp_path / "project", cfg)
    assert code == 0, printed
    assert "4 stage(s) to check, 2 slurm job(s) at once" in printed
    scripts = sorted(submitted.glob("*.sbatch"))
    assert len(scripts) == 4  # one job per stage
    flags = {line for line in scripts[0].read_text().splitlines() if line.startswith("#SBATCH")}
    assert {"#SBATCH --partition=gpu", "#SBATCH --time=30", "#SBATCH --account=nmt", "#SBATCH --cpus-per-task=3",
            "#SBATCH --mem=4GB", "#SBATCH --qos=high", "#SBATCH --gpus-per-node=1", "#SBATCH --nodes=1"} <= flags
    assert "Data and pipelines are up to date." in run("dvc", "status").stdout
    assert (tmp_path / "project/b1.txt").read_text() == "a\n1 3\n"


def test_launch_has_help_and_refuses_a_bad_jobs_count_in_one_line(capsys):
    with pytest.raises(SystemExit) as done:
        main(["launch", "--help"])
    assert done.value.code == 0 and "--jobs JOBS" in capsys.readouterr().out
    assert main(["launch", "--jobs", "0"]) == 2
    assert capsys.readouterr().err == "nmtbench launch: error: --jobs: must be at least 1, got 0\n"
    assert main(["launch", "--threads", "0"]) == 2
    assert capsys.readouterr().err == "nmtbench launch: error: --threads: must be at least 1, got 0\n"
