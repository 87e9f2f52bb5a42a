# nmtbench: `make help` lists the targets. Every target sets up .venv on first use.
# The pipeline's targets (setup, repro, tune, report, exp, claims) are in tools/pipeline.mk, which every
# workspace's Makefile includes too; the ones below are this checkout's: tests, benchmarks, the smoke run.
include tools/pipeline.mk

SMOKE_DIR ?= runs/smoke
# profiles merged before profiles/smoke.yaml, e.g. PROFILES=profiles/own_corpus.yaml: your corpus at smoke sizes
PROFILES ?=
# JOBS=N: repro and smoke run N stages at once through nmtbench launch (docs/scaling.md); unset, plain dvc repro
JOBS ?=
export JOBS

.DEFAULT_GOAL := help
.PHONY: smoke headline notebook lint test test-e2e chromium postgresql test-fast test-gpu gpu-bundle gpu-check gpu-rehearse gpu-report bench-decode bench-train \
  bench-bf16 bench-data bench-overhead bench-smoke clean-smoke

smoke: $(VENV)/.installed ## the whole pipeline on tiny settings in runs/smoke, leaving your outputs alone (PROFILES=..., JOBS=N)
	nmtbench workspace $(SMOKE_DIR) --force $(foreach profile,$(PROFILES) profiles/smoke.yaml,--profile $(profile))
	$(MAKE) --no-print-directory -C $(SMOKE_DIR) repro

# the converged grid's committed runs (nmtbench converge --export): the README's quality-against-compute picture
CONVERGED ?= docs/results/converged-grid-cpu
headline: $(VENV)/.installed ## the README's picture (val BLEU against training FLOPs), its table and docs/answer.md's, redrawn from the committed converged runs
	nmtbench converge --from $(CONVERGED) --plot $(CONVERGED)/flops.png
	nmtbench converge --from $(CONVERGED) --page README.md
	nmtbench converge --from $(CONVERGED) --page docs/answer.md

notebook: $(VENV)/.installed ## the lecture companion in JupyterLab, on runs/smoke or NMTBENCH_WORKSPACE (docs/notebook.md)
	@$(BIN)/python -c 'import jupyterlab, ipywidgets' 2>/dev/null \
	  || $(PYTHON) tools/uv_install.py $(VENV) --quiet -e '.[notebook]' || $(BIN)/pip install --quiet -e '.[notebook]'
	NMTBENCH_WORKSPACE=$(abspath $(or $(NMTBENCH_WORKSPACE),$(SMOKE_DIR))) jupyter lab examples/lecture_companion.ipynb

lint: $(VENV)/.installed ## ruff on src, tests, benchmarks, tools and examples (style, import order, likely bugs; pyproject.toml [tool.ruff])
	ruff check src tests benchmarks tools examples

# Test files run in parallel, one pytest-xdist worker per core, each file whole on one worker: a module's
# fixtures (the smoke pipeline of test_pipeline.py) are then built once. TEST_WORKERS=0 runs them in one process.
# The longest files start first (tests/conftest.py, LONGEST_FIRST), not xdist's default of the most tests first.
# One torch thread per process (the pipelines' stages inherit it): workers each spinning a thread pool the size
# of the machine wait on each other, and make test-fast took 391 s on 2 cores instead of 131 s.
TEST_WORKERS ?= auto
PYTEST := OMP_NUM_THREADS=1 python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: lint chromium postgresql ## lint, then the unit tests and one real dvc repro: the smoke pipeline (not the e2e lane)
	$(PYTEST) -m "not e2e"

test-e2e: $(VENV)/.installed ## the other real pipelines (marked e2e): other profiles and sources, a launched pair, the GPU script
	$(PYTEST) -m e2e

# The report's browser test needs Chromium: install Debian's package when it is missing and this
# machine allows (root, apt-get); otherwise say so and let that one test skip.
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null \
	  || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq \
	       && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	  || echo "make test: no Chromium and no way to install it (needs root and apt-get); the report's browser test skips"

# The test of tune workers sharing a study through PostgreSQL starts a server of its own: install Debian's package
# the same way, or let that test skip.
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	  || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq \
	       && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } \
	  || echo "make test: no PostgreSQL and no way to install it (needs root and apt-get); its tuning test skips"

test-fast: $(VENV)/.installed ## unit tests only (skips tests marked slow)
	$(PYTEST) -m "not slow"

test-gpu: $(VENV)/.installed ## the GPU lane: tests marked gpu (bf16 training, GPU = CPU decoding, resume, ddp); needs CUDA
	@python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "make test-gpu: torch finds no CUDA GPU; run it on a machine with one and a CUDA build of torch")'
	python -m pytest -m gpu

# The first GPU run (docs/gpu.md): the carried folder, the script that runs on a GPU machine without network, and
# its rehearsal here. gpu-check needs no .venv: it runs under the GPU machine's own python3 (bash tools/gpu_check.sh
# does the same where make is missing).
gpu-bundle: $(VENV)/.installed ## the carried folder .gpu-bundle for a GPU machine without network: wheels, the project, tokenized corpora
	dvc repro tokenize
	python tools/gpu_bundle.py

.PHONY: gpu-commit
gpu-commit: $(VENV)/.installed ## before each GPU call: .gpu-bundle/COMMIT, the commit every result there records
	python tools/gpu_bundle.py --commit-only

# The plan's two calls (docs/gpu.md): GPU_CALL=1, at most 9 minutes: setup, the GPU tests, the grid to convergence;
# GPU_CALL=2 straight after: setup, then more time for the grid's runs its budget stopped, in GPU_CHECK_SECONDS (the
# device time left less 40 s); the papers' recipes: tools/gpu_check.sh published, a call of their own
GPU_CALL ?= 1
gpu-check: ## on a GPU machine without network, call GPU_CALL=1 or 2 of the plan: install .gpu-bundle, then its parts, each timed, all into the folder OUT
	GPU_CALL=$(GPU_CALL) tools/gpu_check.sh

# make gpu-check end to end on this CPU at tiny sizes, under the GPU machine's Python and torch (docs/gpu.md)
gpu-rehearse: gpu-bundle
	tools/gpu_rehearse.sh

# FROM: the folders the GPU calls returned ($OUT of each, in call order); KIND: the GPU's, in the page's name;
# DATE=YYYY-MM-DD: the page's date instead of the first call's; FORCE=1 rewrites a page of the same name
gpu-report: $(VENV)/.installed ## the results page of a GPU run, written from what its calls returned, into docs/results (FROM=<folders> KIND=h100)
	@test -n "$(FROM)" || { echo 'make gpu-report: FROM= must name the call folders, in call order, e.g. make gpu-report FROM="out/call1 out/call2" KIND=h100'; exit 2; }
	@test -n "$(KIND)" || { echo 'make gpu-report: KIND= must name the GPU kind the page is named after, e.g. KIND=h100'; exit 2; }
	nmtbench gpu report $(FROM) --kind $(KIND) $(if $(DATE),--date $(DATE)) $(if $(FORCE),--force)

bench-decode: $(VENV)/.installed ## decoding speed of every trained model at beam 1 and 5 (after make repro)
	python benchmarks/decode_speed.py

bench-train: $(VENV)/.installed ## training tokens/s and share of matmul peak, fp32 and bf16, per model family (after dvc repro tokenize)
	python benchmarks/train_throughput.py

bench-bf16: $(VENV)/.installed ## bf16's val BLEU after fp32's FLOP budget against fp32's seeds' range, both trained here (after dvc repro tokenize; ARGS="--models ... --seeds ...")
	python benchmarks/bf16_quality.py $(ARGS)

# The scale benchmark's corpus sizes in pairs; SIZES="29000 290000" for a quick run.
SIZES ?= 29000 290000 2900000 4500000
bench-data: $(VENV)/.installed ## time and peak memory of prepare, tokenize, batch plan and loading at 29k to 4.5M pairs
	python benchmarks/data_scale.py --sizes $(SIZES)

# fresh processes per stage in the start-up benchmark; its figures only mean something on a quiet machine
RUNS ?= 10
bench-overhead: $(VENV)/.installed ## each stage's start: seconds from a fresh process to its first real work, and whether it loads torch, Lightning, torch._dynamo (RUNS=N)
	python benchmarks/stage_overhead.py --runs $(RUNS)

bench-smoke: $(VENV)/.installed ## where make smoke's time goes, run from nothing in runs/bench-smoke: each stage kind's processes, training and decoding, and DVC's share (CHECKOUT=<dir>: its code)
	python benchmarks/smoke_breakdown.py $(if $(CHECKOUT),--checkout $(CHECKOUT))

clean-smoke: ## delete the smoke workspace
	rm -rf $(SMOKE_DIR)
