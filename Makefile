# xlat: see README.md. Every target installs what it needs (scripts/setup.sh).
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python

.PHONY: setup build test test-rust test-lint test-python demo bench fuzz clean

setup:
	@bash scripts/setup.sh

build: setup
	cargo build --release --workspace

test-lint: setup
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check tests lab
	$(VENV)/bin/ruff format --check tests lab

test-rust: setup
	cargo test --workspace

# The functional tests on two workers, then the measuring ones (marker
# `serial`, tests/conftest.py) one at a time; fails if either part fails.
test-python: build
	@rc=0; \
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15 -m "not serial" tests || rc=1; \
	$(PY) -m pytest -q --durations=15 -m serial tests || rc=1; \
	exit $$rc

test: test-lint test-rust test-python

demo: build
	@bash scripts/demo.sh

bench: build
	@bash scripts/bench.sh

fuzz: setup
	@bash scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	cargo clean
