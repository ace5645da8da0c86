#!/usr/bin/env bash
# make pkg-test (docs/install.md): installs the .deb that make pkg-deb built, runs the
# installed sluiced and sluicectl against each other, purges the package and checks that
# none of its files, directories of its own, or the daemon's state are left. Run as root,
# on a machine where the sluice package is not installed already (it is refused then).
#   scripts/pkg-test.sh build/deb/sluice_VERSION_ARCH.deb
set -euo pipefail

deb=$(readlink -f "$1")
version=$(dpkg-deb -f "$deb" Version)
sock=/run/sluice/pkgtest.sock
prefix="slpkgtest$$"
log=$(mktemp /tmp/sluice-pkgtest.XXXXXX.log)
pid=
made_run_dir=0
group_was_there=0
getent group sluice >/dev/null && group_was_there=1

say() { echo "pkg-test: $*"; }
fail() { echo "pkg-test: FAILED: $*" >&2; [ -s "$log" ] && sed 's/^/  sluiced: /' "$log" >&2; exit 1; }

cleanup() {
	[ -z "$pid" ] || { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
	rm -f /dev/hugepages/"$prefix"map_* "$sock"
	rm -rf /var/run/dpdk/"$prefix" "$log"
	[ "$made_run_dir" -eq 0 ] || rmdir /run/sluice 2>/dev/null || true
	if dpkg-query -W -f='${Status}' sluice 2>/dev/null | grep -q installed; then
		apt-get purge -y -qq sluice >/dev/null 2>&1 || dpkg --purge sluice >/dev/null 2>&1 || true
	fi
	# The package leaves the group (Debian's policy); the test does not, if it made it.
	[ "$group_was_there" -eq 1 ] || groupdel sluice 2>/dev/null || true
}

if dpkg-query -W -f='${Status}' sluice 2>/dev/null | grep -q 'install ok installed'; then
	echo "pkg-test: the sluice package is installed already; not touching it" >&2
	exit 2
fi
trap cleanup EXIT

say "installing $deb"
export DEBIAN_FRONTEND=noninteractive
# As a user runs them: Python writes its byte-code caches into the package's directories,
# which the purge must remove too.
unset PYTHONDONTWRITEBYTECODE
apt-get install -y -qq --no-install-recommends "$deb" >/dev/null || fail "apt-get install"

# What the package holds, for the leftover check below.
mapfile -t files < <(dpkg -L sluice | sort -r)

say "checking the installed files"
for f in /usr/sbin/sluiced /usr/bin/sluicectl /usr/bin/sluice-gen /usr/bin/sluice-bench \
	/lib/systemd/system/sluiced.service /etc/sluice/sluiced.conf /etc/default/sluiced \
	/usr/libexec/sluice/sluice-hugepages /usr/share/bash-completion/completions/sluicectl; do
	[ -e "$f" ] || fail "$f is not installed"
done
getent group sluice >/dev/null || fail "the package did not create the group sluice"
[ "$(sluiced --version | awk '{print $2}')" = "$version" ] || fail "sluiced --version"
[ "$(sluicectl --version)" = "sluicectl $version" ] || fail "sluicectl --version"
for page in sluiced sluicectl sluice-gen sluice-bench; do
	man -w "$page" >/dev/null || fail "man $page"
done
sluice-bench --help >/dev/null || fail "sluice-bench --help"

say "running the installed sluiced and sluicectl"
/usr/libexec/sluice/sluice-hugepages || fail "sluice-hugepages"
[ -d /run/sluice ] || { mkdir /run/sluice; made_run_dir=1; }
/usr/sbin/sluiced --socket "$sock" --file-prefix "$prefix" --no-state --socket-group sluice \
	--main-cpu 0 --worker-cpus "$(($(nproc) - 1))" >"$log" 2>&1 &
pid=$!
for _ in $(seq 300); do
	sluicectl --socket "$sock" --timeout 1 version >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || fail "sluiced exited"
	sleep 0.1
done
sluicectl --socket "$sock" version | grep -q "^sluiced $version " || fail "sluicectl version"
[ "$(stat -c %G "$sock")" = sluice ] || fail "the socket is not group sluice's"
sluicectl --socket "$sock" add-switch br0 --mode learn >/dev/null || fail "add-switch"
sluicectl --socket "$sock" add-port br0 p0 null: >/dev/null || fail "add-port"
sluicectl --socket "$sock" add-port br0 p1 null:rx=1 >/dev/null || fail "add-port (rx=1)"
sleep 0.5
sluicectl --socket "$sock" show | grep -q "p1" || fail "show"
rx=$(sluicectl --socket "$sock" --json stats br0 --port p1 | python3 -c \
	'import json,sys; print(json.load(sys.stdin)["switches"][0]["ports"][0]["rx_packets"])')
[ "$rx" -gt 0 ] || fail "no traffic counted on p1"
sluicectl --socket "$sock" del-switch br0 >/dev/null || fail "del-switch"
kill -TERM "$pid"
wait "$pid" || fail "sluiced did not stop cleanly on SIGTERM"
pid=
say "sluiced $version ran, received $rx frames on p1, and stopped"

say "purging the package"
apt-get purge -y -qq sluice >/dev/null || fail "apt-get purge"
left=()
for f in "${files[@]}"; do
	[ -e "$f" ] || continue
	# Directories the package shares with the system (/usr/bin, /etc, ...) stay.
	[ -d "$f" ] && ! [[ "$f" == */sluice || "$f" == */sluice/* ]] && continue
	left+=("$f")
done
for f in /etc/sluice /var/lib/sluice /etc/default/sluiced "$sock"; do
	[ -e "$f" ] && left+=("$f")
done
[ ${#left[@]} -eq 0 ] || fail "left behind: ${left[*]}"
say "passed: installed, ran, purged, nothing left (${#files[@]} paths checked)"
