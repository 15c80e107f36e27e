# radrank: pinned environments, the bundled example, the tests.
#
# Needs only Python >= 3.11 with pip: uv is bootstrapped with pip into .venvs/.tools when it is
# not on PATH, and every environment is a uv venv built from envs/<family>.yaml (see
# src/radrank/envs.py). Rules reach their venvs through Environment Modules, installed with
# apt-get when missing (as root; `make sysdeps`). RADRANK_ENVS_DIR moves the venvs elsewhere,
# RADRANK_TORCH=cpu|cuda|cuXYZ picks the torch build (default: cuda only where a GPU driver is).

PYTHON ?= python3
ENVS := $(PYTHON) src/radrank/envs.py
export RADRANK_ENVS_DIR ?= $(CURDIR)/.venvs
# Families with their own test folder (tests/envs/<family>/test_*.py) run with that env's pytest.
TEST_FAMILIES := $(sort $(patsubst tests/envs/%/,%,$(dir $(wildcard tests/envs/*/test_*.py))))
# The environment proof in tests/test_envs.py runs rexrank (transformers 4) beside crimson (5).
TEST_ENVS := core $(filter-out core,$(sort rexrank crimson $(TEST_FAMILIES)))

.PHONY: help envs example run mrscore-demo test lock containers status sysdeps clean-envs

help:
	@echo "make envs     build every environment (.venvs/<family>; cached by its pins)"
	@echo "make example  build core and run the bundled example: snakemake --cores 2, venv route"
	@echo "make run      the same run, for your own sheet: whatever config/submissions.tsv lists"
	@echo "make mrscore-demo  train MRScore with tiny random models, then rank the example with it"
	@echo "make test     build the environments the tests need and run the whole test suite"
	@echo "make lock     regenerate envs/<family>.yaml from envs/requirements/<family>.in, then envs/containers/"
	@echo "make containers  regenerate the Apptainer recipes envs/containers/<family>.def from the locks"
	@echo "make status   which environments are built and up to date"

envs: sysdeps
	$(ENVS) build --all

# `example` and `run` are one run of whatever the sheet lists: the shipped sheet is the example's.
example run: sysdeps
	$(ENVS) snakemake --profile profiles/venv --cores 2

# Train MRScore on the example's references with tiny models the workflow builds (config/mrscore-demo.yaml),
# then score the example's leaderboard with it (config/mrscore-demo-use.yaml).
mrscore-demo: sysdeps
	$(ENVS) snakemake mrscore_train --profile profiles/venv --cores 2 \
	  --configfile config/config.yaml config/mrscore-demo.yaml
	$(ENVS) snakemake --profile profiles/venv --cores 2 --configfile config/config.yaml config/mrscore-demo-use.yaml

# Every group runs even when an earlier one fails; the target fails if any did.
test: sysdeps
	$(ENVS) build $(TEST_ENVS)
	@failed=""; \
	echo "== tests/ with the core environment's pytest"; \
	$(ENVS) run core -- $(RADRANK_ENVS_DIR)/core/bin/python -m pytest tests --ignore=tests/envs || failed="core"; \
	for family in $(TEST_FAMILIES); do \
	  echo "== tests/envs/$$family with the $$family environment's pytest"; \
	  $(ENVS) run $$family -- $(RADRANK_ENVS_DIR)/$$family/bin/python -m pytest tests/envs/$$family \
	    || failed="$$failed $$family"; \
	done; \
	if [ -n "$$failed" ]; then echo "FAILED test groups:$$failed"; exit 1; fi

# A lock changes the pins its container recipe installs: both are regenerated together.
lock:
	$(ENVS) lock
	$(PYTHON) src/radrank/containers.py

containers:
	$(PYTHON) src/radrank/containers.py

status:
	$(ENVS) status

sysdeps:
	$(ENVS) sysdeps

clean-envs:
	rm -rf $(RADRANK_ENVS_DIR)
