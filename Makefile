# vllm-omni-mlx: `make serve` runs the server (the embedded default when MODEL is unset),
# `make test` runs the test suite. Both create .venv and install the project first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
MODEL ?=
HOST ?= 127.0.0.1
PORT ?= 8000
ARGS ?=
# make test runs what CI runs (.ci/run): skip reasons shown, checkpoints built in the tree.
PYTEST_ARGS ?= -ra
# Test processes (pytest-xdist), each running whole files, so a module's servers and state stay
# in one process; 0 runs the suite in this one. Two make it about 1.8x faster on 2 cores:
# much of an end-to-end test is waiting on the other processes.
PYTEST_JOBS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(PYTEST_JOBS) --dist loadfile
export VOMLX_CACHE_DIR ?= $(CURDIR)/.cache/checkpoints

.PHONY: install system-packages clients serve test test-unit test-e2e test-clients lint format clean

# `make test` installs everything (the dev extra); `make serve` only what serving the default
# needs (the serve extra: chat, speech in and out, no mlx-vlm), showing pip's progress.
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(BIN)/.installed-serve

$(BIN)/.installed-serve: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing what serving needs (about 770 MB the first time) ..." >&2
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e '.[serve]'
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
	@$(BIN)/python -c "import sys; from launch.blas import find_openblas; \
	sys.exit(sys.platform.startswith('linux') and find_openblas() is None)" || echo \
	"hint: 'apt-get install libopenblas0-pthread' makes float32 models ~30x faster on the CPU" >&2
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

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info tests/clients/node_modules .cache/clients-venv
