# Everything a fresh machine needs: `make demo` and `make test` create .venv and install into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint venv clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[opencl,dev,distributed]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m adaptune.demo

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples conftest.py
	$(BIN)/python -m pytest -q    # tests/ and the documentation's blocks (pyproject's testpaths)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples conftest.py

clean:
	rm -rf $(VENV) demo_out
