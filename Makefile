# nmtbench: `make help` lists the targets. Every target sets up .venv on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# A local copy of the Multi30k raw files; without one, the prepare stage downloads from upstream.
# A folder ../shared/data/multi30k beside the checkout is used when present.
NMTBENCH_DATA_MIRROR ?= $(abspath $(wildcard ../shared/data/multi30k))
export NMTBENCH_DATA_MIRROR
export PATH := $(BIN):$(PATH)
export WANDB_SILENT ?= true
SMOKE_DIR ?= runs/smoke
# JOBS=N: repro and smoke run N stages at once through nmtbench launch (docs/scaling.md); unset, plain dvc repro
JOBS ?=
REPRO = $(if $(JOBS),nmtbench launch --jobs $(JOBS),dvc repro)

.DEFAULT_GOAL := help
.PHONY: help setup repro tune smoke lint test chromium postgresql test-fast test-gpu bench-decode bench-train bench-data claims report exp clean-smoke

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(VENV)/.installed ## create .venv and install the pinned dependencies from pyproject.toml

repro: $(VENV)/.installed ## run the whole pipeline on the default params (dvc repro; JOBS=N: N stages at once)
	nmtbench check
	$(REPRO)

tune: $(VENV)/.installed ## tune every model on val BLEU (tune.trials trials each, 0 by default: set it first; docs/tuning.md)
	nmtbench check
	dvc repro --glob 'tune@*'

smoke: $(VENV)/.installed ## the whole pipeline on tiny settings in runs/smoke, leaving your outputs alone (JOBS=N too)
	nmtbench workspace $(SMOKE_DIR) --profile profiles/smoke.yaml
	cd $(SMOKE_DIR) && nmtbench check && $(REPRO)

lint: $(VENV)/.installed ## ruff on src, tests and benchmarks (style, import order, likely bugs; pyproject.toml [tool.ruff])
	ruff check src tests benchmarks

# Test files run in parallel, one pytest-xdist worker per core, each file whole on one worker: a module's
# fixtures (the smoke pipeline of test_pipeline.py) are then built once. TEST_WORKERS=0 runs them in one process.
# One torch thread per process (the pipelines' stages inherit it): workers each spinning a thread pool the size
# of the machine wait on each other, and make test-fast took 391 s on 2 cores instead of 131 s.
TEST_WORKERS ?= auto
PYTEST := OMP_NUM_THREADS=1 python -m pytest -n $(TEST_WORKERS) --dist loadfile

test: lint chromium postgresql ## lint, then every test, the end-to-end smoke pipeline included
	$(PYTEST)

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

report: $(VENV)/.installed ## rebuild results/comparison.md and results/report.html from the trained models' metrics
	dvc repro --force --single-item compare report

# A DVC experiment: the whole pipeline with some params changed, kept beside the workspace's results.
SET ?=
exp: $(VENV)/.installed ## run a DVC experiment with changed params, e.g. make exp SET="train.lr=0.0005 evaluate.beam=8"
	@test -n "$(SET)" || { echo 'make exp: name the params to change, e.g. make exp SET="train.lr=0.0005"'; exit 2; }
	dvc exp run $(foreach assignment,$(SET),-S $(assignment))
	dvc exp show --only-changed --md

bench-decode: $(VENV)/.installed ## decoding speed of every trained model at beam 1 and 5 (after make repro)
	python benchmarks/decode_speed.py

bench-train: $(VENV)/.installed ## training tokens/s and share of matmul peak, fp32 and bf16, per model family (after dvc repro tokenize)
	python benchmarks/train_throughput.py

# The scale benchmark's corpus sizes in pairs; SIZES="29000 290000" for a quick run.
SIZES ?= 29000 290000 2900000 4500000
bench-data: $(VENV)/.installed ## time and peak memory of prepare, tokenize, batch plan and loading at 29k to 4.5M pairs
	python benchmarks/data_scale.py --sizes $(SIZES)

claims: $(VENV)/.installed ## the textbook claims measured: results/claims.md and its plots (dvc repro analyze)
	dvc repro analyze

clean-smoke: ## delete the smoke workspace
	rm -rf $(SMOKE_DIR)
