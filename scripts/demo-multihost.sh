#!/bin/sh
# demo-multihost.sh: two sluiced "hosts" joined by VXLAN (docs/multihost.md).
#
#   scripts/demo-multihost.sh [--faucet] up    make it: namespaces, veths, daemons, switches
#   scripts/demo-multihost.sh test             ping and iperf3 between the hosts' VMs, counters
#   scripts/demo-multihost.sh down             remove everything it made (only that)
#
# Each "host" is a network namespace (dmA, dmB) running its own sluiced, with a switch br0
# holding a "VM" (namespace dmA-vm / dmB-vm, on a veth, af_packet port) and a vxlan port
# (VNI 100) over the host's underlay port: one end of a veth pair between dmA and dmB,
# 10.200.0.1 and 10.200.0.2. The VMs are 192.168.100.1 and .2, MTU 1450 (VXLAN's 50 bytes).
# br0 is a learn switch; with --faucet it is a flow switch, and ONE Faucet (namespace dmC,
# the controllers' network, reached from dmA and dmB over veths 10.201.1.0/30 and
# 10.201.2.0/30) controls both: datapaths 0xa and 0xb, VM and vxlan port in one VLAN.
# Runs as root. State: /run/sluice-demo (sockets, logs, pids, faucet.yaml).
set -eu

top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
SLUICED=${SLUICED:-$top/build/src/sluiced}
CTL="$top/bin/sluicectl"
AGENT="$top/bin/sluice-ofagent"
FAUCET=${FAUCET:-$top/.venv/bin/faucet}
RUN=/run/sluice-demo
VNI=${VNI:-100}
OF_PORT=6653       # Faucet's, in its own namespace dmC
PROM_PORT=9302
faucet=no

usage() {
	sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
	exit "${1:-0}"
}

ctl() {     # ctl HOST VERB ARGS...
	h=$1
	shift
	"$CTL" --socket "$RUN/$h.sock" "$@"
}

start_host() {     # start_host HOST CPU LOCAL REMOTE VMADDR N
	h=$1 cpu=$2 local=$3 remote=$4 vmaddr=$5 n=$6
	ip netns add "dm$h-vm"
	ip -n "dm$h" link set lo up
	ip -n "dm$h-vm" link set lo up
	ip link add "dm${h}vm" netns "dm$h" type veth peer name eth0 netns "dm$h-vm"
	ip -n "dm$h" link set "dm${h}vm" up
	ip -n "dm$h-vm" link set eth0 mtu 1450
	ip -n "dm$h-vm" addr add "$vmaddr/24" dev eth0
	ip -n "dm$h-vm" link set eth0 up
	agent=--no-ofagent
	[ "$faucet" = no ] || agent="--ofagent=$AGENT"
	ip netns exec "dm$h" "$SLUICED" --socket "$RUN/$h.sock" --file-prefix "sluicedemo$h" \
		--main-cpu 0 --worker-cpus "$cpu" "$agent" >"$RUN/$h.log" 2>&1 &
	echo $! >"$RUN/$h.pid"
	i=0
	until ctl "$h" show >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "sluiced of $h did not start: $RUN/$h.log" >&2; exit 1; }
		sleep 0.1
	done
	ctl "$h" add-switch under --mode patch
	ctl "$h" add-port under ul "af_packet:iface=ul$h"
	if [ "$faucet" = no ]; then
		ctl "$h" add-switch br0 --mode learn
	else
		ctl "$h" add-switch br0 --mode flow
	fi
	ctl "$h" add-port br0 vm "af_packet:iface=dm${h}vm"     # OpenFlow port 1
	ctl "$h" add-port br0 vx "vxlan:underlay=ul,local_ip=$local,remote_ip=$remote,vni=$VNI"
	if [ "$faucet" = yes ]; then
		ctl "$h" set-datapath-id br0 "0x$(echo "$h" | tr AB ab)"
		ctl "$h" set-controller br0 "tcp:10.201.$n.1:$OF_PORT"
	fi
}

faucet_yaml() {
	cat <<EOF
vlans:
  tenant:
    vid: $VNI
dps:
  host-a:
    dp_id: 0xa
    hardware: "Open vSwitch"
    interfaces:
      1: {native_vlan: tenant, description: "VM dmA-vm"}
      2: {native_vlan: tenant, description: "vxlan to host-b"}
  host-b:
    dp_id: 0xb
    hardware: "Open vSwitch"
    interfaces:
      1: {native_vlan: tenant, description: "VM dmB-vm"}
      2: {native_vlan: tenant, description: "vxlan to host-a"}
EOF
}

metrics() {     # Faucet's Prometheus metrics, read in its namespace
	ip netns exec dmC python3 -c "import urllib.request, sys
sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$PROM_PORT/metrics', timeout=5).read().decode())"
}

start_faucet() {    # the controllers' network dmC, a veth to each host, one Faucet
	[ -x "$FAUCET" ] || { echo "no $FAUCET: run scripts/setup.sh (or set FAUCET=)" >&2; exit 1; }
	ip netns add dmC
	ip -n dmC link set lo up
	for h in A B; do
		n=1
		[ "$h" = A ] || n=2
		ip link add mgmt netns "dm$h" type veth peer name "dmC$h" netns dmC
		ip -n "dm$h" addr add "10.201.$n.2/30" dev mgmt
		ip -n "dm$h" link set mgmt up
		ip -n dmC addr add "10.201.$n.1/30" dev "dmC$h"
		ip -n dmC link set "dmC$h" up
	done
	faucet_yaml >"$RUN/faucet.yaml"
	ip netns exec dmC env PATH="$(dirname "$FAUCET"):$PATH" \
		FAUCET_CONFIG="$RUN/faucet.yaml" FAUCET_LOG="$RUN/faucet.log" \
		FAUCET_EXCEPTION_LOG="$RUN/faucet_exception.log" \
		FAUCET_PROMETHEUS_ADDR=127.0.0.1 FAUCET_PROMETHEUS_PORT=$PROM_PORT \
		"$FAUCET" --ryu-ofp-tcp-listen-port $OF_PORT >"$RUN/faucet.out" 2>&1 &
	echo $! >"$RUN/faucet.pid"
	i=0
	until ip netns exec dmC ss -ltn | grep -q ":$OF_PORT "; do
		i=$((i + 1))
		[ $i -lt 300 ] || { echo "Faucet did not start: $RUN/faucet.out" >&2; exit 1; }
		sleep 0.1
	done
}

wait_faucet() {     # both datapaths up in Faucet's metrics
	i=0
	until [ "$(metrics 2>/dev/null | grep -c '^dp_status{.*} 1.0$')" = 2 ]; do
		i=$((i + 1))
		[ $i -lt 300 ] || { echo "Faucet has not both datapaths up: $RUN/faucet.log" >&2; exit 1; }
		sleep 0.1
	done
}

up() {
	[ ! -e "$RUN" ] || { echo "$RUN exists: run '$0 down' first" >&2; exit 1; }
	[ -x "$SLUICED" ] || { echo "no $SLUICED: run 'make build'" >&2; exit 1; }
	# namespaces named dm*: refuse rather than touch someone else's
	for ns in dmA dmB dmA-vm dmB-vm dmC; do
		[ ! -e "/run/netns/$ns" ] || { echo "namespace $ns exists" >&2; exit 1; }
	done
	mkdir -p "$RUN"
	ip netns add dmA
	ip netns add dmB
	ip link add ulA netns dmA type veth peer name ulB netns dmB
	ip -n dmA link set ulA up
	ip -n dmB link set ulB up
	[ "$faucet" = no ] || start_faucet
	# no kernel addresses on the underlay: sluiced owns it, and answers ARP for its local_ip
	start_host A 1 10.200.0.1 10.200.0.2 192.168.100.1 1
	start_host B 1 10.200.0.2 10.200.0.1 192.168.100.2 2
	if [ "$faucet" = yes ]; then
		wait_faucet
		echo "up: Faucet (namespace dmC, $RUN/faucet.yaml) controls datapaths 0xa and 0xb"
	fi
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
	if [ -f "$RUN/faucet.pid" ]; then
		for h in A B; do
			echo "== host $h: controller"
			ctl "$h" get-controller br0
		done
		echo "== Faucet"
		metrics | grep -E '^(dp_status|vlan_hosts_learned|of_dp_connections_total)\{'
	fi
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
	if [ -f "$RUN/faucet.pid" ]; then
		kill "$(cat "$RUN/faucet.pid")" 2>/dev/null || true
	fi
	ip netns del dmC 2>/dev/null || true
	rm -rf "$RUN"
}

if [ "${1:-}" = --faucet ]; then
	faucet=yes
	shift
fi
case "${1:-}" in
up) up ;;
test) test_demo ;;
down) down ;;
-h | --help | help) usage 0 ;;
*) usage 2 ;;
esac
