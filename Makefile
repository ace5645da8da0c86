# sluice front door. `make test` and `make bench` work on a fresh Debian 12 machine as root.
BUILD ?= build
VENV  := .venv
PY    := $(VENV)/bin/python

.PHONY: all setup setup-peers build test test-unit test-functional test-fuzz fuzz lint bench \
	bench-full bench-ndr bench-idle bench-quick soak clean help

all: build

help:
	@echo "make setup        install packages, Python venv, hugepages (scripts/setup.sh)"
	@echo "make build        build sluiced, sluice-gen and tests into $(BUILD)/, wrappers in bin/"
	@echo "make test         setup + build + every test (C unit tests, lint, functional tests)"
	@echo "make fuzz         the learn-mode parser/table fuzz target for FUZZ_SECONDS (600)"
	@echo "make bench-quick  sluiced patch vs dpdk-testpmd io, v2v, 64 B and 1500 B"
	@echo "make bench        setup (with peers) + build + the default matrix (~18 min) + report"
	@echo "make bench-idle   idle CPU of sluiced (idle sleep), testpmd and OVS-DPDK, 3 x 10 s"
	@echo "                  each, and what the idle sleep adds at 0.10 of R+ (~3 min)"
	@echo "make bench-ndr    NDR and PDR (MLRsearch), p2p and v2v at 64 and 256 B (~15 min)"
	@echo "make bench-full   the whole matrix: every scenario, stand-in, direction, 4 sizes and"
	@echo "                  IMIX, latency at loads and at 1 Mpps (hours)"
	@echo "                  (BENCH_ARGS='--duration 2' shortens either)"
	@echo "make soak         SOAK_SECONDS (3600) of mixed traffic, hot-plug and VNF restarts;"
	@echo "                  checks accounting, mbuf leaks and memory (build/soak/summary.json)"
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
	$(MAKE) --no-print-directory test-unit lint test-fuzz test-functional

test-unit: build
	meson test -C $(BUILD) --print-errorlogs

# libFuzzer target of the learning bridge's frame parser and table (clang, ASan, UBSan).
FUZZ_BIN     := $(BUILD)/fuzz/fuzz_learn
FUZZ_SECONDS ?= 600
FUZZ_CFLAGS  := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE -Isrc

$(FUZZ_BIN): tests/fuzz/fuzz_learn.c src/fdb.c src/fdb.h src/l2parse.h src/stats.h
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) $$(pkg-config --cflags libdpdk) tests/fuzz/fuzz_learn.c src/fdb.c \
		-lrte_eal -o $@

# A bounded run for `make test`; `make fuzz` runs longer. Crashes land in $(BUILD)/fuzz.
test-fuzz: $(FUZZ_BIN)
	@mkdir -p $(BUILD)/fuzz/corpus
	$(FUZZ_BIN) -max_total_time=30 -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/ \
		$(BUILD)/fuzz/corpus

fuzz: $(FUZZ_BIN)
	@mkdir -p $(BUILD)/fuzz/corpus
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
		-artifact_prefix=$(BUILD)/fuzz/ $(BUILD)/fuzz/corpus

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
# A VPP built by hand (docs/bench.md, 'VPP'); without it the vpp switch is skipped with a note.
VPP_PREFIX ?=
BENCH_ARGS += $(if $(VPP_PREFIX),--vpp-prefix $(VPP_PREFIX))

bench: setup-peers build
	$(BENCH_LOCK) bin/sluice-bench run --matrix default --duration 8 --latency-duration 4 \
		--min-near 3 --budget 120 --idle-trials 1 $(BENCH_ARGS)

# Issue 15: an idle switch's CPU (median of 3 x 10 s each) and the latency sluiced's idle
# sleep adds at 0.10 of R+; `make bench` runs the same stage with one trial each.
IDLE_ARGS ?=
bench-idle: setup-peers build
	$(BENCH_LOCK) bin/sluice-bench idle --trials 3 --seconds 10 --latency-trials 2 $(IDLE_ARGS)

bench-full: setup-peers build
	$(BENCH_LOCK) bin/sluice-bench run \
		--scenario v2v,p2p,p2v,v2p,loopback-1,loopback-2,loopback-3,loopback-4,loopback-5 \
		--phy memif,veth --direction uni,bidir --sizes 64,256,1024,1500,imix --trials 4 \
		--duration 20 --latency loads,fixed:1Mpps --min-near 3 --budget 1800 $(BENCH_ARGS)

# Section 8 of issue 8: zero-loss (NDR) and 0.5 % loss (PDR) rates, p2p and v2v at 64 and
# 256 B (about 15 minutes: a search per switch, scenario and size).
bench-ndr: setup-peers build
	$(BENCH_LOCK) bin/sluice-bench ndr --scenario p2p,v2v --sizes 64,256 \
		--switch sluice:patch,testpmd $(BENCH_ARGS)

# Issue 15's soak: not part of `make test` (an hour by default).
SOAK_SECONDS ?= 3600
soak: setup build
	SOAK_SECONDS=$(SOAK_SECONDS) $(PY) -m pytest -s -v -p no:cacheprovider \
		-o timeout=$$(( $(SOAK_SECONDS) + 600 )) tests/soak/test_soak.py

clean:
	rm -rf $(BUILD)
