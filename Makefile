# One task runner; CI calls the same targets.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lint typecheck test goldens site serve cli-docs sweep bench bench-site browser-deps all clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy cannot follow setuptools' package-dir mapping: it checks a view of
# symlinks laid out as the installed namespace (excluded modules: pyproject.toml).
TYPECHECK := build/typecheck
typecheck: install
	mkdir -p $(TYPECHECK)/backpressure
	for p in engine catalog generator; do ln -sfn ../../../$$p $(TYPECHECK)/backpressure/$$p; done
	cd $(TYPECHECK) && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p backpressure

sweep: install
	$(BIN)/backpressure sweep --out build/sweep

# The sweep takes one process per core (backpressure build --jobs N to change it).
site: install
	$(BIN)/backpressure build --out site

# Look at the built site: http://127.0.0.1:$(PORT)/ (loopback only).
PORT ?= 8000
serve:
	@test -f site/index.html || { echo "no site/ yet: run make site first" >&2; exit 2; }
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory site $(PORT)

bench-site: install
	$(BIN)/python benchmarks/bench_site.py

# Debian's chromium for the real-browser tests (never a downloaded browser build), and
# Debian's nodejs: the second JavaScript engine the rig builder's port is checked in.
browser-deps:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver fonts-dejavu-core)
	command -v node >/dev/null || (apt-get update -qq && apt-get install -y -qq nodejs)

# Coverage of engine/ is measured on every run and fails under the floor
# (pyproject.toml [tool.coverage.report]). One worker per core, at most four (a
# worker builds sites and runs chromium: more would cost memory, not time, as a
# few long test files set the length); a test file's tests share a worker, so a
# site a module builds once is built once. The numba kernels are compiled first,
# once (generator/sweep/warm.py): the workers then load them instead of each
# compiling the same code at the same time.
test: install
	$(BIN)/python -m backpressure.generator.sweep.warm
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile --cov --cov-report=term

goldens: install
	@echo "Regenerating goldens: the commit must say why the old numbers were wrong."
	$(BIN)/backpressure goldens --update

# docs/cli.md's flag lists, regenerated from each command's --help.
cli-docs: install
	$(BIN)/python -m backpressure.generator.cli.reference

bench: install
	$(BIN)/python benchmarks/calibrate.py

all: lint test

clean:
	rm -rf $(VENV) site.tmp .pytest_cache
