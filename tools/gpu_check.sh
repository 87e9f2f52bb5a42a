#!/usr/bin/env bash
# The first run on a GPU machine without network (make gpu-check; the plan of two calls: docs/gpu.md). From the
# checkout's root, with the carried folder .gpu-bundle (make gpu-bundle, then make gpu-commit before each call):
#   GPU_CALL=1 tools/gpu_check.sh     the first call, 525 s: setup, tests, grid
#   GPU_CALL=2 GPU_CHECK_SECONDS=<the device time left less 40> tools/gpu_check.sh
#                                     the second, straight after on the still warm machine: setup, more (the grid's
#                                     runs its budget stopped go on)
#   tools/gpu_check.sh part ...       these parts in this order, in GPU_CALL's time (default: the first call)
# The parts:
#   setup      install the carried wheels into the machine's python3 (its torch untouched; where its packages are
#              read-only, into a folder put on PYTHONPATH), check torch sees the GPU
#   tests      pytest -m gpu: the GPU lane, each test under its own timeout
#   grid       every model of params.yaml to early stopping (profiles/gpu_converge.yaml), GPU_GRID_JOBS at once
#              (GPU_GRID_MODELS: only these; GPU_GRID_SEEDS="42 43 44": each with these seeds;
#              GPU_GRID_SET="train.early_stopping_patience=6 ...": these params changed, e.g. to check patience)
#   published  the papers' setting: the published small Transformer and attention GRU on their own recipes, at
#              once, to their own stopping (profiles/gpu_published.yaml), then beam 5 on both test sets on the GPU
#   more       the grid part's runs that their time budget stopped before early stopping, on the same machine in a
#              later call, given this call's time: they go on from their last checkpoints (nmtbench gpu timed-grid-more);
#              its log and tarball are the grid's
#   probe      1, 4 and 8 trainings at once: target tokens/s per job and for the GPU, GPU memory; in neither call
#              (it would eat the grid's time), it measures GPU_GRID_JOBS when a call has minutes to spare
# Each part runs under its own time limit (GPU_<PART>_SECONDS), cut further so the whole ends within
# GPU_CHECK_SECONDS of the start; a part that fails does not stop the next, but a failed setup stops all.
# Everything lands under $OUT as it goes: summary.txt (a line per part, appended at once) and <part>.tar.gz
# (logs, metrics, translations, tables, plots; no checkpoints), written when the part ends, cut short or not.
# GPU_CHECK_CPU=1 runs it on the CPU at tiny sizes (tools/gpu_rehearse.sh: the rehearsal, no GPU checked).
set -uo pipefail  # not -e: one part failing must leave the others their turn
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
BUNDLE=${GPU_BUNDLE:-$ROOT/.gpu-bundle}
WORK=${GPU_CHECK_WORK:-$ROOT/runs/gpu-check}  # each part's folder, packed into $OUT when it ends
OUT=${OUT:-$WORK/out}
CPU=${GPU_CHECK_CPU:-0}
CALL=${GPU_CALL:-1}
# where the machine's packages are read-only, setup installs the carried ones here (GPU_PIP_TARGET forces it)
SITE=${GPU_PIP_TARGET:-$WORK/site-packages}
MACHINE_PYTHONPATH=${PYTHONPATH:-}
# there is no .git on the GPU machine: the commit every result records comes from the carried folder's COMMIT
export NMTBENCH_COMMIT_FILE=$BUNDLE/COMMIT
STARTED=$(date +%s)
case $CALL in
  1) CALL_PARTS=(setup tests grid); CALL_SECONDS=525 ;;  # a call of at most 9 minutes, with time to return $OUT
  2) CALL_PARTS=(setup more); CALL_SECONDS=220 ;;        # 15 minutes less a start, the first call and a margin
  *) echo "gpu_check: GPU_CALL=$CALL: expected 1 (setup tests grid) or 2 (setup more)" >&2; exit 2 ;;
esac
if [ "$CPU" = 1 ]; then
  WHOLE=${GPU_CHECK_SECONDS:-1800}  # two shared cores: the limits are the CPU's, the sizes tiny
  declare -A LIMIT=([setup]=300 [tests]=300 [grid]=600 [more]=600 [published]=400 [probe]=200)
  PROBE_LEVELS=${GPU_PROBE_LEVELS:-1 2}
  PROBE_TRAIN_SECONDS=10
  # starting tune@ and train@ took up to 90 s on two shared cores, evaluating 70 s; the grid is one model of each
  # family, 2 at once, so the rehearsal runs the packing
  # (a CPU shared with other work needs more: GPU_STARTUP_SECONDS and GPU_EVALUATE_SECONDS set them)
  STARTUP_ALLOWANCE=(--startup-seconds "${GPU_STARTUP_SECONDS:-120}")
  CPU_PROFILE=(--profile profiles/gpu_rehearsal.yaml --tiny-models profiles/smoke.yaml "${STARTUP_ALLOWANCE[@]}")
  EVALUATE_ALLOWANCE=(--evaluate-seconds "${GPU_EVALUATE_SECONDS:-120}")
  GRID_JOBS=${GPU_GRID_JOBS:-2}
  GPU_GRID_MODELS=${GPU_GRID_MODELS:-transformer lstm_attention_general cnn decoder_only}
else
  WHOLE=${GPU_CHECK_SECONDS:-$CALL_SECONDS}
  # setup: a cold machine installs the carried wheels, imports a CUDA torch from a cold disk and starts CUDA;
  # a cut setup loses the whole call, and what it leaves unused goes to the next part (docs/gpu.md). The grid
  # and published parts take the rest of the call.
  # tests: the first GPU run's 90 s ran 17 of the 28 tests (setup then took 37 s of its 180)
  declare -A LIMIT=([setup]=180 [tests]=150 [grid]=600 [more]=600 [published]=600 [probe]=150)
  PROBE_LEVELS=${GPU_PROBE_LEVELS:-1 4 8}
  PROBE_TRAIN_SECONDS=15
  CPU_PROFILE=()
  STARTUP_ALLOWANCE=()
  EVALUATE_ALLOWANCE=()
  GRID_JOBS=${GPU_GRID_JOBS:-9}  # fixed ahead, no probe in the call: 17 runs in two waves, of 9 and 8
fi
for part in setup tests grid more published probe; do  # GPU_TESTS_SECONDS=120 and the like override a limit
  override=GPU_${part^^}_SECONDS
  LIMIT[$part]=${!override:-${LIMIT[$part]}}
done
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=("${CALL_PARTS[@]}")
for part in "${PARTS[@]}"; do
  [ -n "${LIMIT[$part]:-}" ] || { echo "gpu_check: no part '$part': expected setup, tests, grid, more, published or probe" >&2
                                   exit 2; }
done
TOKENIZED=$BUNDLE/corpora/default/tokenized  # params.yaml's data; the published part has its own
mkdir -p "$OUT" "$WORK"
SUMMARY=$OUT/summary.txt

say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - STARTED)); }
# a part's limit: its own, or what is left of the whole less 15 s to pack it, whichever is less
limit_of() {
  local left=$((WHOLE - $(elapsed) - 15))
  echo $((LIMIT[$1] < left ? LIMIT[$1] : left))
}
pack() { tar -czf "$OUT/$1.tar.gz" --exclude='*.ckpt' --exclude='unfinished' -C "$WORK" "$1" 2>/dev/null; }
# the checkout's code first, not the carried wheel's copy of it (a fix made between two calls needs no new folder),
# then the carried packages where setup had to install them into SITE
set_pythonpath() {
  PYTHONPATH="$ROOT/src"
  [ -d "$SITE" ] && PYTHONPATH+=":$SITE"
  export PYTHONPATH="$PYTHONPATH${MACHINE_PYTHONPATH:+:$MACHINE_PYTHONPATH}"
}
commit_text() {  # for the summary: the carried COMMIT's (a copied tree's .git can be an older commit's), else git's
  sed -nE 's/.*"commit": "([0-9a-f]{10}).*/\1 (the carried COMMIT)/p' "$NMTBENCH_COMMIT_FILE" 2>/dev/null | grep . \
    || git -C "$ROOT" rev-parse --short HEAD 2>/dev/null \
    || echo unknown
}

installed_against_carried() {
  # pins: name==version of every installed package no carried wheel replaces; missing: the carried wheels of
  # packages not installed at all
  "$PY" - "$1" "$BUNDLE/wheels" <<'EOF'
import importlib.metadata, pathlib, re, sys
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
wheels = {norm(w.name.split("-")[0]): w for w in pathlib.Path(sys.argv[2]).glob("*.whl")}
installed = {norm(d.metadata["Name"]): d for d in importlib.metadata.distributions()}
if sys.argv[1] == "pins":
    print("\n".join(f"{d.metadata['Name']}=={d.version}" for name, d in installed.items() if name not in wheels))
else:
    print("\n".join(str(w) for name, w in wheels.items() if name not in installed and name != "nmtbench"))
EOF
}

install_carried() {
  # pip may change only what a carried wheel replaces: every other installed package is pinned as it is, torch
  # and the machine's CUDA stack first of all. pip sees what is installed, not the checkout's src (where a local
  # build leaves nmtbench.egg-info)
  local PYTHONPATH=$MACHINE_PYTHONPATH into=()
  export PYTHONPATH
  if [ -n "${GPU_PIP_TARGET:-}" ] || ! "$PY" -c 'import os, sys, sysconfig
sys.exit(not os.access(sysconfig.get_path("purelib"), os.W_OK))'; then
    echo "setup: installing into $SITE, put on PYTHONPATH (the machine's packages are read-only, or GPU_PIP_TARGET" \
         "says so)"
    rm -rf "$SITE" && mkdir -p "$SITE" && into=(--target "$SITE")
  fi
  if [ ${#into[@]} = 0 ]; then
    # an earlier call's project would have pip warn of its unmet pins below, an ERROR line in summary.txt that
    # says nothing of the carried packages; it is installed again at the end
    "$PY" -m pip uninstall --yes --quiet nmtbench 2>/dev/null
    local pins=$WORK/setup/installed-pins.txt
    installed_against_carried pins >"$pins"
    "$PY" -m pip install --no-index --find-links "$BUNDLE/wheels" -c "$pins" -r "$BUNDLE/requirements.txt" \
      || { echo "setup: pip could not meet every requirement with the machine's versions; installing the carried" \
                "wheels of what the machine lacks, without their dependencies"
           installed_against_carried missing | xargs "$PY" -m pip install --no-index --no-deps; }
  else  # pip --target ignores what is installed: only the wheels of what the machine lacks, without dependencies
    installed_against_carried missing | xargs "$PY" -m pip install --no-index --no-deps "${into[@]}"
  fi
  # the project, without dependencies: its pins (a CPU torch among them) are this checkout's, not the machine's,
  # and those it leaves unmet (dvc, wandb and the rest no GPU stage imports) are so by design, so no warning of
  # them; it gives the package's metadata, while PYTHONPATH puts the checkout's src first
  "$PY" -m pip install --no-index --no-deps --no-warn-conflicts --force-reinstall "${into[@]}" "$BUNDLE"/wheels/nmtbench-*.whl
}

check_machine() {
  "$PY" - "$CPU" "$BUNDLE/requirements.txt" <<'EOF'
import importlib.metadata as metadata, re, sys, time
began = time.perf_counter()
import torch
imported = time.perf_counter() - began
names = ["torch", "lightning", "pydantic", "datasets", "optuna", "sacremoses", "sacrebleu", "sentencepiece", "numpy",
         "pyarrow", "nmtbench"]
print("versions: " + ", ".join(f"{name} {metadata.version(name)}" for name in names))
carried = [re.split(r"[=<>~ ]", line)[0] for line in open(sys.argv[2]).read().split()]
print("carried, as imported: " + ", ".join(f"{name} {metadata.version(name)} from "
                                           f"{metadata.distribution(name).locate_file('')}" for name in carried))
import nmtbench.cli, nmtbench.training.train, nmtbench.evaluation.evaluate, nmtbench.evaluation.compare  # noqa
from nmtbench.provenance import version_line
print(f"nmtbench code from {nmtbench.__path__[0]}: {version_line()}")  # the commit every result records
if sys.argv[1] == "1":
    print(f"CPU rehearsal: no GPU checked; timing: import torch {imported:.1f} s")
    sys.exit()
if not torch.cuda.is_available():
    sys.exit("setup: torch sees no CUDA GPU")
began = time.perf_counter()
props = torch.cuda.get_device_properties(0)
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
finite = bool((x @ x).isfinite().all())
print(f"GPU: {props.name}, {props.total_memory / 2**30:.0f} GiB, capability {props.major}.{props.minor}, "
      f"{props.multi_processor_count} SMs, bf16 {torch.cuda.is_bf16_supported()}, CUDA {torch.version.cuda}, "
      f"bf16 matmul finite: {finite}; timing: import torch {imported:.1f} s, CUDA's start and a first matmul "
      f"{time.perf_counter() - began:.1f} s")
EOF
}

part_setup() {
  mkdir -p "$WORK/setup"
  { uname -a; nproc; free -g | head -2; command -v nvidia-smi >/dev/null && nvidia-smi; "$PY" --version; } \
    >"$WORK/setup/machine.txt" 2>&1
  [ -f "$BUNDLE/requirements.txt" ] || { echo "setup: no carried folder at $BUNDLE (make gpu-bundle)"; return 1; }
  [ -f "$NMTBENCH_COMMIT_FILE" ] || { echo "setup: no COMMIT in $BUNDLE (make gpu-commit)"; return 1; }
  local began=$SECONDS
  install_carried || return 1
  echo "setup: installed in $((SECONDS - began)) s"
  set_pythonpath
  check_machine
}

part_tests() {
  # only the files holding GPU tests: a test file importing what was not carried (dvc, wandb) must not stop
  # the collection. Each test has its own limit, so one that hangs (an NCCL wait) fails alone with its traceback
  # (-rfE --tb=short, in the part's log) instead of taking the part; a hang in C code, which the timeout's signal
  # cannot interrupt, still gets every thread's stack from faulthandler 10 s later.
  local files per_test=${GPU_TEST_TIMEOUT:-45} bounded=()
  files=$(grep -l "mark.gpu\|pytest.mark.gpu" tests/test_*.py)
  if "$PY" -c "import pytest_timeout" 2>/dev/null; then
    bounded=(--timeout "$per_test")
  else
    echo "tests: no pytest-timeout here: only the part's limit bounds a hung test"
  fi
  # pytest prints failures at the end, which a part cut at its limit never reaches (the first GPU run lost its one
  # failure so): tests/conftest.py writes each failure's traceback to this file as it happens
  NMTBENCH_TEST_FAILURES="$WORK/tests/failures.txt" WANDB_MODE=disabled \
    "$PY" -m pytest -m gpu -p no:cacheprovider -rfE --tb=short --continue-on-collection-errors \
    "${bounded[@]}" -o "faulthandler_timeout=$((per_test + 10))" --junitxml="$WORK/tests/junit.xml" $files
}

part_grid() {
  local models=() seeds=()  # default: every model of params.yaml, its seeds and its params
  [ -n "${GPU_GRID_MODELS:-}" ] && models=(--models $GPU_GRID_MODELS)
  if [ -n "${GPU_GRID_SEEDS:-}" ]; then  # "42 43 44": each model that many times, the beam sweep on the first
    local list=($GPU_GRID_SEEDS)
    seeds=(--set "seeds=[$(IFS=,; echo "${list[*]}")]" --set "beam_sweep.seed=${list[0]}")
  fi
  local pair
  for pair in ${GPU_GRID_SET:-}; do seeds+=(--set "$pair"); done
  "$PY" -m nmtbench gpu timed-grid "$WORK/grid" --profile profiles/gpu.yaml --profile profiles/gpu_converge.yaml \
    "${CPU_PROFILE[@]}" "${EVALUATE_ALLOWANCE[@]}" --tokenized "$TOKENIZED" --seconds "$(($1 - 10))" \
    --jobs "$GRID_JOBS" "${models[@]}" "${seeds[@]}"
}

part_more() {  # the grid's folder, as the grid part left it on this machine
  "$PY" -m nmtbench gpu timed-grid-more "$WORK/grid" "${STARTUP_ALLOWANCE[@]}" "${EVALUATE_ALLOWANCE[@]}" \
    --seconds "$(($1 - 10))" --jobs "$GRID_JOBS"
}

part_published() {
  "$PY" -m nmtbench gpu timed-grid "$WORK/published" --profile profiles/gpu.yaml --profile profiles/published.yaml \
    --profile profiles/gpu_published.yaml "${CPU_PROFILE[@]}" "${EVALUATE_ALLOWANCE[@]}" \
    --tokenized "$BUNDLE/corpora/published/tokenized" --seconds "$(($1 - 10))"
}

part_probe() {  # its chosen_jobs is the GPU_GRID_JOBS to give a later grid
  "$PY" -m nmtbench gpu probe-jobs "$WORK/probe" --profile profiles/gpu.yaml --profile profiles/gpu_converge.yaml \
    "${CPU_PROFILE[@]}" --tokenized "$TOKENIZED" --levels $PROBE_LEVELS --train-seconds "$PROBE_TRAIN_SECONDS"
}

say "gpu_check: parts ${PARTS[*]}; $( [ "$CPU" = 1 ] && echo "CPU rehearsal" || echo GPU), ${WHOLE} s in all;" \
    "commit $(commit_text), $(date -u +%FT%TZ)"
for part in "${PARTS[@]}"; do
  seconds=$(limit_of "$part")
  if [ "$seconds" -lt 30 ]; then
    say "$part: not run, ${seconds} s left"
    continue
  fi
  folder=$part  # where the part works and what it packs; more goes on in the grid's folder
  if [ "$part" = more ]; then
    folder=grid
    [ -d "$WORK/grid/metrics" ] || { say "more: not run, no grid part ran on this machine before"; continue; }
  else
    rm -rf "${WORK:?}/$part"
    mkdir -p "$WORK/$part"
  fi
  begun=$(date +%s)
  set_pythonpath  # setup may have made SITE
  # the part's output goes to the terminal and to its log; timeout ends the whole process group at the limit
  settings=$(declare -p PY BUNDLE WORK CPU SITE ROOT MACHINE_PYTHONPATH TOKENIZED PROBE_LEVELS PROBE_TRAIN_SECONDS \
    CPU_PROFILE STARTUP_ALLOWANCE EVALUATE_ALLOWANCE GRID_JOBS GPU_GRID_MODELS 2>/dev/null)
  timeout -k 10 "$seconds" bash -c "$(declare -f); $settings; part_$part $seconds" 2>&1 | tee -a "$WORK/$folder/part.log"
  status=${PIPESTATUS[0]}
  took=$(($(date +%s) - begun))
  case $status in
    0) say "$part: passed (${took} s of ${seconds})" ;;
    124|137) say "$part: CUT at its limit of ${seconds} s; what it had is in $folder.tar.gz" ;;
    *) say "$part: FAILED, exit ${status} (${took} s); the end of its log:"
       tail -n 15 "$WORK/$folder/part.log" | sed 's/^/    /' | tee -a "$SUMMARY" ;;
  esac
  # the lines that matter: versions, commit, GPU and set-up times, the tests' count and failures, each run's
  # scores and any stage that failed
  grep -E "^(versions|carried|nmtbench code|GPU|CPU rehearsal|setup|tests|compare and report)|passed|failed|FAILED|ERROR|\
skipped|error|Timeout|jobs per GPU|at once|[0-9]: .*\|" "$WORK/$folder/part.log" | grep -v "^\[[0-9]*m[0-9]*s\] " | tail -n 25 \
    | sed 's/^/    /' >>"$SUMMARY"
  pack "$folder"
  if [ "$part" = setup ] && [ "$status" != 0 ]; then
    say "setup failed: nothing else can run"
    exit 1
  fi
done
say "gpu_check: done in $(elapsed) s"
