# flagsight: `make run` brings everything up with a demo; `make test` runs the whole suite.
# Both install what is missing first (uv and the locked Python packages, Debian packages).

SHELL := /bin/bash
export FLAGSIGHT_DATA_DIR ?= $(CURDIR)/var
VENV := .venv
BIN := $(VENV)/bin
DEBIAN_PACKAGES := chromium wrk postgresql gcc g++ libc6-dev libre2-dev iproute2

.PHONY: install system-deps node-deps run cluster test simulations lint format bench bench-compare soak clean

install: $(VENV)/.installed
	@$(BIN)/python -m api.native.build

# A line per step, and uv's own summary lines (interpreter, downloads, installs, bytecode), not
# its line per package.
$(VENV)/.installed: pyproject.toml uv.lock sdk/python/pyproject.toml
	@command -v uv >/dev/null 2>&1 || { echo "Installing uv (pip) ..."; \
	  python3 -m pip install --quiet --disable-pip-version-check uv; }
	@echo "Installing the locked Python packages (uv.lock) with uv; the first time takes minutes ..."
	@set -o pipefail; uv sync --frozen --python 3.11 2>&1 | sed -u '/^ [-+~] /d'
	@touch $@

system-deps:
	@bash scripts/install-system-deps.sh $(DEBIAN_PACKAGES)

node-deps: tests/ofrep/js/node_modules/.installed

tests/ofrep/js/node_modules/.installed: tests/ofrep/js/package.json tests/ofrep/js/package-lock.json
	@echo "Installing the OpenFeature interoperability test's npm packages (npm ci) ..."
	@cd tests/ofrep/js && npm ci --silent --no-audit --no-fund >/dev/null
	@touch $@

lint: install
	@$(BIN)/ruff check --quiet .
	@$(BIN)/ruff format --check --quiet .

format: install
	@$(BIN)/ruff check --quiet --fix .
	@$(BIN)/ruff format --quiet .

# Three pytest workers (pytest-xdist), each module on one of them (its fixtures started once):
# most tests wait on real servers, databases and browsers, so three keep two cores busy.
test: system-deps install node-deps lint
	@$(BIN)/pytest -q -p no:randomly -n 3 --dist loadscope --no-loadscope-reorder

# The long simulations behind docs/statistics.md (minutes; make test runs shorter versions).
simulations: install
	@$(BIN)/pytest -q -p no:randomly -m simulation tests/warehouse tests/pipelines

run: install
	@bash scripts/run.sh

cluster: system-deps install
	@$(BIN)/python scripts/cluster.py

bench: system-deps install
	@$(BIN)/python -m bench.run

bench-compare: system-deps install
	@$(BIN)/python -m bench.compare $(or $(REVS),HEAD .)

soak: system-deps install
	@$(BIN)/python -m bench.soak

clean:
	rm -rf var .venv
