# The pipeline's make targets, in the project's Makefile and in every workspace's (nmtbench workspace writes
# one that includes this file): they run in the current folder, with the project's .venv.
SHELL := /bin/bash
PYTHON ?= python3
PIPELINE_MK := $(lastword $(MAKEFILE_LIST))
ROOT := $(abspath $(dir $(PIPELINE_MK))..)
VENV := $(ROOT)/.venv
BIN := $(VENV)/bin
# A local copy of the Multi30k raw files; without one, the prepare stage downloads from upstream.
# A folder ../shared/data/multi30k beside the checkout is used when present.
NMTBENCH_DATA_MIRROR ?= $(abspath $(wildcard $(ROOT)/../shared/data/multi30k))
export NMTBENCH_DATA_MIRROR
export PATH := $(BIN):$(PATH)
export WANDB_SILENT ?= true

.DEFAULT_GOAL := help
# $(VENV)/.installed is phony: the stamp script, not the file's time, decides whether to install
.PHONY: help setup repro converge tune report exp exp-show claims $(VENV)/.installed

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(PIPELINE_MK) $(filter-out $(PIPELINE_MK),$(MAKEFILE_LIST)) \
	  | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

# Installs only when pyproject.toml's dependencies changed since the last install (tools/venv_stamp.py):
# a fresh clone's pyproject.toml is newer than a .venv it reuses, and that alone rebuilds nothing.
# With uv, from where pip is configured to look (tools/uv_install.py): 32 s where pip took 3 min 11 s; with pip
# where uv cannot be had.
UV := uv==0.13.9
$(VENV)/.installed:
	@$(PYTHON) $(ROOT)/tools/venv_stamp.py check $(VENV) $(ROOT)/pyproject.toml || { \
	  $(PYTHON) -m venv $(VENV) \
	  && { { $(BIN)/pip install --quiet $(UV) && $(PYTHON) $(ROOT)/tools/uv_install.py $(VENV) --quiet -e '$(ROOT)[dev]'; } \
	       || { echo "make: uv could not install .venv; installing with pip" >&2 \
	            && $(BIN)/pip install --quiet -e '$(ROOT)[dev]'; }; } \
	  && $(PYTHON) $(ROOT)/tools/venv_stamp.py write $(VENV) $(ROOT)/pyproject.toml; }

setup: $(VENV)/.installed ## create .venv and install the pinned dependencies from pyproject.toml

# dvc repro with every stage forked from one interpreter that imported torch and Lightning once (docs/pipeline.md)
WARM := nmtbench warm --

repro: $(VENV)/.installed ## run the whole pipeline on the default params (dvc repro; JOBS=N: N stages at once, THREADS=T each)
	nmtbench check
	$(if $(JOBS)$(THREADS),nmtbench launch $(if $(JOBS),--jobs $(JOBS)) $(if $(THREADS),--threads $(THREADS)),$(WARM) dvc repro)

# MODELS="a b": start these models first, in this order
MODELS ?=
converge: $(VENV)/.installed ## train every run to its own stopping and evaluate it (JOBS=N at once, THREADS=T each, MODELS first); again resumes; PLOT=<png> draws the curves so far; PAGE=<md> rewrites a results page's marked blocks; COMPARE=<folder> (BASELINE=<model>) compares the finished models; FROM=<export>: with the runs finished there
	nmtbench check
	$(if $(PAGE),nmtbench converge --page $(PAGE) $(if $(JOBS),--jobs $(JOBS)),$(if $(PLOT),nmtbench converge --plot $(PLOT),$(if $(COMPARE),nmtbench converge --compare $(COMPARE) $(if $(BASELINE),--baseline $(BASELINE)),nmtbench converge $(MODELS) $(if $(JOBS),--jobs $(JOBS)) $(if $(THREADS),--threads $(THREADS))))) $(if $(FROM),--from $(FROM))

tune: $(VENV)/.installed ## tune every model on val BLEU (tune.trials trials each, 0 by default: set it first; docs/tuning.md)
	nmtbench check
	$(WARM) dvc repro --glob 'tune@*'

report: $(VENV)/.installed ## rebuild results/comparison.md and results/report.html from the trained models' metrics
	dvc repro --force --single-item compare report

# A DVC experiment: the whole pipeline with some params changed, kept beside the workspace's results.
SET ?=
exp: $(VENV)/.installed ## run a DVC experiment with changed params, e.g. make exp SET="train.lr=0.0005 evaluate.beam=8"
	@test -n "$(SET)" || { echo 'make exp: name the params to change, e.g. make exp SET="train.lr=0.0005"'; exit 2; }
	dvc exp run $(foreach assignment,$(SET),-S $(assignment))
	nmtbench experiments

exp-show: $(VENV)/.installed ## every model's BLEU in the workspace and each DVC experiment, and the params that differ
	nmtbench experiments

claims: $(VENV)/.installed ## the textbook claims measured: results/claims.md and its plots (dvc repro analyze)
	dvc repro analyze
