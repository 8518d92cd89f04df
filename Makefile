# One command installs what the tests need and runs them: `make test`.
# Everything the project needs comes from its own files: Python extras (pyproject.toml),
# restate-server (package.json), the Toxiproxy server (go install, pinned), Chromium (apt).

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TOOLS := $(CURDIR)/.tools
# The component pins live in harness/components/pins.py, which `durable-chaos doctor --install`
# also uses, so a checkout and an installed user get the same versions (package.json repeats the
# restate-server pin for npm; tests/test_doctor.py checks that all agree: `make pins`).
pin = $(shell sed -n 's/^$(1) = "\(.*\)"$$/\1/p' harness/components/pins.py)
TOXIPROXY_VERSION := $(call pin,TOXIPROXY)
RESTATE_SERVER_VERSION := $(call pin,RESTATE_SERVER)
export GOBIN := $(TOOLS)/bin
export GOFLAGS := -mod=mod

.PHONY: all install tools restate toxiproxy chromium lint typecheck test test-fast run bench clean

all: test

$(BIN)/python:
	$(PY) -m venv $(VENV)

install: $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'

.PHONY: pins wheel
pins:
	@echo "restate-server $(RESTATE_SERVER_VERSION)"
	@echo "toxiproxy $(TOXIPROXY_VERSION)"

# The wheel users install: the package with the scenario library (setup.py maps scenarios/).
wheel: $(BIN)/python
	$(BIN)/pip wheel -q --no-deps -w dist .

restate: node_modules/.package-lock.json

node_modules/.package-lock.json: package.json
	npm install --no-audit --no-fund --loglevel=error
	@touch $@

toxiproxy: $(TOOLS)/bin/toxiproxy-server

# `go install` names the binary after its package directory ("server"); rename it so the
# tools directory says what it holds. The -X stamp makes `GET /version` report the pin
# instead of "git".
$(TOOLS)/bin/toxiproxy-server:
	mkdir -p $(TOOLS)/bin
	go install -ldflags "-X github.com/Shopify/toxiproxy/v2.Version=$(TOXIPROXY_VERSION)" \
		github.com/Shopify/toxiproxy/v2/cmd/server@$(TOXIPROXY_VERSION)
	mv -f $(TOOLS)/bin/server $@

chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

tools: restate toxiproxy chromium

lint: install
	$(BIN)/ruff check harness reference_impl tests benchmarks examples

typecheck: install
	$(BIN)/mypy

test: install tools lint typecheck
	$(BIN)/pytest -n 2 -q

# The simulator-only tests: no real components.
test-fast: install
	$(BIN)/pytest -q -m "not real"

run: install
	$(BIN)/durable-chaos run

bench: install tools
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) node_modules $(TOOLS) reports/*.html reports/*.xml reports/runs
