# vllm-omni-mlx: `make serve` runs the server (the embedded default when MODEL is unset),
# `make test` runs the test suite. Both create .venv and install the project first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
MODEL ?=
HOST ?= 127.0.0.1
PORT ?= 8000
ARGS ?=
# Keys for `make serve`, passed in the environment (not on the command line, which `ps` shows):
# API_KEY guards the API, ADMIN_KEY the routes that load and unload models (README, "Admin").
API_KEY ?=
ADMIN_KEY ?=
# make test runs what CI runs (.ci/run): skip reasons shown, checkpoints built in the tree.
PYTEST_ARGS ?= -ra
# Test processes (pytest-xdist), each running whole files, so a module's servers and state stay
# in one process; 0 runs the suite in this one. Two make it about 1.8x faster on 2 cores:
# much of an end-to-end test is waiting on the other processes.
PYTEST_JOBS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(PYTEST_JOBS) --dist loadfile
export VOMLX_CACHE_DIR ?= $(CURDIR)/.cache/checkpoints
# SYSTEM_PACKAGES=0: `make test` only says which system packages are missing (no apt-get as root)
export SYSTEM_PACKAGES ?= 1
# setuptools prints a warning box on every editable install of a flat layout; it says nothing
# the project does not already handle (the worker never runs from a folder of user files).
PIP_INSTALL := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install

.PHONY: install system-packages clients serve test test-unit test-e2e test-clients lint format clean distclean

# `make test` installs everything (the dev extra); `make serve` only what serving the default
# needs (the serve extra: chat, speech in and out, no mlx-vlm), showing pip's progress.
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing the project and everything its tests use into $(VENV) (a few minutes the first time) ..." >&2
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) --quiet -e '.[dev]'
	touch $@ $(BIN)/.installed-serve

$(BIN)/.installed-serve: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing what serving needs into $(VENV) (about 870 MB the first time): first pip itself, then the packages, with progress ..." >&2
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) --progress-bar on -e '.[serve]'
	touch $@

install: $(BIN)/.installed

# The client tier's clients (tests/clients/, docs/clients.md), pinned: the Node ones by `npm ci`
# into tests/clients/node_modules, the Python ones into their own venv (.cache/clients-venv).
# Reinstalled only when their pins change. Best effort: a client that cannot be installed (no
# npm, no registry) makes its tests skip, saying why.
clients: install
	$(BIN)/python -m tests.support.clients

# On Linux the worker preloads an installed OpenBLAS (--blas auto); this only says when none is.
serve: $(BIN)/.installed-serve
	@$(BIN)/python -c "import sys; from protocol.launch.blas import find_openblas; \
	sys.exit(sys.platform.startswith('linux') and find_openblas() is None)" || echo \
	"hint: 'apt-get install libopenblas0-pthread' makes float32 models ~30x faster on the CPU" >&2
	$(if $(API_KEY),VOMLX_API_KEY='$(API_KEY)') $(if $(ADMIN_KEY),VOMLX_ADMIN_KEY='$(ADMIN_KEY)') \
	$(BIN)/vllm-omni-mlx serve $(MODEL) --host $(HOST) --port $(PORT) $(ARGS)

# System packages (OpenBLAS, ffmpeg, espeak-ng, Node) when this machine lets us: Linux, root, apt.
system-packages:
	@scripts/system_packages.sh

test: system-packages install clients
	$(PYTEST) $(PYTEST_ARGS)

test-unit: install
	$(PYTEST) tests/unit $(PYTEST_ARGS)

test-e2e: install
	$(PYTEST) tests/e2e $(PYTEST_ARGS)

test-clients: install clients
	$(PYTEST) tests/clients $(PYTEST_ARGS)

# Lint and type checks, as CI runs them (.ci/run): mypy against the baseline that may only
# shrink (scripts/check_types.py, .mypy-baseline.txt; strict and clean: protocol/, gateway/workers/).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/check_types.py

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# clean: what `make` installed (the venv, the client tier's clients, caches of tools);
# distclean: also .cache/, the converted real weights and the tests' tiny checkpoints.
clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info tests/clients/node_modules .cache/clients-venv

distclean: clean
	rm -rf .cache
