# `make run` and `make test` set everything up on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER := 0

.PHONY: run test test-fast bench install clean docs docs-serve

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch is pinned: a CPU build of this release lies on disk; a looser pin pulls GBs of CUDA.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/rlfleet train -f tuned_examples/ppo/cartpole-ppo.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=25

# The whole suite without the tests marked slow (each over ~20 s on 2 busy cores).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# The documentation site, offline, into site/ (--strict: any warning fails the build).
# NO_MKDOCS_2_WARNING silences Material's notice about MkDocs 2, which is not a build warning.
docs: $(STAMP)
	$(BIN)/python docs/gen_pages.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Serves the site on this machine only, rebuilding on changes.
docs-serve: docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

bench: $(STAMP)
	$(BIN)/python benchmarks/sampling.py

clean:
	rm -rf $(VENV) build *.egg-info site docs/generated
