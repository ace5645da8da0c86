#!/usr/bin/env bash
# Builds DPDK's example applications that sluice-bench runs as peers and VNFs, from the
# sources Debian's dpdk-doc ships, against the installed DPDK (each with its own Makefile,
# pkg-config libdpdk). Nothing of DPDK is kept in the repository: the sources are copied
# into the build directory and built there. Idempotent: an example already built is skipped.
#
#   scripts/dpdk-examples.sh [DIR]   build into DIR (default build/dpdk-examples)
#
# Needs dpdk-doc (scripts/setup.sh --peers installs it), libdpdk-dev and a C compiler; not
# root. Result: DIR/l2fwd/build/l2fwd, DIR/l3fwd/build/l3fwd, DIR/skeleton/build/basicfwd.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/build/dpdk-examples}
src=${DPDK_EXAMPLES_SRC:-/usr/share/dpdk/examples}

say() { echo "dpdk-examples: $*"; }
die() { echo "dpdk-examples: error: $*" >&2; exit 1; }

case "${1:-}" in
-h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

[ -d "$src" ] || die "$src is missing: install Debian's dpdk-doc (scripts/setup.sh --peers)"
pkg-config --exists libdpdk || die "pkg-config finds no libdpdk: install libdpdk-dev"

# l3fwd (22.11) asks every port for Rx checksum offload and exits where a port lacks it, as
# virtio-user does ("requested Rx offloads 0xe doesn't match Rx offloads capabilities"): it
# leaves IPv4 header checksums to the NIC. The copy built here asks for none, so it runs
# on virtio-user and checks no checksums (sluice-gen's are right); nothing else changes.
l3fwd_without_rx_checksum() {
	local want='.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,'
	[ "$(grep -cF -- "$want" "$1")" -eq 1 ] \
		|| die "l3fwd: '$want' not found once in $1 (another DPDK version?)"
	sed -i 's/\.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,/.offloads = 0, \/* sluice: virtio-user has no Rx checksum offload *\//' "$1"
}

# example directory, binary name; l3fwd includes ../common, so common is copied beside it.
examples=("l2fwd l2fwd" "l3fwd l3fwd" "skeleton basicfwd")
mkdir -p "$out"
[ -d "$out/common" ] || cp -r "$src/common" "$out/common"
for e in "${examples[@]}"; do
	read -r dir app <<<"$e"
	if [ -x "$out/$dir/build/$app" ]; then
		say "$app: built ($out/$dir/build/$app)"
		continue
	fi
	[ -d "$src/$dir" ] || die "$src/$dir is missing (dpdk-doc incomplete?)"
	rm -rf "$out/$dir"
	cp -r "$src/$dir" "$out/$dir"
	[ "$dir" != l3fwd ] || l3fwd_without_rx_checksum "$out/$dir/main.c"
	say "building $app"
	make -s -C "$out/$dir" >"$out/$dir/make.log" 2>&1 \
		|| die "building $app failed: see $out/$dir/make.log"
	[ -x "$out/$dir/build/$app" ] || die "$app not found after make (see $out/$dir/make.log)"
done
say "done: $out"
