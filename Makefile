# The user's entry point. `make demo` and `make test` do all set-up themselves.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# the install stamp names pyproject.toml's hash: re-install only when it changes
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-16)
MASTER ?=
PYTEST_ARGS ?=

.PHONY: help setup sysdeps demo test bench lint clean distclean

help:
	@echo "make demo       install into .venv if needed, run the demo job (MASTER=local[2] for Spark)"
	@echo "make test       install into .venv if needed, run the test suite"
	@echo "make bench      benchmarks (ratios against named baselines)"
	@echo "make lint       ruff"
	@echo "make clean      remove out/ and caches (keeps .venv and the data/ cache)"

setup: sysdeps $(STAMP)

# System packages the suite needs on a fresh Debian 12 (as root): a JRE for Spark, venv.
sysdeps:
	@if ! command -v java >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing a Java runtime for Spark (openjdk-17-jre-headless)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	  else echo "warning: no java on PATH; Spark jobs and tests need Java 17" >&2; fi; \
	fi

$(STAMP): pyproject.toml
	@if [ ! -x $(PY) ]; then \
	  rm -rf $(VENV); \
	  $(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	    rm -rf $(VENV); \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; fi; \
	    $(PYTHON) -m venv $(VENV); }; \
	fi
	$(PY) -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

demo: setup
	$(PY) -m pipelines demo --config configs/demo.yaml $(if $(MASTER),--master '$(MASTER)')

# the whole suite, Spark tests included (markers: spark, docker, gpu — gpu skips without CUDA)
test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/loader_throughput.py
	$(PY) benchmarks/engines.py

lint: setup
	$(PY) -m ruff check .

clean:
	rm -rf out .pytest_cache .ruff_cache spark-warehouse
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) data
