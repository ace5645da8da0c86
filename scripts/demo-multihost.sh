#!/bin/sh
# demo-multihost.sh: two sluiced "hosts" joined by VXLAN (docs/multihost.md).
#
#   scripts/demo-multihost.sh up      make it: namespaces, veths, two daemons, switches
#   scripts/demo-multihost.sh test    ping and iperf3 between the hosts' VMs, then counters
#   scripts/demo-multihost.sh down    remove everything it made (only that)
#
# Each "host" is a network namespace (dmA, dmB) running its own sluiced, with a learn switch
# br0 holding a "VM" (namespace dmA-vm / dmB-vm, on a veth, af_packet port) and a vxlan port
# (VNI 100) over the host's underlay port: one end of a veth pair between dmA and dmB,
# 10.200.0.1 and 10.200.0.2. The VMs are 192.168.100.1 and .2, MTU 1450 (VXLAN's 50 bytes).
# Runs as root. State: /run/sluice-demo (sockets, logs, pids).
set -eu

top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
SLUICED=${SLUICED:-$top/build/src/sluiced}
CTL="$top/bin/sluicectl"
RUN=/run/sluice-demo
VNI=${VNI:-100}

usage() {
	sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
	exit "${1:-0}"
}

ctl() {     # ctl HOST VERB ARGS...
	h=$1
	shift
	"$CTL" --socket "$RUN/$h.sock" "$@"
}

start_host() {     # start_host HOST CPU LOCAL REMOTE VMADDR
	h=$1 cpu=$2 local=$3 remote=$4 vmaddr=$5
	ip netns add "dm$h-vm"
	ip -n "dm$h" link set lo up
	ip -n "dm$h-vm" link set lo up
	ip link add "dm${h}vm" netns "dm$h" type veth peer name eth0 netns "dm$h-vm"
	ip -n "dm$h" link set "dm${h}vm" up
	ip -n "dm$h-vm" link set eth0 mtu 1450
	ip -n "dm$h-vm" addr add "$vmaddr/24" dev eth0
	ip -n "dm$h-vm" link set eth0 up
	ip netns exec "dm$h" "$SLUICED" --socket "$RUN/$h.sock" --file-prefix "sluicedemo$h" \
		--main-cpu 0 --worker-cpus "$cpu" >"$RUN/$h.log" 2>&1 &
	echo $! >"$RUN/$h.pid"
	i=0
	until ctl "$h" show >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "sluiced of $h did not start: $RUN/$h.log" >&2; exit 1; }
		sleep 0.1
	done
	ctl "$h" add-switch under --mode patch
	ctl "$h" add-port under ul "af_packet:iface=ul$h"
	ctl "$h" add-switch br0 --mode learn
	ctl "$h" add-port br0 vm "af_packet:iface=dm${h}vm"
	ctl "$h" add-port br0 vx "vxlan:underlay=ul,local_ip=$local,remote_ip=$remote,vni=$VNI"
}

up() {
	[ ! -e "$RUN" ] || { echo "$RUN exists: run '$0 down' first" >&2; exit 1; }
	[ -x "$SLUICED" ] || { echo "no $SLUICED: run 'make build'" >&2; exit 1; }
	# namespaces named dm*: refuse rather than touch someone else's
	for ns in dmA dmB dmA-vm dmB-vm; do
		[ ! -e "/run/netns/$ns" ] || { echo "namespace $ns exists" >&2; exit 1; }
	done
	mkdir -p "$RUN"
	ip netns add dmA
	ip netns add dmB
	ip link add ulA netns dmA type veth peer name ulB netns dmB
	ip -n dmA link set ulA up
	ip -n dmB link set ulB up
	# no kernel addresses on the underlay: sluiced owns it, and answers ARP for its local_ip
	start_host A 1 10.200.0.1 10.200.0.2 192.168.100.1
	start_host B 1 10.200.0.2 10.200.0.1 192.168.100.2
	echo "up: VMs dmA-vm (192.168.100.1) and dmB-vm (192.168.100.2), VNI $VNI"
	echo "try: ip netns exec dmA-vm ping 192.168.100.2; $0 test; $0 down"
}

test_demo() {
	ip netns exec dmA-vm ping -c 3 -W 2 192.168.100.2 >/dev/null 2>&1 || true   # ARP
	ip netns exec dmA-vm ping -c 5 -i 0.2 192.168.100.2
	ip netns exec dmB-vm iperf3 -s -1 >/dev/null 2>&1 &
	sleep 0.5
	ip netns exec dmA-vm iperf3 -c 192.168.100.2 -t 3
	wait
	for h in A B; do
		echo "== host $h"
		ctl "$h" stats
	done
}

down() {
	for h in A B; do
		if [ -f "$RUN/$h.pid" ]; then
			pid=$(cat "$RUN/$h.pid")
			kill "$pid" 2>/dev/null || true
			i=0
			while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
				i=$((i + 1))
				sleep 0.1
			done
		fi
		rm -f /dev/hugepages/sluicedemo${h}map_*
		rm -rf "/var/run/dpdk/sluicedemo$h"
		ip netns del "dm$h-vm" 2>/dev/null || true
		ip netns del "dm$h" 2>/dev/null || true
	done
	rm -rf "$RUN"
}

case "${1:-}" in
up) up ;;
test) test_demo ;;
down) down ;;
-h | --help | help) usage 0 ;;
*) usage 2 ;;
esac
