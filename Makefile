# Everything a fresh machine needs: `make demo` and `make test` create .venv and install into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint venv opencl clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[opencl,dev,distributed]"
	touch $(STAMP)

venv: $(STAMP)

# An OpenCL device that can compile kernels (installs Debian's PoCL when root; scripts/ensure_opencl.sh says why).
opencl: $(STAMP)
	@bash scripts/ensure_opencl.sh $(BIN)/adaptune

demo: opencl
	$(BIN)/python -m adaptune.demo

test: opencl
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/python -m pytest -q tests

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples

clean:
	rm -rf $(VENV) demo_out
