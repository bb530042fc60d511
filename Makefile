# Everything a fresh machine needs: `make demo` and `make test` create .venv and install into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint venv opencl chromium clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[opencl,dev,distributed,triton,dashboard]"
	touch $(STAMP)

venv: $(STAMP)

# An OpenCL device that can compile kernels (installs Debian's PoCL when root; scripts/ensure_opencl.sh says why).
opencl: $(STAMP)
	@bash scripts/ensure_opencl.sh $(BIN)/adaptune

demo: opencl
	$(BIN)/python -m adaptune.demo

# Debian's Chromium for the dashboard's browser tests (Playwright's own browser download needs the internet)
chromium:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		{ echo "the dashboard tests need Debian's chromium: run 'sudo apt-get install chromium'" >&2; exit 1; }

test: opencl chromium
	$(BIN)/ruff check src tests benchmarks examples conftest.py
	$(BIN)/python -m pytest -q    # tests/ and the documentation's blocks (pyproject's testpaths)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples conftest.py

clean:
	rm -rf $(VENV) demo_out
