"""`nmtbench warm -- <command>`: every `nmtbench` stage that <command> runs is forked from one interpreter that
imported torch, Lightning, datasets and the stages' modules once, so a stage starts in a fraction of a second instead
of paying those imports again (docs/pipeline.md, "Warm stages"). make repro and make smoke run dvc repro under it.

While <command> runs, NMTBENCH_WARM names a Unix socket. An `nmtbench` command started under it (DVC runs each stage
as one) hands the warm interpreter its arguments, folder, environment and standard input, output and error, and
exits with the status of the copy forked to run it: the copy writes where the command would, a signal sent to the
command is passed on to the copy, and the copy is stopped if the command goes. A command the interpreter cannot stand
in for runs in its own process as before: where the code, the Python or an environment variable the libraries read
when they are imported (thread counts, devices, caches) differ from the interpreter's, or where it has gone.

Forking a process that holds torch is what PyTorch's DataLoader does for its workers on Linux. The warm interpreter
does no tensor work itself, so no thread pool or device has started when it forks: a forked stage trains, decodes and
scores exactly as a stage of its own process does (docs/results/2026-12-02-warm-stages-cpu.md).
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import importlib.metadata
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from nmtbench import stage_times

ENV = "NMTBENCH_WARM"
# what the stages import, the heaviest first; each is skipped where it is not installed (the GPU machine's Python
# has no datasets). Not W&B: it makes its media folders when imported, which the first copy to end would delete
# for every later one.
PRELOAD = ("torch", "lightning.pytorch", "datasets", "sacrebleu", "nmtbench.training.train",
           "nmtbench.training.tuning", "nmtbench.evaluation.evaluate", "nmtbench.decoding.translator",
           "nmtbench.evaluation.beam_sweep", "nmtbench.analysis.analyze", "nmtbench.data.prepare",
           "nmtbench.data.tokenizer", "nmtbench.evaluation.compare", "nmtbench.evaluation.report")
# prefixes of the variables libraries read when they are imported: a command run with other values than the warm
# interpreter's runs in its own process
IMPORT_TIME_ENV = ("OMP_", "MKL_", "KMP_", "OPENBLAS_", "CUDA_", "NCCL_", "PYTORCH_", "TORCH", "LD_", "PYTHON",
                   "HF_", "WANDB_", "MPLBACKEND")
Main = Callable[[list[str]], int]


def available() -> bool:
    """Forking and handing over file descriptors as this module does: Linux 5.3 on."""
    if sys.platform != "linux" or not hasattr(socket, "send_fds"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


def fingerprint() -> str:
    """The code and the import-time settings a command runs with: a warm copy serves only a command whose
    fingerprint is its own."""
    package = Path(__file__).parent
    files = sorted((str(path.relative_to(package)), path.stat().st_mtime_ns, path.stat().st_size)
                   for path in package.rglob("*.py"))
    settings = sorted((name, value) for name, value in os.environ.items() if name.startswith(IMPORT_TIME_ENV))
    return hashlib.sha256(json.dumps([sys.executable, sys.version, files, settings]).encode()).hexdigest()


def run(command: Sequence[str], main: Main | None = None, preload: Sequence[str] = PRELOAD) -> int:
    """Run command with a warm interpreter serving its `nmtbench` commands; its exit status. Where one serves
    already (a nested call) or none can, command runs plainly."""
    if os.environ.get(ENV) or not available():
        return subprocess.call(list(command))
    folder = tempfile.mkdtemp(prefix="nmtbench-warm-")
    path = os.path.join(folder, "socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)  # a command that connects while the interpreter still imports waits its turn here
    server = os.fork()
    if server == 0:
        code = 1
        try:
            serve(listener, main, preload, parent=os.getppid())
            code = 0
        finally:
            os._exit(code)
    listener.close()
    try:
        return subprocess.call(list(command), env={**os.environ, ENV: path})
    finally:
        os.kill(server, signal.SIGTERM)
        os.waitpid(server, 0)
        shutil.rmtree(folder, ignore_errors=True)


def serve(listener: socket.socket, main: Main | None, preload: Sequence[str], parent: int) -> None:
    """Import preload, then fork a copy for each command that connects, until the process that started this one
    ends. The copy's exit status goes back to its command; a signal from the command goes on to the copy."""
    mine = fingerprint()  # before the imports, some of which set variables of their own
    for name in preload:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    if main is None:  # what the `nmtbench` executable runs, found as it finds it: the package's console script
        main = importlib.metadata.entry_points(group="console_scripts", name="nmtbench")["nmtbench"].load()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    while os.getppid() == parent:
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj is listener:
                _start(listener, selector, main, mine)
            elif key.data[0] == "copy":  # a copy ended: its status to its command
                _, pid, conn = key.data
                selector.unregister(key.fileobj)
                os.close(key.fd)
                status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                with contextlib.suppress(OSError):
                    conn.send(json.dumps({"exit": status}).encode())
                with contextlib.suppress(KeyError, ValueError):
                    selector.unregister(conn)
                conn.close()
            else:  # the command sent a signal's number, or went (b"")
                _, pid = key.data
                sent = key.fileobj.recv(16)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, int(sent) if sent else signal.SIGTERM)
                if not sent:
                    selector.unregister(key.fileobj)


def _start(listener: socket.socket, selector: selectors.BaseSelector, main: Main, mine: str) -> None:
    conn, _ = listener.accept()
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    request = json.loads(message)
    if request["fingerprint"] != mine:
        for fd in fds:
            os.close(fd)
        conn.send(json.dumps({"refused": "the code or the import-time settings differ"}).encode())
        conn.close()
        return
    sys.stdout.flush()  # nothing of this interpreter's reaches the command's output
    sys.stderr.flush()
    with warnings.catch_warnings():  # Python's warning about forking with threads: see the module's docstring
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the copy ends here whatever its command does: it never returns into this loop
        code = 1
        try:
            code = _run_copy(request, fds, main, {listener.fileno(), conn.fileno(), selector.fileno(),
                                                  *selector.get_map()})
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    selector.register(os.pidfd_open(pid), selectors.EVENT_READ, ("copy", pid, conn))
    selector.register(conn, selectors.EVENT_READ, ("command", pid))
    conn.send(json.dumps({"pid": pid}).encode())


def _run_copy(request: dict, fds: list[int], main: Main, inherited: set[int]) -> int:
    """In the forked copy: become the command (its descriptors, folder, environment and arguments) and run it.
    The interpreter's sockets are closed here, so the command sees the interpreter go if it does."""
    for fd in inherited:
        os.close(fd)
    for target, fd in zip(request["fds"], fds):
        os.dup2(fd, target)
        os.close(fd)
    for closed in {0, 1, 2} - set(request["fds"]):
        os.close(closed)
    sys.stdout.reconfigure(line_buffering=os.isatty(1))  # as the command's own interpreter would buffer
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["argv0"], *request["argv"]]
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stage_times.handed_over(request["started"])
    try:
        code = main(request["argv"])
    except SystemExit as stop:  # argparse's --help and usage errors
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, (int, type(None))):
            print(stop.code, file=sys.stderr)
    except BaseException:  # what the command does not expect: its traceback and status 1, as Python ends
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # what ending the interpreter would run (W&B's, tempfile's); os._exit skips them
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def forward(argv: list[str]) -> int | None:
    """Run this command in a copy of the warm interpreter NMTBENCH_WARM names; its exit status, or None where it has
    to run here (none named, gone, or serving other code or settings)."""
    path = os.environ.get(ENV)
    if not path or not available() or argv[:1] == ["warm"]:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with conn:
        fds = [fd for fd in (0, 1, 2) if _is_open(fd)]
        request = {"fingerprint": fingerprint(), "argv": argv, "argv0": sys.argv[0], "cwd": os.getcwd(),
                   "env": dict(os.environ), "fds": fds, "started": stage_times.process_seconds()}
        try:
            conn.connect(path)
            socket.send_fds(conn, [json.dumps(request).encode()], fds)
            answer = json.loads(conn.recv(4096) or b'{"refused": "gone"}')
        except OSError:
            return None
        if "refused" in answer:
            return None
        passed: list[int] = []

        def pass_on(signum, _frame):
            passed.append(signum)
            with contextlib.suppress(OSError):
                conn.send(str(signum).encode())

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, pass_on)
        ended = conn.recv(4096)
    if not ended:  # the warm interpreter went first (killed with the make that started it)
        print("nmtbench: the warm interpreter running this command ended before it; rerun it", file=sys.stderr)
        return 128 + passed[-1] if passed else 1
    status = json.loads(ended)["exit"]
    return status if status >= 0 else 128 - status  # a copy ended by a signal, as a shell reports it


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True
