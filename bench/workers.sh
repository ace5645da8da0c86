#!/bin/bash
# One worker against two (issue 17, "Many cores"; docs/cores.md, "One worker against two").
# sluice-bench's arrangements need a CPU for the generator, so on a two-CPU machine they
# cannot give two workers a CPU each; endless null sources (null:rx=1) need no generator.
# Two sources, each patched to a null sink, in three arrangements, a round of each in turn:
#   1    one worker on CPU 1 polls both sources;
#   1,1  two workers on CPU 1, a source each (they share the CPU: the scheduler's cost);
#   0,1  two workers on CPUs 0 and 1, a source each (the control thread sleeps on CPU 0).
# The rate is what the sinks sent over the last DUR seconds (the first second left out),
# and the cost is the workers' busy TSC cycles per packet over the same time.
# Run it under the shared lock:  flock /tmp/sluice-cpu.lock bench/workers.sh
# Environment: ROUNDS (3), DUR seconds a run (5), ARRANGEMENTS ("1 1,1 0,1").
set -u
top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
sluiced="$top/build/src/sluiced"
ctl="$top/bin/sluicectl"
rounds=${ROUNDS:-3}; dur=${DUR:-5}
arrangements=${ARRANGEMENTS:-1 1,1 0,1}
work=$(mktemp -d /tmp/sluice-workers-XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$work"
	rm -f /dev/hugepages/bw-*map_*; rm -rf /var/run/dpdk/bw-*   # this script's prefixes only
}
trap cleanup EXIT
[ -x "$sluiced" ] || { echo "workers.sh: build first (make build)" >&2; exit 1; }

# Workers' packets and busy cycles, and the sinks' transmitted packets, as one JSON line.
sample() {
	"$ctl" --socket "$1" --json stats | python3 -c '
import json, sys, time
r = json.load(sys.stdin)
sent = sum(p["tx_packets"] for s in r["switches"] for p in s["ports"])
print(json.dumps({"t": time.monotonic(), "sent": sent,
                  "busy": sum(w["busy_cycles"] for w in r["workers"]),
                  "packets": sum(w["packets"] for w in r["workers"])}))'
}

run() {   # $1: the worker CPUs; prints one JSON line
	local cpus=$1 sock="$work/s.sock" prefix="bw-${1//,/}"
	"$sluiced" --socket "$sock" --file-prefix "$prefix" --no-state --main-cpu 0 \
		--worker-cpus "$cpus" --idle-sleep-us 0 --log-level warning >"$work/log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
	"$ctl" --socket "$sock" add-switch sw >/dev/null
	for i in 1 2; do
		"$ctl" --socket "$sock" add-port sw "src$i" null:rx=1 >/dev/null
		"$ctl" --socket "$sock" add-port sw "dst$i" null: >/dev/null
		"$ctl" --socket "$sock" patch sw "src$i" "dst$i" >/dev/null
	done
	if [ "$cpus" != "${cpus#*,}" ]; then   # two workers: a source each
		"$ctl" --socket "$sock" set-rxq src1 0 0 >/dev/null
		"$ctl" --socket "$sock" set-rxq src2 0 1 >/dev/null
	else
		"$ctl" --socket "$sock" set-rxq src1 0 0 >/dev/null
		"$ctl" --socket "$sock" set-rxq src2 0 0 >/dev/null
	fi
	sleep 1
	a=$(sample "$sock"); sleep "$dur"; b=$(sample "$sock")
	kill "$pid"; wait "$pid"; pid=
	rm -f /dev/hugepages/"$prefix"map_*; rm -rf /var/run/dpdk/"$prefix"
	python3 -c '
import json, sys
a, b = json.loads(sys.argv[2]), json.loads(sys.argv[3])
dt = b["t"] - a["t"]
print(json.dumps({"workers": sys.argv[1], "mpps": (b["sent"] - a["sent"]) / dt / 1e6,
                  "cycles_per_packet": (b["busy"] - a["busy"]) / max(1, b["packets"] - a["packets"])}))' \
		"$cpus" "$a" "$b"
}

for r in $(seq "$rounds"); do
	for cpus in $arrangements; do
		run "$cpus" | tee -a "$work/results.jsonl"
	done
done
python3 - "$work/results.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = [r["mpps"] for r in rows if r["workers"] == "1"]
print(f"{'worker CPUs':12} {'Mpps median':>12} {'min-max':>14} {'cycles/pkt':>11} {'vs 1 worker':>12}")
for w in dict.fromkeys(r["workers"] for r in rows):
    m = [r["mpps"] for r in rows if r["workers"] == w]
    c = [r["cycles_per_packet"] for r in rows if r["workers"] == w]
    ratios = [x / y for x, y in zip(m, base)] if base else []
    print(f"{w:12} {statistics.median(m):12.2f} {min(m):6.2f}-{max(m):<7.2f} "
          f"{statistics.median(c):11.1f} {statistics.median(ratios) if ratios else 0:11.2f}x")
EOF
