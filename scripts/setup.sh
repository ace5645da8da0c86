#!/usr/bin/env bash
# Installs what sluice needs on Debian 12 and reserves hugepages. Idempotent: every step
# checks first and does nothing when its work is already done. Run as root.
#
#   scripts/setup.sh            packages, Python venv, hugepages
#   scripts/setup.sh --no-huge  skip the hugepage step (build-only machines)
#   scripts/setup.sh --peers    also the peer switches and report tools of sluice-bench:
#                               openvswitch-switch-dpdk, and DPDK's examples l2fwd,
#                               l3fwd and basicfwd built from dpdk-doc into
#                               build/dpdk-examples/
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
venv="$top/.venv"
hugepages_wanted=${SLUICE_HUGEPAGES:-1024}     # 2 MiB pages: 2 GiB, room for daemon + clients
do_huge=1
do_peers=0

for arg in "$@"; do
	case "$arg" in
	--no-huge) do_huge=0 ;;
	--peers) do_peers=1 ;;
	-h|--help)
		sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
		exit 0 ;;
	*) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
	esac
done

say() { echo "setup: $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (apt, hugepages and DPDK need it)"

debian_packages=(
	build-essential pkg-config meson ninja-build
	dpdk dpdk-dev libdpdk-dev dpdk-doc
	libjansson-dev libcmocka-dev libbpf-dev libxdp-dev libpcap-dev libnuma-dev
	iproute2 tcpdump procps psmisc
	iperf3 iputils-ping ethtool
	clang libclang-rt-14-dev
	chromium
	scdoc python3-shtab debhelper dpkg-dev lintian fakeroot
	openvswitch-switch
)
# dpdk-dev has dpdk-dumpcap, which `sluicectl capture` runs (it must be the DPDK sluiced is
# built on: a secondary process attaches to the daemon's shared memory).
# clang and its runtime build the libFuzzer target; headless Chromium renders the HTML report
# in a test of `make test`.
# scdoc makes the man pages and python3-shtab sluicectl's shell completion (for the system
# Python that installed commands run on); debhelper, dpkg-dev, lintian and fakeroot build
# and check the Debian package (make pkg-deb, docs/install.md).
# openvswitch-switch: OVS's userspace datapath is the oracle of flow mode's differential test
# (tests/functional/test_flow_ovs_diff.py, `ovs-appctl ofproto/trace`) and the tester of
# the OpenFlow tests, in `make test`; a private ovsdb-server and ovs-vswitchd are started by
# the tests (no kernel module, no system service). It is also the ovs-netdev peer.
# dpdk-doc ships the sources of DPDK's examples, which --peers builds (l2fwd, l3fwd, basicfwd).
# sluice-bench's peers (scripts/setup.sh --peers): OVS built on DPDK (a private ovsdb-server
# and ovs-vswitchd are started by the harness; no system service is used).
peer_packages=(openvswitch-switch-dpdk)

missing_debian_packages() {
	local p
	local wanted=("${debian_packages[@]}")
	[ "$do_peers" -eq 0 ] || wanted+=("${peer_packages[@]}")
	for p in "${wanted[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
			|| echo "$p"
	done
}

install_debian_packages() {
	local missing
	missing=$(missing_debian_packages | tr '\n' ' ')
	if [ -z "$missing" ]; then
		say "Debian packages: all present"
		return
	fi
	say "installing Debian packages: $missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || die "apt-get update failed"
	# The image deletes cached .deb files after each dpkg call, so the first install of a
	# large set can fail with "cannot access archive"; the same command then succeeds.
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing \
		|| apt-get install -y -qq --no-install-recommends $missing \
		|| die "apt-get install failed for: $missing"
}

# rich and matplotlib: sluice-bench's progress bar and report figures; MLRsearch: its
# NDR/PDR search (FD.io CSIT's); prometheus-client: `sluicectl metrics`, the Prometheus
# exporter (docs/capture-metrics.md).
# shtab: sluicectl's shell completion (python -m sluice.completion).
# os-ken 3.1.0: sluice-ofagent's OpenFlow 1.3 structures (docs/openflow.md), the version
# Faucet 1.10 pins (os-ken 4.x has no osken-manager); faucet: the OpenFlow tests' controller.
# Faucet pins prometheus-client 0.24.1, which `sluicectl metrics` works with too.
python_packages=(pytest pytest-timeout scapy ruff rich matplotlib MLRsearch==1.2.1
	prometheus-client shtab os-ken==3.1.0 faucet==1.10.12)

setup_venv() {
	local py=python3
	[ -x "$venv/bin/python" ] || { say "creating venv $venv"; "$py" -m venv "$venv" \
		|| die "cannot create a venv with $py (install python3-venv)"; }
	if "$venv/bin/python" -c 'import pytest, pytest_timeout, scapy, rich, matplotlib, MLRsearch, prometheus_client, shtab, os_ken, faucet' 2>/dev/null && [ -x "$venv/bin/ruff" ]; then
		say "Python packages: all present"
		return
	fi
	say "installing Python packages: ${python_packages[*]}"
	"$venv/bin/pip" install -q --disable-pip-version-check "${python_packages[@]}" \
		|| die "pip install failed"
}

reserve_hugepages() {
	local nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages have
	[ -w "$nr" ] || die "$nr is not writable: no 2 MiB hugepage support"
	# sluice-bench keeps every switch of a scenario running (stopped) at once: with two
	# OVS-DPDK instances of 1 GiB socket memory each beside sluiced, testpmd and the
	# generator, 2 GiB ran out and the second OVS could not start. 6 GiB for the peers.
	if [ "$do_peers" -eq 1 ] && [ -z "${SLUICE_HUGEPAGES:-}" ] && [ "$hugepages_wanted" -lt 3072 ]; then
		hugepages_wanted=3072
	fi
	have=$(cat "$nr")
	if [ "$have" -lt "$hugepages_wanted" ]; then
		say "reserving $hugepages_wanted hugepages of 2 MiB (had $have)"
		echo "$hugepages_wanted" > "$nr"
		have=$(cat "$nr")
		[ "$have" -ge 512 ] || die "only $have hugepages could be reserved; need at least 512 (1 GiB)"
	else
		say "hugepages: $have of 2 MiB reserved"
	fi
	mkdir -p /dev/hugepages
	if ! grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts; then
		say "mounting hugetlbfs on /dev/hugepages"
		mount -t hugetlbfs nodev /dev/hugepages || die "cannot mount hugetlbfs"
	fi
}

# DPDK's example applications (dpdk-doc's sources, in the list above) as sluice-bench's VNFs
# and basicfwd peer, built against the installed DPDK; ones already built are skipped.
build_dpdk_examples() {
	"$top/scripts/dpdk-examples.sh" "$top/build/dpdk-examples" \
		|| die "building DPDK's examples failed"
}

install_debian_packages
setup_venv
[ "$do_peers" -eq 0 ] || build_dpdk_examples
[ "$do_huge" -eq 0 ] || reserve_hugepages
say "done"
