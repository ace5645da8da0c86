#!/bin/bash
# sluice-gen's own speed (issue 17, "Generator headroom"; docs/gen.md, SPEED), against
# dpdk-testpmd in the same placement and against the switches it drives:
#  tx   sluice-gen --role tx into a null port vs testpmd txonly, alone on CPU $TXCPU;
#  rx   sluice-gen --role rx --check none from a null port vs testpmd rxonly, likewise;
#  v2v  through each switch of $SWITCHES on CPU 1 (two vhost-user ports, patched), the
#       generator and sink in one loop on CPU 0: sluice-gen txrx --bidir in each of $MODES
#       vs testpmd flowgen (generator and sink in one loop, both ways), and sluice-gen's
#       headroom there: 1 / busy_fraction, the rate its loop could reach over the rate the
#       switch gave it. Two testpmd processes (txonly + rxonly) on one CPU would measure the
#       scheduler (PLATFORM.md), so testpmd's one-loop mode stands in for them.
# Every run is labelled by the vCPU placement (sluice-placement beside it); a ratio pairs
# runs of one round, and is kept only when both have the same label. Frames are 64 B with
# FCS for both (testpmd --txpkts=60).
# Run it under the shared lock, a part at a time if the whole is too long:
#   flock /tmp/sluice-cpu.lock bench/gen-speed.sh [tx] [rx] [v2v]
# Environment: ROUNDS (3), DUR seconds a run (5), TXCPU (1), SWITCHES ("testpmd sluiced"),
# MODES (sluice-gen option sets for v2v, ';'-separated, each "name=options"; "-vec" modes
# take DPDK's vector receive path on the generator's virtio-user ports; modes named "raw..."
# use sluice-gen's own virtio driver, virtio-raw ports, instead of virtio-user: docs/gen.md
# SPEED).
set -u
top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
gen="$top/build/tools/gen/sluice-gen"
placement="$top/bin/sluice-placement"
rounds=${ROUNDS:-3}; dur=${DUR:-5}; txcpu=${TXCPU:-1}
switches=${SWITCHES:-testpmd sluiced}
vec="--virtio-args mrg_rxbuf=0,in_order=0,vectorized=1"
modes=${MODES:-stamped=;count-only=--check none;refcnt=--check none --tx-frames refcnt;stamped-vec=$vec;count-only-vec=--check none $vec;raw-stamped=;raw-count-only=--check none}
parts=${*:-tx rx v2v}
work=$(mktemp -d /tmp/sluice-genspeed-XXXXXX)
results="$work/results.jsonl"
switch_pid=
cleanup() {
	[ -n "$switch_pid" ] && kill -INT "$switch_pid" 2>/dev/null && wait "$switch_pid"
	[ -n "${keep:-}" ] || rm -rf "$work"
	rm -f /dev/hugepages/gs-*map_*     # this script's own DPDK prefixes only
}
trap cleanup EXIT
[ -x "$gen" ] || { echo "gen-speed: build first (make build)" >&2; exit 1; }
tpmd=(dpdk-testpmd --no-pci --log-level='*:warning')

# The majority label of the placement samples in FILE.
label_of() {
	python3 - "$1" <<'EOF'
import collections, json, sys
c = collections.Counter(json.loads(l)["label"] for l in open(sys.argv[1]) if l.startswith("{"))
c.pop("unknown", None)
print(c.most_common(1)[0][0] if c else "unknown")
EOF
}

# Starts the placement monitor for the next run (stopped by end_placement).
start_placement() {
	"$placement" --duration "$((dur + 4))" >"$work/pl.json" 2>/dev/null &
	pl_pid=$!
}
end_placement() {
	kill "$pl_pid" 2>/dev/null; wait "$pl_pid" 2>/dev/null
	label_of "$work/pl.json"
}

# The median over testpmd's per-second statistics of the sum over its N ports of "$1-pps",
# the first 2 periods left out; Mpps.
testpmd_mpps() {
	python3 - "$1" "$2" "$3" <<'EOF'
import statistics, sys
key, ports, log = sys.argv[1] + "-pps:", int(sys.argv[2]), sys.argv[3]
vals = [int(l.split(key)[1].split()[0]) for l in open(log, errors="replace") if key in l]
sums = [sum(vals[i:i + ports]) for i in range(0, len(vals) - ports + 1, ports)][2:]
print("%.3f" % (statistics.median(sums) / 1e6) if sums else "0")
EOF
}

# One result line: part, round, what ran, its rate (Mpps), placement, sluice-gen's summary.
record() {
	python3 - "$@" >>"$results" <<'EOF'
import json, sys
part, rnd, who, mpps, label, summary = sys.argv[1:7]
r = {"part": part, "round": int(rnd), "who": who, "mpps": float(mpps), "placement": label}
if summary:
    d = json.load(open(summary))
    r.update(busy=d.get("busy_fraction"), lost=d.get("lost"), tx=d.get("tx_packets"),
             cpf=d.get("busy_cycles_per_frame"), tx_frames=d.get("tx_frames"))
print(json.dumps(r))
EOF
	tail -n 1 "$results" | python3 -c "import json,sys; r=json.load(sys.stdin); print('   round %(round)d %(who)-28s %(mpps)7.2f Mpps  %(placement)s' % r + ('  busy %.2f lost %d' % (r['busy'], r['lost']) if r.get('busy') is not None else ''))"
}

gen_mpps() {   # FIELD of the summary in Mpps
	python3 -c "import json; print('%.3f' % (json.load(open('$work/g.json'))['$1'] / 1e6))"
}

# Runs sluice-gen with the given options, labelled; records it as PART/ROUND/WHO with FIELD.
run_gen() {
	local part=$1 rnd=$2 who=$3 field=$4; shift 4
	rm -f "$work/g.json"
	start_placement
	if ! "$gen" "$@" --duration "$dur" --warmup 1 --out "$work/g.json" >"$work/g.log" 2>&1; then
		end_placement >/dev/null
		echo "   round $rnd $who: sluice-gen failed: $(tail -n 2 "$work/g.log")"
		return
	fi
	record "$part" "$rnd" "$who" "$(gen_mpps "$field")" "$(end_placement)" "$work/g.json"
}

# Runs testpmd (options after --) for DUR + 5 s (its start takes seconds), labelled; records "$KEY-pps" over N ports.
run_testpmd() {
	local part=$1 rnd=$2 who=$3 key=$4 ports=$5; shift 5
	start_placement
	timeout -s INT "$((dur + 5))" "${tpmd[@]}" "$@" --stats-period 1 >"$work/t.log" 2>&1 </dev/null
	record "$part" "$rnd" "$who" "$(testpmd_mpps "$key" "$ports" "$work/t.log")" "$(end_placement)" ""
}

part_tx() {
	echo "tx: into a null port, alone on CPU $txcpu, 64 B, $dur s a run"
	for r in $(seq "$rounds"); do
		run_testpmd tx "$r" "testpmd txonly" Tx 1 --lcores "0@$txcpu,1@$txcpu" --in-memory \
			--file-prefix gs-t --vdev net_null0 -- --forward-mode=txonly --txpkts=60 --nb-cores 1
		run_gen tx "$r" "sluice-gen stamped" tx_pps --cpu "$txcpu" --role tx --port null
		run_gen tx "$r" "sluice-gen count-only" tx_pps --cpu "$txcpu" --role tx --port null \
			--check none
		run_gen tx "$r" "sluice-gen refcnt" tx_pps --cpu "$txcpu" --role tx --port null \
			--check none --tx-frames refcnt
		run_gen tx "$r" "sluice-gen copy" tx_pps --cpu "$txcpu" --role tx --port null \
			--tx-frames copy
	done
}

part_rx() {
	echo "rx: from a null port (it makes the frames), alone on CPU $txcpu, $dur s a run"
	for r in $(seq "$rounds"); do
		run_testpmd rx "$r" "testpmd rxonly" Rx 1 --lcores "0@$txcpu,1@$txcpu" --in-memory \
			--file-prefix gs-r --vdev net_null0 -- --forward-mode=rxonly --nb-cores 1
		run_gen rx "$r" "sluice-gen count-only" rx_pps --cpu "$txcpu" --role rx --port null:rx=1 \
			--check none
	done
}

start_switch() {   # $1: testpmd or sluiced, on CPU 1 with two vhost-user ports a.sock, b.sock
	rm -f "$work"/a.sock "$work"/b.sock
	case $1 in
	testpmd)
		"${tpmd[@]}" --lcores 0@0,1@1 --file-prefix gs-sw --single-file-segments \
			--vdev "net_vhost0,iface=$work/a.sock,queues=1" \
			--vdev "net_vhost1,iface=$work/b.sock,queues=1" \
			-- --forward-mode=io --nb-cores 1 --stats-period 60 >"$work/sw.log" 2>&1 </dev/null &
		switch_pid=$!
		sleep 3;;
	sluiced)
		"$top/build/src/sluiced" --socket "$work/sl.sock" --file-prefix gs-sl --main-cpu 0 \
			--worker-cpus 1 --log-level warning --idle-sleep-us 0 >"$work/sw.log" 2>&1 &
		switch_pid=$!
		for _ in $(seq 50); do [ -S "$work/sl.sock" ] && break; sleep 0.1; done
		local ctl=("$top/bin/sluicectl" --socket "$work/sl.sock")
		"${ctl[@]}" add-switch --mode patch br0 >/dev/null &&
		"${ctl[@]}" add-port br0 a "vhost-user:server,path=$work/a.sock" >/dev/null &&
		"${ctl[@]}" add-port br0 b "vhost-user:server,path=$work/b.sock" >/dev/null &&
		"${ctl[@]}" patch br0 a b >/dev/null || { echo "   sluiced did not start"; return 1; }
		sleep 1;;
	esac
}

stop_switch() {
	kill -INT "$switch_pid" 2>/dev/null; wait "$switch_pid" 2>/dev/null
	switch_pid=
}

part_v2v() {
	local sw mode name opts kind ports
	for sw in $switches; do
		echo "v2v through $sw (CPU 1), 64 B both ways, generator and sink on CPU 0, $dur s a run"
		start_switch "$sw" || continue
		for r in $(seq "$rounds"); do
			run_testpmd "v2v-$sw" "$r" "testpmd flowgen" Rx 2 --lcores 0@0,1@0 --in-memory \
				--single-file-segments --file-prefix gs-fg \
				--vdev "net_virtio_user0,path=$work/a.sock" \
				--vdev "net_virtio_user1,path=$work/b.sock" \
				-- --forward-mode=flowgen --txpkts=60 --nb-cores 1
			IFS=';' read -ra list <<<"$modes"
			for mode in "${list[@]}"; do
				name=${mode%%=*}; opts=${mode#*=}
				kind=virtio-user
				[[ $name == raw* ]] && kind=virtio-raw
				ports=(--port "$kind:path=$work/a.sock" --port "$kind:path=$work/b.sock")
				# shellcheck disable=SC2086  # the mode's options, word-split on purpose
				run_gen "v2v-$sw" "$r" "sluice-gen $name" rx_pps --cpu 0 "${ports[@]}" \
					--bidir $opts
			done
		done
		stop_switch
	done
}

for p in $parts; do
	case $p in
	tx) part_tx;; rx) part_rx;; v2v) part_v2v;;
	*) echo "gen-speed: unknown part '$p' (tx, rx, v2v)" >&2; exit 2;;
	esac
done

echo
echo "Summary: median (min-max) over rounds; ratios pair runs of one round in one placement"
python3 - "$results" <<'EOF'
import collections, json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1])]
def spread(v):
    return "%.2f (%.2f-%.2f, n=%d)" % (statistics.median(v), min(v), max(v), len(v)) if v else "-"
by = collections.defaultdict(dict)             # (part, round) -> who -> row
for r in rows:
    by[(r["part"], r["round"])][r["who"]] = r
fastest = {}                                   # placement -> (switch rate, part)
for part in sorted({r["part"] for r in rows}):
    mine = [r for r in rows if r["part"] == part]
    peer = next(w for w in (r["who"] for r in mine) if w.startswith("testpmd"))
    print(f"{part}: {peer} {spread([r['mpps'] for r in mine if r['who'] == peer])} Mpps")
    for who in dict.fromkeys(r["who"] for r in mine if r["who"] != peer):
        runs = [r for r in mine if r["who"] == who]
        ratios = collections.defaultdict(list)
        for r in runs:
            p = by[(part, r["round"])].get(peer)
            # One CPU alone (tx, rx): the placement of the other does not matter.
            label = r["placement"] if part.startswith("v2v") else "one CPU"
            if p and (p["placement"] == r["placement"] or not part.startswith("v2v")) \
                    and p["mpps"] > 0 and r["mpps"] > 0:
                ratios[label].append(r["mpps"] / p["mpps"])
        line = f"  {who:24s} {spread([r['mpps'] for r in runs])} Mpps"
        for label, v in sorted(ratios.items()):
            line += f"; x testpmd ({label}) {spread(v)}"
        busy = [r["busy"] for r in runs if r.get("busy")]
        if part.startswith("v2v") and busy:
            line += f"; headroom 1/busy {spread([1 / b for b in busy])}"
            for r in runs:
                fastest.setdefault(r["placement"], []).append((r["mpps"], part))
        print(line)
# Per placement: the fastest rate any generator got through any switch, and each mode's
# loop capacity (rate / busy) over it, the headroom goal's measure (issue 17: 1.3x).
for r in rows:
    if r["part"].startswith("v2v") and r["who"].startswith("testpmd"):
        fastest.setdefault(r["placement"], []).append((r["mpps"], r["part"]))
for label, v in sorted(fastest.items()):
    rate, part = max(v)
    print(f"{label}: fastest switch rate {rate:.2f} Mpps ({part}); sluice-gen's loop "
          "capacity (rate / busy) per mode, and its median over that rate:")
    for who in dict.fromkeys(r["who"] for r in rows if r["who"].startswith("sluice-gen")):
        caps = [r["mpps"] / r["busy"] for r in rows if r["part"].startswith("v2v")
                and r.get("busy") and r["placement"] == label and r["who"] == who]
        if caps:
            print(f"  {who:24s} {spread(caps)} Mpps = "
                  f"{statistics.median(caps) / rate:.2f}x")
EOF
