# sluice front door. `make test` and `make bench` work on a fresh Debian 12 machine as root.
BUILD ?= build
VENV  := .venv
PY    := $(VENV)/bin/python

.PHONY: all setup build test test-unit test-functional test-fuzz fuzz lint bench bench-quick clean help

all: build

help:
	@echo "make setup        install packages, Python venv, hugepages (scripts/setup.sh)"
	@echo "make build        build sluiced, sluice-gen and tests into $(BUILD)/, wrappers in bin/"
	@echo "make test         setup + build + every test (C unit tests, lint, functional tests)"
	@echo "make fuzz         the learn-mode parser/table fuzz target for FUZZ_SECONDS (600)"
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

bench: setup build
	bench/quick.sh

clean:
	rm -rf $(BUILD)
