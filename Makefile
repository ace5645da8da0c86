# sluice front door. `make test` and `make bench` work on a fresh Debian 12 machine as root.
BUILD ?= build
VENV  := .venv
PY    := $(VENV)/bin/python

.PHONY: all setup setup-peers build test test-unit test-functional test-fuzz fuzz fuzz-build \
	test-openflow-conformance \
	lint bench bench-full bench-ndr bench-idle bench-quick soak clean help install uninstall \
	pkg-deb pkg-test

all: build

help:
	@echo "make setup        install packages, Python venv, hugepages (scripts/setup.sh)"
	@echo "make build        build sluiced, sluice-gen and tests into $(BUILD)/, wrappers in bin/"
	@echo "make test         setup + build + every test (C unit tests, lint, functional tests)"
	@echo "make test-fuzz    every libFuzzer target for FUZZ_TEST_SECONDS (20) each:"
	@echo "                  $(FUZZ_TARGETS)"
	@echo "make fuzz         every libFuzzer target for FUZZ_SECONDS (600) each"
	@echo "make test-openflow-conformance  os-ken's OpenFlow 1.3 switch test tool against a"
	@echo "                  flow switch, a private userspace OVS as the tester (~20 min, the"
	@echo "                  CPU lock held; OFC_ARGS='--tests action,match' ~2 min):"
	@echo "                  build/of-conformance/summary.txt (timed-out tests run again;"
	@echo "                  OFC_ARGS=--trace: where each frame went, trace.txt)"
	@echo "make bench-quick  sluiced patch vs dpdk-testpmd io, v2v, 64 B and 1500 B"
	@echo "make bench        setup (with peers) + build + the default matrix (~18 min) + report"
	@echo "make bench-idle   idle CPU of sluiced (idle sleep), testpmd and OVS-DPDK, 3 x 10 s"
	@echo "                  each, and what the idle sleep adds at 0.10 of R+ (~3 min)"
	@echo "make bench-ndr    NDR and PDR (MLRsearch), p2p and v2v at 64 and 256 B (~15 min)"
	@echo "make bench-full   the whole matrix: every scenario, stand-in, direction, 4 sizes,"
	@echo "                  9000 B jumbo frames (where a switch takes them) and IMIX,"
	@echo "                  latency at loads and at 1 Mpps (hours)"
	@echo "                  (BENCH_ARGS='--duration 2' shortens either)"
	@echo "make soak         SOAK_SECONDS (3600) of mixed traffic, hot-plug and VNF restarts;"
	@echo "                  checks accounting, mbuf leaks and memory (build/soak/summary.json)"
	@echo "make install      install into PREFIX (/usr/local) under DESTDIR: programs, Python"
	@echo "                  package, man pages, completion, systemd unit, configuration"
	@echo "make uninstall    remove what make install installed (same PREFIX and DESTDIR)"
	@echo "make pkg-deb      the Debian package (dpkg-buildpackage, debhelper + meson) and"
	@echo "                  lintian, into $(BUILD)/deb/"
	@echo "make pkg-test     install that package, run its sluiced and sluicectl, purge it,"
	@echo "                  check nothing is left"
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

# libFuzzer targets (clang, ASan, UBSan), one per file tests/fuzz/fuzz_<name>.c, each with
# a committed seed corpus in tests/fuzz/corpus/<name>/ (docs/operations.md, 'Fuzzing'):
#   learn     the learning bridge's frame parser and table (fdb)
#   portspec  the port-spec parser and the path policy
#   fwd       learn mode's burst processing on real mbufs (EAL in-process, no hugepages)
#   rpc       the control protocol: ctl_handle_line() and every method, null and ring ports
#   flow_key  flow mode's key extraction and composition, and the packet modifications
# Each runs from a copy of its corpus in $(BUILD)/fuzz/corpus/<name>/, which keeps what the
# runs find; crashes land in $(BUILD)/fuzz/ as <name>-crash-*.
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_TARGETS := learn portspec fwd rpc flow_parse flow_key
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
FUZZ_SECONDS ?= 600
# `make test-fuzz` (part of `make test`): this long per target, about 80 s in all.
FUZZ_TEST_SECONDS ?= 20
FUZZ_CFLAGS  := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE -Isrc

$(FUZZ_DIR)/fuzz_learn: tests/fuzz/fuzz_learn.c src/fdb.c src/fdb.h src/l2parse.h src/stats.h
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) $$(pkg-config --cflags libdpdk) tests/fuzz/fuzz_learn.c src/fdb.c \
		-lrte_eal -o $@

$(FUZZ_DIR)/fuzz_portspec: tests/fuzz/fuzz_portspec.c src/portspec.c src/portspec.h \
		src/path_policy.c src/path_policy.h
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) tests/fuzz/fuzz_portspec.c src/portspec.c src/path_policy.c -o $@

$(FUZZ_DIR)/fuzz_flow_parse: tests/fuzz/fuzz_flow_parse.c src/flow_parse.c src/flow.h \
		src/flow_key.h
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) tests/fuzz/fuzz_flow_parse.c src/flow_parse.c -o $@

$(FUZZ_DIR)/fuzz_flow_key: tests/fuzz/fuzz_flow_key.c src/flow_key.c src/flow_key.h \
		src/flow_mod.c src/flow_mod.h src/flow.h tests/unit/flow_test_util.h
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -Itests/unit tests/fuzz/fuzz_flow_key.c src/flow_key.c src/flow_mod.c \
		-o $@

FUZZ_DPDK    = $$(pkg-config --cflags libdpdk jansson) -Ibuild
FUZZ_LIBS    = $$(pkg-config --libs libdpdk jansson)

FUZZ_FWD_SRC := src/capture.c src/fwd_learn.c src/fdb.c src/worker.c src/pool.c src/port_afpacket.c src/stats.c src/vhost_fast.c src/memif_fast.c src/port_vxlan.c \
		src/port.c src/portspec.c src/path_policy.c src/port_afxdp.c

$(FUZZ_DIR)/fuzz_fwd: tests/fuzz/fuzz_fwd.c tests/fuzz/fuzz_eal.h $(FUZZ_FWD_SRC) \
		$(wildcard src/*.h)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -Wno-unknown-attributes $(FUZZ_DPDK) tests/fuzz/fuzz_fwd.c $(FUZZ_FWD_SRC) $(FUZZ_LIBS) -o $@

# The daemon but main.c (the target has its own) and unmap_guard.c (a munmap() for memif);
# ctl.c is included by the target. port.c's GCC-only noipa attribute is no news to clang.
FUZZ_RPC_SRC := src/capture.c src/ctl_capture.c src/ctl_methods.c src/ctl_flow.c src/ctl_events.c src/ctl_of.c src/ofagent_proc.c \
		src/ctl_rxq.c src/rxq.c src/classifier.c src/flow_key.c \
		src/flow_mod.c src/flow_parse.c src/flow_cache.c src/flow_rules.c src/flow_xlate.c src/fwd_flow.c \
		src/fdb.c src/fwd.c src/fwd_learn.c src/fwd_patch.c \
		src/notify.c src/path_policy.c src/pool.c src/port.c src/port_afpacket.c src/port_afxdp.c \
		src/port_vxlan.c src/portspec.c src/state.c src/stats.c src/switch.c src/vhost_fast.c src/memif_fast.c \
		src/worker.c

$(FUZZ_DIR)/fuzz_rpc: tests/fuzz/fuzz_rpc.c tests/fuzz/fuzz_eal.h src/ctl.c $(FUZZ_RPC_SRC) \
		$(wildcard src/*.h)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -Wno-unknown-attributes $(FUZZ_DPDK) tests/fuzz/fuzz_rpc.c \
		$(FUZZ_RPC_SRC) $(FUZZ_LIBS) -lpthread -o $@

# Runs target $$t for $(1) seconds from its corpus copy (seeds added, what it finds kept).
fuzz_each = for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_DIR)/corpus/$$t && \
		{ [ ! -d tests/fuzz/corpus/$$t ] || cp -n tests/fuzz/corpus/$$t/* $(FUZZ_DIR)/corpus/$$t/; } && \
		echo "fuzz: $$t, $(1) s" && \
		$(FUZZ_DIR)/fuzz_$$t -max_total_time=$(1) -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_DIR)/$$t- $(FUZZ_DIR)/corpus/$$t || exit 1; \
	done

fuzz-build: $(FUZZ_BINS)

# A bounded run of every target for `make test`; `make fuzz` runs each for FUZZ_SECONDS.
test-fuzz: $(FUZZ_BINS)
	@$(call fuzz_each,$(FUZZ_TEST_SECONDS))

fuzz: $(FUZZ_BINS)
	@$(call fuzz_each,$(FUZZ_SECONDS))

lint:
	$(VENV)/bin/ruff check python tests bench

test-functional: build
	$(PY) -m pytest -v tests/python tests/functional

# The public OpenFlow 1.3 conformance suite (docs/openflow.md, "Conformance"): not part of
# `make test` (the meter and group tests send for 30 s each). It holds the CPU lock: it
# measures rates.
OFC_ARGS ?=
test-openflow-conformance: setup-peers build
	flock /tmp/sluice-cpu.lock $(PY) tests/functional/of_conformance.py $(OFC_ARGS)

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
		--phy memif,veth --direction uni,bidir --sizes 64,256,1024,1500,9000,imix --trials 4 \
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

# docs/install.md. The build directory is configured for PREFIX (a prefix of /usr puts the
# configuration in /etc); meson installs into DESTDIR/PREFIX, and keeps a log of what it
# installed, which `make uninstall` reads (dist/uninstall.sh).
PREFIX  ?= /usr/local
DESTDIR ?=
SYSCONFDIR = $(if $(filter /usr,$(PREFIX)),/etc,etc)

install: $(BUILD)/build.ninja
	meson configure $(BUILD) -Dprefix=$(PREFIX) -Dsysconfdir=$(SYSCONFDIR)
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild --destdir "$(DESTDIR)"

uninstall:
	DESTDIR="$(DESTDIR)" dist/uninstall.sh $(BUILD)

# The Debian package (docs/install.md): dpkg-buildpackage in a copy of the tree (the files
# git tracks or would track), then lintian; the .deb lands in $(BUILD)/deb/.
VERSION := $(shell cat VERSION)
PKG_DIR := $(BUILD)/deb
PKG_SRC := $(PKG_DIR)/sluice-$(VERSION)
DEB     := $(PKG_DIR)/sluice_$(VERSION)_$(shell dpkg --print-architecture).deb

pkg-deb:
	scripts/setup.sh --no-huge
	rm -rf $(PKG_DIR) && mkdir -p $(PKG_SRC)
	git ls-files -z --cached --others --exclude-standard | \
		xargs -0 sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done' sh | \
		xargs -0 cp --parents -t $(PKG_SRC)
	cd $(PKG_SRC) && dpkg-buildpackage -us -uc -b
	lintian --fail-on error,warning\
		$(PKG_DIR)/sluice_$(VERSION)_*.changes
	@echo "pkg-deb: $(DEB)"

pkg-test: $(DEB)
	scripts/pkg-test.sh $(DEB)

$(DEB):
	$(MAKE) --no-print-directory pkg-deb

clean:
	rm -rf $(BUILD)
