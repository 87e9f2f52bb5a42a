#!/usr/bin/env bash
# The first run on a GPU machine without network (make gpu-check; the call plan: docs/gpu.md). From the checkout's
# root, with the carried folder .gpu-bundle (make gpu-bundle) beside the code:
#   tools/gpu_check.sh [part ...]    parts, in priority order (default: all five)
#     setup      install the carried wheels into the machine's python3 (its torch untouched), check torch sees the GPU
#     tests      pytest -m gpu: the GPU lane
#     published  the papers' setting: the published small Transformer and attention GRU on their recipes and the
#                grid's attention LSTM, at once, to early stopping (profiles/gpu_published.yaml), then beam 5 on
#                both test sets on the GPU
#     probe      1, 4 and 8 trainings at once: target tokens/s per job and for the GPU, GPU memory
#     grid       every model of params.yaml to early stopping (profiles/gpu_converge.yaml), packed as the probe chose
# Each part runs under its own time limit (GPU_<PART>_SECONDS), cut further so the whole ends within
# GPU_CHECK_SECONDS of the start; a part that fails does not stop the next, but a failed setup stops all.
# Everything lands under $OUT as it goes: summary.txt (a line per part, appended at once) and <part>.tar.gz
# (logs, metrics, translations, tables, plots; no checkpoints), written when the part ends, cut short or not.
# GPU_CHECK_CPU=1 runs it on the CPU at tiny sizes (tools/gpu_rehearse.sh: the rehearsal, no GPU checked).
set -uo pipefail  # not -e: one part failing must leave the others their turn
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
# the checkout's code runs, not the carried wheel's copy of it: a fix made between two calls needs no new folder
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
BUNDLE=${GPU_BUNDLE:-$ROOT/.gpu-bundle}
WORK=${GPU_CHECK_WORK:-$ROOT/runs/gpu-check}  # each part's folder, packed into $OUT when it ends
OUT=${OUT:-$WORK/out}
CPU=${GPU_CHECK_CPU:-0}
STARTED=$(date +%s)
if [ "$CPU" = 1 ]; then
  WHOLE=${GPU_CHECK_SECONDS:-1800}  # two shared cores: the limits are the CPU's, the sizes tiny
  declare -A LIMIT=([setup]=300 [tests]=300 [published]=340 [probe]=200 [grid]=600)
  PROBE_LEVELS=${GPU_PROBE_LEVELS:-1 2}
  PROBE_TRAIN_SECONDS=10
  # starting tune@ and train@ took up to 90 s on two shared cores, evaluating 70 s; the grid is one model of each
  # family, 2 at once whatever the probe says, so the rehearsal runs the packing
  CPU_PROFILE=(--profile profiles/gpu_rehearsal.yaml --tiny-models profiles/smoke.yaml --startup-seconds 120)
  EVALUATE_ALLOWANCE=(--evaluate-seconds 120)
  GPU_GRID_JOBS=${GPU_GRID_JOBS:-2}
  GPU_GRID_MODELS=${GPU_GRID_MODELS:-transformer lstm_attention_general cnn decoder_only}
else
  WHOLE=${GPU_CHECK_SECONDS:-560}  # a 600-second call, with time to pack the last part
  declare -A LIMIT=([setup]=60 [tests]=200 [published]=240 [probe]=150 [grid]=480)
  PROBE_LEVELS=${GPU_PROBE_LEVELS:-1 4 8}
  PROBE_TRAIN_SECONDS=15
  CPU_PROFILE=()
  EVALUATE_ALLOWANCE=()
fi
for part in setup tests published probe grid; do  # GPU_TESTS_SECONDS=200 and the like override a limit
  override=GPU_${part^^}_SECONDS
  LIMIT[$part]=${!override:-${LIMIT[$part]}}
done
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(setup tests published probe grid)
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
  # and the machine's CUDA stack first of all
  local pins=$WORK/setup/installed-pins.txt
  installed_against_carried pins >"$pins"
  "$PY" -m pip install --no-index --find-links "$BUNDLE/wheels" -c "$pins" -r "$BUNDLE/requirements.txt" \
    || { echo "setup: pip could not meet every requirement with the machine's versions; installing the carried" \
              "wheels of what the machine lacks, without their dependencies"
         installed_against_carried missing | xargs "$PY" -m pip install --no-index --no-deps; }
  # the project, without dependencies: its pins (a CPU torch among them) are this checkout's, not the machine's;
  # it gives the package's metadata, while PYTHONPATH puts the checkout's src first
  "$PY" -m pip install --no-index --no-deps --force-reinstall "$BUNDLE"/wheels/nmtbench-*.whl
}

check_machine() {
  "$PY" - "$CPU" <<'EOF'
import importlib.metadata as metadata, sys
import torch
names = ["torch", "lightning", "pydantic", "datasets", "optuna", "sacremoses", "sacrebleu", "sentencepiece", "numpy",
         "pyarrow", "nmtbench"]
print("versions: " + ", ".join(f"{name} {metadata.version(name)}" for name in names))
import nmtbench.cli, nmtbench.training.train, nmtbench.evaluation.evaluate, nmtbench.evaluation.compare  # noqa
print(f"nmtbench code from {nmtbench.__path__[0]}")
if sys.argv[1] == "1":
    print("CPU rehearsal: no GPU checked")
    sys.exit()
if not torch.cuda.is_available():
    sys.exit("setup: torch sees no CUDA GPU")
props = torch.cuda.get_device_properties(0)
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
print(f"GPU: {props.name}, {props.total_memory / 2**30:.0f} GiB, capability {props.major}.{props.minor}, "
      f"{props.multi_processor_count} SMs, bf16 {torch.cuda.is_bf16_supported()}, CUDA {torch.version.cuda}, "
      f"bf16 matmul finite: {bool((x @ x).isfinite().all())}")
EOF
}

part_setup() {
  mkdir -p "$WORK/setup"
  { uname -a; nproc; free -g | head -2; command -v nvidia-smi >/dev/null && nvidia-smi; "$PY" --version; } \
    >"$WORK/setup/machine.txt" 2>&1
  [ -f "$BUNDLE/requirements.txt" ] || { echo "setup: no carried folder at $BUNDLE (make gpu-bundle)"; return 1; }
  install_carried && check_machine
}

part_tests() {
  # only the files holding GPU tests: a test file importing what was not carried (dvc, wandb) must not stop
  # the collection
  local files
  files=$(grep -l "mark.gpu\|pytest.mark.gpu" tests/test_*.py)
  WANDB_MODE=disabled "$PY" -m pytest -m gpu -p no:cacheprovider -q --continue-on-collection-errors \
    --junitxml="$WORK/tests/junit.xml" $files
}

part_published() {
  "$PY" tools/gpu_runs.py grid "$WORK/published" --profile profiles/gpu.yaml --profile profiles/published.yaml \
    --profile profiles/gpu_published.yaml "${CPU_PROFILE[@]}" "${EVALUATE_ALLOWANCE[@]}" \
    --tokenized "$BUNDLE/corpora/published/tokenized" --seconds "$(($1 - 10))"
}

part_probe() {
  "$PY" tools/gpu_runs.py probe "$WORK/probe" --profile profiles/gpu.yaml --profile profiles/gpu_converge.yaml \
    "${CPU_PROFILE[@]}" --tokenized "$TOKENIZED" --levels $PROBE_LEVELS --train-seconds "$PROBE_TRAIN_SECONDS"
}

part_grid() {
  local chosen=()  # GPU_GRID_JOBS, else the probe's choice, else every run at once
  [ -f "$WORK/probe/probe.json" ] && chosen=(--jobs-from "$WORK/probe/probe.json")
  [ -n "${GPU_GRID_JOBS:-}" ] && chosen=(--jobs "$GPU_GRID_JOBS")
  [ -n "${GPU_GRID_MODELS:-}" ] && chosen+=(--models $GPU_GRID_MODELS)  # default: every model of params.yaml
  "$PY" tools/gpu_runs.py grid "$WORK/grid" --profile profiles/gpu.yaml --profile profiles/gpu_converge.yaml \
    "${CPU_PROFILE[@]}" "${EVALUATE_ALLOWANCE[@]}" --tokenized "$TOKENIZED" --seconds "$(($1 - 10))" "${chosen[@]}"
}

say "gpu_check: parts ${PARTS[*]}; $( [ "$CPU" = 1 ] && echo "CPU rehearsal" || echo GPU), ${WHOLE} s in all;" \
    "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
for part in "${PARTS[@]}"; do
  seconds=$(limit_of "$part")
  if [ "$seconds" -lt 30 ]; then
    say "$part: not run, ${seconds} s left"
    continue
  fi
  rm -rf "${WORK:?}/$part"
  mkdir -p "$WORK/$part"
  begun=$(date +%s)
  # the part's output goes to the terminal and to its log; timeout ends the whole process group at the limit
  settings=$(declare -p PY BUNDLE WORK CPU TOKENIZED PROBE_LEVELS PROBE_TRAIN_SECONDS CPU_PROFILE EVALUATE_ALLOWANCE \
    GPU_GRID_JOBS GPU_GRID_MODELS 2>/dev/null)
  timeout -k 10 "$seconds" bash -c "$(declare -f); $settings; part_$part $seconds" 2>&1 | tee "$WORK/$part/part.log"
  status=${PIPESTATUS[0]}
  took=$(($(date +%s) - begun))
  case $status in
    0) say "$part: passed (${took} s of ${seconds})" ;;
    124|137) say "$part: CUT at its limit of ${seconds} s; what it had is in $part.tar.gz" ;;
    *) say "$part: FAILED, exit ${status} (${took} s); the end of its log:"
       tail -n 15 "$WORK/$part/part.log" | sed 's/^/    /' | tee -a "$SUMMARY" ;;
  esac
  # the lines that matter: versions and GPU, the tests' count, each run's scores and any stage that failed
  grep -E "^(versions|nmtbench code|GPU|CPU rehearsal)|passed|failed|FAILED|skipped|error|jobs per GPU|at once|[0-9]: .*\|" \
    "$WORK/$part/part.log" | grep -v "^  done" | tail -n 25 | sed 's/^/    /' >>"$SUMMARY"
  pack "$part"
  if [ "$part" = setup ] && [ "$status" != 0 ]; then
    say "setup failed: nothing else can run"
    exit 1
  fi
done
say "gpu_check: done in $(elapsed) s"
