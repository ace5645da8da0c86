#!/bin/bash
# sluice-gen's own speed against dpdk-testpmd as a generator (issue: sluice-gen, "Speed"):
#  1. tx into a null port: sluice-gen --role tx vs testpmd txonly, each alone on CPU 1;
#  2. v2v through testpmd io-forward (on CPU 1, two vhost-user ports): sluice-gen txrx in one
#     process on CPU 0 vs testpmd txonly + testpmd rxonly as two processes on CPU 0.
# Alternated ROUNDS times (default 3), DUR seconds each (default 6). Prints Mpps per run.
set -u
top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
gen="$top/build/tools/gen/sluice-gen"
rounds=${ROUNDS:-3}; dur=${DUR:-6}
work=$(mktemp -d /tmp/sluice-genspeed-XXXXXX)
switch_pid=
cleanup() {
	[ -n "$switch_pid" ] && kill -INT "$switch_pid" 2>/dev/null && wait "$switch_pid"
	rm -rf "$work"
	rm -f /dev/hugepages/gs-*map_*     # this script's own DPDK prefixes only
}
trap cleanup EXIT
tpmd=(dpdk-testpmd --no-pci --log-level='*:warning')
median_pps() {   # the median of testpmd's per-second "$1-pps" figures, skipping the first 2
	grep -E "$1-pps" | awk '{print $2}' | tail -n +3 | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1e6}'
}

echo "1. tx into a null port, CPU 1, $dur s"
for r in $(seq "$rounds"); do
	"$gen" --cpu 1 --role tx --port null --duration "$dur" --out "$work/g.json" >/dev/null 2>&1
	g=$(python3 -c "import json;print('%.2f'%(json.load(open('$work/g.json'))['offered_pps']/1e6))")
	t=$(timeout -s INT "$((dur + 2))" "${tpmd[@]}" --lcores 0@0,1@1 --in-memory --file-prefix gs-t \
		--vdev net_null0 -- --forward-mode=txonly --nb-cores 1 --stats-period 1 2>&1 | median_pps Tx)
	echo "   round $r: sluice-gen $g Mpps, testpmd txonly $t Mpps"
done

echo "2. v2v through testpmd io (CPU 1), 64 B, $dur s"
"${tpmd[@]}" --lcores 0@0,1@1 --file-prefix gs-sw --single-file-segments \
	--vdev "net_vhost0,iface=$work/a.sock,queues=1" --vdev "net_vhost1,iface=$work/b.sock,queues=1" \
	-- --forward-mode=io --nb-cores 1 --stats-period 60 >/dev/null 2>&1 </dev/null &
switch_pid=$!
sleep 3
for r in $(seq "$rounds"); do
	"$gen" --cpu 0 --port "virtio-user:path=$work/a.sock" --port "virtio-user:path=$work/b.sock" \
		--duration "$dur" --out "$work/g.json" >/dev/null 2>&1
	g=$(python3 -c "import json;print('%.2f'%(json.load(open('$work/g.json'))['rx_pps']/1e6))")
	timeout -s INT "$((dur + 3))" "${tpmd[@]}" --lcores 0@0,1@0 --in-memory --single-file-segments \
		--file-prefix gs-rx --vdev "net_virtio_user0,path=$work/b.sock" -- \
		--forward-mode=rxonly --nb-cores 1 --stats-period 1 >"$work/rx.log" 2>&1 &
	sleep 1
	timeout -s INT "$((dur + 1))" "${tpmd[@]}" --lcores 0@0,1@0 --in-memory --single-file-segments \
		--file-prefix gs-tx --vdev "net_virtio_user0,path=$work/a.sock" -- \
		--forward-mode=txonly --nb-cores 1 --stats-period 1 >/dev/null 2>&1
	wait %2 2>/dev/null
	t=$(median_pps Rx <"$work/rx.log")
	echo "   round $r: sluice-gen txrx $g Mpps received, testpmd txonly+rxonly $t Mpps received"
done
