#!/usr/bin/env bash
# The CPU rehearsal of tools/gpu_check.sh (make gpu-rehearse): the whole script end to end, on the CPU at tiny sizes,
# under the GPU machine's versions, so that a first run on the GPU machine can only fail on GPU matters.
#
# It builds a scratch virtual environment outside the checkout that holds only packages of the GPU machine
# (tools/gpu_machine_packages.txt, at the versions read there): Python 3.12, torch 2.11.0 as PyPI builds it (the
# CUDA 13.0 build the machine has, 2.11.0+cu130, which runs on a CPU once its CUDA libraries are installed beside
# it: about 4.6 GB, downloaded once), lightning 2.6.6 and the rest the stages and tests import. Any other package
# in it is refused, so a package the carried folder lacks fails here as it would there. Then it runs
# tools/gpu_check.sh with GPU_CHECK_CPU=1, which installs the carried folder exactly as on the GPU machine.
#   tools/gpu_rehearse.sh              the plan's two calls, one after the other, into OUT/call1 and OUT/call2
#   tools/gpu_rehearse.sh setup grid   these parts of tools/gpu_check.sh alone (any of its parts), into OUT
# GPU_REHEARSAL_VENV (default /tmp/nmtbench-gpu-machine) and OUT (default /tmp/nmtbench-gpu-rehearsal) move them.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${GPU_REHEARSAL_VENV:-/tmp/nmtbench-gpu-machine}
export OUT=${OUT:-/tmp/nmtbench-gpu-rehearsal}
MACHINE_LIST=$ROOT/tools/gpu_machine_packages.txt

python312() {  # the machine's Python minor version; pyenv's when it is not on PATH (pyenv's shim may be, failing)
  if python3.12 --version >/dev/null 2>&1; then command -v python3.12; return; fi
  local found
  found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null | tail -1)
  [ -n "$found" ] && echo "$found" && return
  echo "gpu_rehearse: no Python 3.12 (the GPU machine's); install one (pyenv install 3.12) or put it on PATH" >&2
  return 1
}

[ -x "$VENV/bin/python" ] || "$(python312)" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
# the versions read on the machine, so pip picks those and not PyPI's newest
pinned=$(mktemp)
grep -E '^[A-Za-z0-9_.-]+==' "$MACHINE_LIST" >"$pinned"
echo 'python-dateutil<3' >>"$pinned"  # 3.0 and later need tzdata, which the machine lacks, so its dateutil is older
"${PIP[@]}" -c "$pinned" torch==2.11.0
# what the stages, the tests and the carried packages import from the machine's own packages
"${PIP[@]}" -c "$pinned" lightning pytorch-lightning torchmetrics sacrebleu sentencepiece numpy pandas pyarrow \
  matplotlib pyyaml tqdm regex click joblib fsspec huggingface-hub filelock packaging psutil requests aiohttp \
  xxhash typing-extensions pytest pytest-timeout pytest-xdist setuptools wheel

rm -f "$pinned"

# trimmed to the machine's packages: one it lacks would hide a gap of the carried folder, and an earlier
# rehearsal's installs would leave nothing for this one's to do
extra=$("$VENV/bin/python" - "$MACHINE_LIST" <<'EOF'
import importlib.metadata
import re
import sys

norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()  # noqa: E731
machine = {norm(re.split(r"[=<>]", line)[0].strip()) for line in open(sys.argv[1])
           if line.strip() and not line.startswith("#")}
print(" ".join(sorted({norm(d.metadata["Name"]) for d in importlib.metadata.distributions()} - machine)))
EOF
)
if [ -n "$extra" ]; then
  echo "gpu_rehearse: removing from the scratch environment what the GPU machine lacks: $extra"
  "$VENV/bin/python" -m pip uninstall --quiet --yes $extra
fi

# pip as on the GPU machine: no index, and no find-links but the carried folder's (this machine's pip
# configuration may name a local wheel folder, which would hide a wheel missing from the carried one)
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL
export PIP_CONFIG_FILE=/dev/null
export GPU_CHECK_CPU=1 PYTHON="$VENV/bin/python"
[ $# -gt 0 ] && exec "$ROOT/tools/gpu_check.sh" "$@"
GPU_CALL=1 OUT=$OUT/call1 "$ROOT/tools/gpu_check.sh"
GPU_CALL=2 OUT=$OUT/call2 "$ROOT/tools/gpu_check.sh"
