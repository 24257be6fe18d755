# Two entry points on a fresh machine: `make run` and `make test`. Both build .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SHARED ?= $(abspath ../shared)
export TIKTOKEN_ENCODINGS_BASE ?= $(SHARED)/vocab

.PHONY: run test venv generate check lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	touch $@

venv: $(VENV)/.installed

generate: venv
	$(BIN)/harmonygen generate

check: venv
	$(BIN)/harmonygen generate --check

lint: venv
	$(BIN)/ruff check generator runtime generated/python tests bench
	$(BIN)/ruff format --check generator runtime tests bench

typecheck: venv
	$(BIN)/mypy

run: generate
	$(BIN)/harmony-responses render examples/conversation.json --next-role assistant
	$(BIN)/harmony-responses respond --request examples/responses/request.json --completion examples/responses/completion.txt --stream

test: check lint typecheck
	$(BIN)/python -m pytest

bench: venv
	$(BIN)/python bench/bench_render.py
	$(BIN)/python bench/bench_parse.py
	$(BIN)/python bench/bench_bridge.py
	$(BIN)/python bench/bench_server.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
