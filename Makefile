# sluice front door. `make test` and `make bench` work on a fresh Debian 12 machine as root.
BUILD ?= build
VENV  := .venv
PY    := $(VENV)/bin/python

.PHONY: all setup setup-peers build test test-unit test-functional lint bench bench-full bench-quick clean help

all: build

help:
	@echo "make setup        install packages, Python venv, hugepages (scripts/setup.sh)"
	@echo "make build        build sluiced, sluice-gen and tests into $(BUILD)/, wrappers in bin/"
	@echo "make test         setup + build + every test (C unit tests, lint, functional tests)"
	@echo "make bench-quick  sluiced patch vs dpdk-testpmd io, v2v, 64 B and 1500 B"
	@echo "make bench        setup (with peers) + build + the default matrix (~20 min) + report"
	@echo "make bench-full   the whole matrix: every scenario, stand-in, direction, 4 sizes"
	@echo "                  (BENCH_ARGS='--duration 2' shortens either)"
	@echo "make clean        remove $(BUILD)/"

setup:
	scripts/setup.sh

setup-peers:
	scripts/setup.sh --peers

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

# Benchmarks hold /tmp/sluice-cpu.lock: the machine's 2 CPUs are shared, and two runs at
# once would measure each other. sluice-bench prints where its report is.
BENCH_LOCK := flock /tmp/sluice-cpu.lock
BENCH_ARGS ?=

bench: setup-peers build
	$(BENCH_LOCK) bin/sluice-bench run --matrix default --duration 20 $(BENCH_ARGS)

bench-full: setup-peers build
	$(BENCH_LOCK) bin/sluice-bench run --scenario v2v,p2p,loopback-1,loopback-2,loopback-3,loopback-4,loopback-5 \
		--phy memif,veth --direction uni,bidir --sizes 64,256,1024,1500 --trials 4 \
		--duration 20 $(BENCH_ARGS)

clean:
	rm -rf $(BUILD)
