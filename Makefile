# Two entry points on a fresh machine: `make run` and `make test`. Both build .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SHARED ?= $(or $(HARMONY_SHARED),$(abspath ../shared))
# The tests read the shared folder from HARMONY_SHARED (tests/conftest.py); `make test SHARED=...` sets it.
export HARMONY_SHARED := $(abspath $(SHARED))
export TIKTOKEN_ENCODINGS_BASE ?= $(HARMONY_SHARED)/vocab

.PHONY: run serve test venv test-venv generate check lint typecheck bench clean node-tools ts-deps ts-build ts-test

# TypeScript: harmonygen runs json-schema-to-typescript from generator/node and writes the generated modules to
# generated/typescript/src/; the package is runtime/typescript/ (its package.json, lock and tsconfig), whose build
# copies those modules into src/generated/ (and the LICENSE beside its README), so dist/ holds the package's own
# paths (dist/index.js). Its tests compile with the sources into build/ (tsconfig.test.json).
NPM_CI := npm ci --no-audit --no-fund --loglevel=error
NODE_TOOLS := generator/node/node_modules/.installed
TS_PKG := runtime/typescript
TS_DEPS := $(TS_PKG)/node_modules/.installed
TS_OUT := $(TS_PKG)/build

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# `make run` and `make serve` need the package, the server and the openai SDK (the `demo` extra), no Node and
# no generator (generated/ is committed); `make generate` adds the generator; `make test` the test and benchmark tools.
$(VENV)/.installed-demo: pyproject.toml $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[demo]'
	touch $@

$(VENV)/.installed-run: pyproject.toml $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[gen]'
	touch $@

$(VENV)/.installed-test: pyproject.toml $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[gen,test,bench]'
	touch $@ $(VENV)/.installed-run $(VENV)/.installed-demo

venv: $(VENV)/.installed-run

test-venv: $(VENV)/.installed-test

$(NODE_TOOLS): generator/node/package-lock.json
	cd generator/node && $(NPM_CI)
	touch $@

node-tools: $(NODE_TOOLS)

$(TS_DEPS): $(TS_PKG)/package-lock.json
	if [ -L $(TS_PKG)/node_modules ]; then rm $(TS_PKG)/node_modules; fi  # the link of checkouts before the move
	cd $(TS_PKG) && $(NPM_CI)
	touch $@

ts-deps: $(TS_DEPS)

ts-build: ts-deps
	rm -rf $(TS_PKG)/dist $(TS_PKG)/build $(TS_PKG)/src/generated
	cp -R generated/typescript/src $(TS_PKG)/src/generated
	cp LICENSE $(TS_PKG)/LICENSE
	$(TS_PKG)/node_modules/.bin/tsc -p $(TS_PKG)
	$(TS_PKG)/node_modules/.bin/tsc -p $(TS_PKG)/tsconfig.test.json

# The TypeScript tests (conformance/ among them) run with node alone on the path: checking the TypeScript runtime
# needs no Python (tests/test_typescript.py, run by pytest, is where the two languages still meet).
ts-test: ts-build
	d=$$(mktemp -d) && ln -s "$$(command -v node)" "$$d/node" && \
	env PATH="$$d" node --test $(TS_OUT)/test/*.test.js; s=$$?; rm -rf "$$d"; exit $$s

generate: venv node-tools
	$(BIN)/harmonygen generate

check: test-venv node-tools
	$(BIN)/harmonygen generate --check

lint: test-venv
	$(BIN)/ruff check generator runtime generated/python tests bench
	$(BIN)/ruff format --check generator runtime tests bench

# mypy --strict on every Python file: runtime, generated, generator, bench and tests ([tool.mypy] in pyproject.toml).
typecheck: test-venv
	$(BIN)/mypy

# The product on embedded defaults: serve on the demo engine and a temporary SQLite store, a scripted session
# through it with the openai SDK, a transcript, the next steps; the server stops and make exits 0.
run: $(VENV)/.installed-demo
	$(BIN)/harmony-responses demo

# Keep serving: the demo engine on http://127.0.0.1:8000 (ENGINE=vllm:http://127.0.0.1:8001 for a real one).
ENGINE ?= demo
serve: $(VENV)/.installed-demo
	$(BIN)/harmony-responses serve --engine '$(ENGINE)'

test: check lint typecheck ts-test
	$(BIN)/python -m pytest

bench: test-venv ts-build
	$(BIN)/python bench/bench_render.py
	$(BIN)/python bench/bench_parse.py
	$(BIN)/python bench/bench_bridge.py
	$(BIN)/python bench/bench_typescript.py
	$(BIN)/python bench/bench_leak.py
	$(BIN)/python bench/bench_store.py
	$(BIN)/python bench/bench_server.py
	$(BIN)/python bench/bench_realworld.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf generator/node/node_modules $(TS_PKG)/node_modules $(TS_PKG)/dist $(TS_PKG)/build $(TS_PKG)/src/generated
