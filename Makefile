# Two commands matter on a fresh machine: `make run` (the main job) and `make test` (the tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test test-all lint gpu-test install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: 2.13.0 is the CPU build that lies on this machine's disk.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/kforge search level2/01_gemm_bias_relu --platform cpu-cpp --sizes ci \
		--lineages 2 --generations 2 --db kforge.duckdb

# two workers (pytest-xdist): the CI machine's two cores (test_families alone: 130 -> 76 s)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

test-all: $(STAMP)  # the slow tests too (exhaustive sweeps, one C++ build per attack)
	KFORGE_SLOW=1 $(BIN)/python -m pytest -q -n 2

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .kforge-cache
