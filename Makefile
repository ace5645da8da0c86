# sluice front door. `make test` and `make bench` work on a fresh Debian 12 machine as root.
BUILD ?= build
VENV  := .venv
PY    := $(VENV)/bin/python

.PHONY: all setup build test test-unit test-functional lint bench bench-quick clean help

all: build

help:
	@echo "make setup        install packages, Python venv, hugepages (scripts/setup.sh)"
	@echo "make build        build sluiced, sluice-gen and tests into $(BUILD)/, wrappers in bin/"
	@echo "make test         setup + build + every test (C unit tests, lint, functional tests)"
	@echo "make bench-quick  sluiced patch vs dpdk-testpmd io, v2v, 64 B and 1500 B"
	@echo "make bench        setup + build + the default comparison"
	@echo "make clean        remove $(BUILD)/"

setup:
	scripts/setup.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

test: setup build
	$(MAKE) --no-print-directory test-unit lint test-functional

test-unit: build
	meson test -C $(BUILD) --print-errorlogs

lint:
	$(VENV)/bin/ruff check python tests bench

test-functional: build
	$(PY) -m pytest -v tests/python tests/functional

bench-quick: setup build
	bench/quick.sh

bench: setup build
	bench/quick.sh

clean:
	rm -rf $(BUILD)
