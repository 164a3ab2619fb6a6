# One task runner; CI calls the same targets.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lint typecheck test test-all goldens site bench all clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .

test: install
	$(BIN)/python -m pytest -q

goldens: install
	@echo "Regenerating goldens: the commit must say why the old numbers were wrong."
	$(BIN)/backpressure goldens --update

bench: install
	$(BIN)/python benchmarks/calibrate.py

all: lint test

clean:
	rm -rf $(VENV) site.tmp .pytest_cache
