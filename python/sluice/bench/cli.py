"""sluice-bench: the switch-comparison method as one command (docs/bench.md).

    sluice-bench run --scenario v2v --switch sluice,testpmd --sizes 64,1500
    sluice-bench compare sluice testpmd --scenario p2p --phy memif
    sluice-bench report bench/results/20261122T174500Z
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sluice.bench import arrange, idle, scenarios, sweep, vnfs
from sluice.bench.runner import Runner, Settings
from sluice.bench.scenarios import Scenario
from sluice.bench.stats import IMIX, MAX_FRAME
from sluice.bench.switches import ADAPTERS

REPO = Path(__file__).resolve().parents[3]
PROG = "sluice-bench"
RAW_GEN_MAX_FRAME = 1518   # the longest frame sluice-gen's virtio-raw ports send

# make bench's matrix (issue 7): v2v and p2p (both stand-ins) at 64 and 1500 B one way,
# loopback-1 and loopback-3 at 64 B; latency at three loads for p2p and at 1 Mpps for v2v.
DEFAULT_MATRIX: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("v2v", "memif", (64, 1500)),
    ("p2p", "memif", (64, 1500)),
    ("p2p", "veth", (64, 1500)),
    ("loopback-1", "memif", (64,)),
    ("loopback-3", "memif", (64,)),
)
DEFAULT_MATRIX_LATENCY = ("loads", "fixed:1000000")
DEFAULT_MATRIX_LATENCY_SCENARIOS = ("p2p",)
NDR_WARMUP_S = 0.5     # uncounted start of every NDR/PDR trial
DEFAULT_SWITCHES = "sluice,testpmd,ovs-dpdk,linux-bridge,vpp:learn"
RATE_UNITS = {"pps": 1.0, "kpps": 1e3, "mpps": 1e6, "": 1.0, "k": 1e3, "m": 1e6}


def rate(text: str) -> float:
    """Packets per second from '1Mpps', '500kpps' or '250000'."""
    low = text.strip().lower()
    num = low.rstrip("kmps")
    unit = low[len(num):]
    try:
        value = float(num) * RATE_UNITS[unit]
    except (ValueError, KeyError) as e:
        raise argparse.ArgumentTypeError(f"bad rate {text!r}: e.g. 1Mpps, 500kpps, 250000"
                                         ) from e
    if value <= 0:
        raise argparse.ArgumentTypeError(f"rate {text!r} must be positive")
    return value


def latency_modes(text: str) -> tuple[str, ...]:
    """'loads' and/or 'fixed:RATE' (RATE normalised to packets per second)."""
    out = []
    for word in csv(text):
        if word in ("loads", "echo"):
            out.append(word)
        elif word.startswith("fixed:"):
            out.append(f"fixed:{rate(word.split(':', 1)[1]):.0f}")
        else:
            raise argparse.ArgumentTypeError(f"unknown latency mode {word!r}: loads, echo "
                                             "or fixed:RATE (e.g. fixed:1Mpps)")
    return tuple(out)


def loads(text: str) -> tuple[float, ...]:
    """Fractions of R+ from '0.1,0.5,0.99'."""
    try:
        out = tuple(float(w) for w in csv(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"bad load list {text!r}") from e
    if not out or any(not 0 < f <= 1.0 for f in out):
        raise argparse.ArgumentTypeError("loads are fractions of R+ in (0, 1]")
    return out


def csv(text: str) -> list[str]:
    """Comma-separated words, empty ones dropped."""
    return [w.strip() for w in text.split(",") if w.strip()]


def sizes(text: str) -> tuple[int, ...]:
    """Frame sizes (bytes incl. FCS) from '64,1500,imix' (IMIX: stats.IMIX)."""
    try:
        out = tuple(IMIX if w.lower() == "imix" else int(w) for w in csv(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"bad size list {text!r}") from e
    if not out or any(not 64 <= s <= MAX_FRAME for s in out if s != IMIX):
        raise argparse.ArgumentTypeError(f"sizes are 64..{MAX_FRAME} bytes, FCS included "
                                         "(above 1518: jumbo frames), or imix")
    return out


def std_sizes(text: str) -> tuple[int, ...]:
    """sizes() without jumbo frames (sluice-sockets sends at most 1518 B)."""
    out = sizes(text)
    if any(s > 1518 for s in out):
        raise argparse.ArgumentTypeError("sizes are 64..1518 bytes, FCS included, or imix")
    return out


def cpu_list(text: str) -> tuple[int, ...]:
    """CPU numbers from '0' or '0,1'."""
    try:
        out = tuple(int(w) for w in csv(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"bad CPU list {text!r}") from e
    if not out or any(c < 0 for c in out):
        raise argparse.ArgumentTypeError(f"bad CPU list {text!r}")
    return out


def vnf_kind(text: str) -> str:
    """--vnf: a kind of vnfs.KINDS, or process kinds in chain order (l3fwd,l2fwd)."""
    try:
        return vnfs.cli_kind(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--vnf ")) from e


def switch_keys(text: str) -> tuple[str, ...]:
    """name:mode keys from '--switch': a bare name means every mode of that adapter."""
    keys: list[str] = []
    for word in csv(text):
        name, _, mode = word.partition(":")
        if name not in ADAPTERS:
            raise argparse.ArgumentTypeError(
                f"unknown switch {name!r}: one of {', '.join(ADAPTERS)}")
        modes = ADAPTERS[name].modes
        named = modes + ADAPTERS[name].variants
        if mode and mode not in named:
            raise argparse.ArgumentTypeError(f"{name} has modes {', '.join(named)}")
        keys += [f"{name}:{m}" for m in ([mode] if mode else modes)]
    return tuple(dict.fromkeys(keys))


def add_common(p: argparse.ArgumentParser) -> None:
    """Options shared by run and compare."""
    p.add_argument("--scenario", default="v2v",
                   help="comma-separated: v2v, p2p, p2v (physical into a VNF), v2p (a VNF "
                        "out of the physical port), loopback-1..5, chain-mixed (physical -> "
                        "an L3 VNF -> an L2 VNF -> physical, steered as loopback-2) "
                        "(default v2v)")
    p.add_argument("--pairs", type=int, default=1,
                   help="NvsN: sender/receiver pairs at once, 1..4, each with its own two "
                        "ports (default 1); not for loopback chains")
    p.add_argument("--phy", default="memif",
                   help="physical-port stand-ins for p2p and loopback, comma-separated: "
                        "memif (a memif link the generator owns) and/or veth (af_xdp, "
                        "falling back to af_packet; rows marked kernel_path) (default memif)")
    p.add_argument("--direction", default="uni",
                   help="comma-separated: uni and/or bidir (default uni)")
    p.add_argument("--sizes", type=sizes, default=(64, 1500),
                   help="frame sizes in bytes including the 4-byte FCS, and/or imix "
                        "(64:570:1518 at 7:4:1; rows carry its mean, 354, and size_label "
                        "imix) (default 64,1500); above 1518 B (up to 9018, a 9000 B MTU) "
                        "only switches that take jumbo frames run it, sluice with mtu=9000 "
                        "ports, the others are skipped with a note")
    p.add_argument("--trials", type=int, default=2,
                   help="generator runs per switch (alternating: per switch against the "
                        "baseline, orders alternate) and size (default 2)")
    p.add_argument("--duration", type=float, default=12.0,
                   help="seconds per generator run (default 12); alternating runs last at "
                        "least the warm-up plus four windows, so that each switch has a "
                        "window between two of the other's")
    p.add_argument("--window", type=float, default=1.0,
                   help="alternating window, seconds (default 1.0)")
    p.add_argument("--settle", type=float, default=0.3,
                   help="uncounted start of each window, seconds (default 0.3)")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds not counted at the start: whole one-second samples in "
                        "interleaved trials, the windows that start inside it in alternating "
                        "ones (default 1; 0 when --duration is under 3 s)")
    p.add_argument("--cooldown", type=float, default=0.0,
                   help="seconds not counted at the end of an interleaved trial (default 0: "
                        "closed-loop sending stops at once)")
    p.add_argument("--switch-cpu", type=int, default=1,
                   help="CPU of every switch's forwarding thread (default 1)")
    p.add_argument("--gen-cpu", type=int, default=0,
                   help="CPU of sluice-gen and of the switches' sleeping control threads "
                        "(default 0)")
    p.add_argument("--vpp-prefix", type=Path, default=None, metavar="DIR",
                   help="the VPP install the vpp switch runs (DIR/bin/vpp, DIR/bin/vppctl); "
                        "default: vpp and vppctl on PATH (docs/bench.md, 'VPP')")
    p.add_argument("--rules", type=int, default=None, metavar="N",
                   help="an ACL of N 5-tuple rules (0..100000; generated, seeded; none "
                        "matches the traffic) above the steering rules of every "
                        "rule-programmable switch: sluice:flow, sluice:flow-normal, "
                        "ovs-dpdk:flows, ovs-netdev:flows*, vpp:acl (the same list for "
                        "all; rows carry `rules`); chain-mixed's firewall stage takes N "
                        "rules (default 100) at the L3 VNF's output (default: none)")
    p.add_argument("--rule-masks", type=int, default=16, metavar="K",
                   help="distinct masks of the --rules ACL, 1..64 (default 16; fewer when "
                        "there are fewer rules)")
    p.add_argument("--rule-seed", type=int, default=1,
                   help="seed of the --rules ACL (default 1)")
    p.add_argument("--flows", type=int, default=None, metavar="M",
                   help="distinct 5-tuples sluice-gen sends (sluice-gen --flows M: source "
                        "and destination IPs and the UDP source port vary; 1..1000000; "
                        "default 1)")
    p.add_argument("--allow-shared-cpu", action="store_true",
                   help="run even when two busy pollers would share a CPU; rows are then "
                        "marked oversubscribed and kept out of comparisons")
    p.add_argument("--vnf", type=vnf_kind, default="inline",
                   help="who serves loopback's VNFs: inline (default), DPDK's l2fwd inside "
                        "sluice-gen's loop, the only arrangement that measures the switch on "
                        "2 CPUs; or a process per VNF attached with virtio-user: l2fwd or "
                        "l3fwd (DPDK's examples: scripts/dpdk-examples.sh builds them) or "
                        "testpmd-mac (dpdk-testpmd --forward-mode=mac). chain-mixed takes "
                        "inline (sluice-gen's L3 then L2 VNF) or l3fwd,l2fwd (the two examples "
                        "as processes, in chain order). Process VNFs busy-poll "
                        "beside the generator or the switch on 2 CPUs: they need "
                        "--allow-shared-cpu, their rows are marked oversubscribed, and they "
                        "are functional checks, not measurements")
    p.add_argument("--vnf-cpus", type=cpu_list, default=None,
                   help="CPUs of process VNFs, comma-separated, taken in turn along the "
                        "chain (default: --gen-cpu)")
    p.add_argument("--gen", type=Path, default=None,
                   help="the sluice-gen to use (default build/tools/gen/sluice-gen); "
                        "loopback needs one with --vnf-in")
    p.add_argument("--gen-driver", choices=("auto", "virtio-user", "virtio-raw"),
                   default="auto",
                   help="the generator's end of each vhost-user link it sends and receives "
                        "on: DPDK's virtio-user or sluice-gen's own virtio driver, "
                        "virtio-raw, which leaves it more headroom (docs/gen.md, 'VIRTIO-RAW "
                        "PORTS'; one frame size up to 1518 B); auto (default): virtio-raw for "
                        "run, compare and sweep when every frame size is fixed and at most "
                        "1518 B and a sweep varies neither size nor ring, else virtio-user. "
                        "Where the switch's vhost-user ports are clients, as OVS-DPDK's, the "
                        "generator's end is the server, server=1, with either driver")
    p.add_argument("--placement-monitor", type=Path, default=None,
                   help="the vCPU-placement monitor (default bin/sluice-placement; rows are "
                        "'unlabelled' without one)")
    p.add_argument("--latency", type=latency_modes, default=(),
                   help="latency trials after the throughput ones, comma-separated: 'loads' "
                        "(round-trip time at --loads fractions of each switch's R+ for p2p "
                        "and loopback-1..4, as the seven-switch comparison's RTT table) "
                        "and/or 'fixed:RATE' (the four-port v2v round trip at RATE, e.g. "
                        "fixed:1Mpps as that study's v2v table) and/or 'echo' (v2v: a ping "
                        "client and a reflector on the two containers' ports, 1000 pps in "
                        "bursts of --echo-bursts, mean RTT per frame, as the container "
                        "benchmark study); default none")
    p.add_argument("--echo-bursts", type=lambda t: tuple(int(w) for w in csv(t)),
                   default=(4, 8, 16, 32, 64, 128),
                   help="burst lengths of --latency echo (default 4,8,16,32,64,128)")
    p.add_argument("--loads", type=loads, default=(0.10, 0.50, 0.99),
                   help="fractions of R+ for --latency loads (default 0.1,0.5,0.99)")
    p.add_argument("--latency-sizes", type=sizes, default=(64,),
                   help="frame sizes of the latency trials (default 64, as published)")
    p.add_argument("--latency-scenarios", default="",
                   help="restrict --latency loads to these scenario families, e.g. p2p "
                        "(default every p2p and loopback-1..4 scenario of the run)")
    p.add_argument("--latency-duration", type=float, default=6.0,
                   help="seconds of each latency trial, the first --warmup not counted "
                        "(default 6)")
    p.add_argument("--min-near", type=int, default=0,
                   help="add throughput trials until each (switch, size) has this many "
                        "trials with near-placement figures, or --budget runs out "
                        "(default 0: only --trials; make bench uses 3)")
    p.add_argument("--budget", type=float, default=0.0,
                   help="seconds the extra trials of --min-near may add to the whole run, "
                        "shared out between its scenarios (default 0)")
    p.add_argument("--out", type=Path, default=None,
                   help="results directory (default bench/results/<UTC timestamp>/)")
    p.add_argument("--no-report", action="store_true",
                   help="do not write report.md and report.html at the end")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (trials in order, switches skipped and why) and its "
                        "expected length, and start nothing")


def batches(text: str) -> tuple[int, ...]:
    """Batch sizes from '1,32': 1 means send()/recv(), more sendmmsg()/recvmmsg()."""
    try:
        out = tuple(int(w) for w in csv(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"bad batch list {text!r}") from e
    if not out or any(not 1 <= b <= 1024 for b in out):
        raise argparse.ArgumentTypeError("batch sizes are 1..1024")
    return out


def apis(text: str) -> tuple[str, ...]:
    """Socket APIs from 'udp,raw'."""
    out = tuple(csv(text))
    bad = [a for a in out if a not in ("udp", "raw")]
    if not out or bad:
        raise argparse.ArgumentTypeError(f"--api takes udp and/or raw, not {text!r}")
    return out


def add_sockets(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The `sockets` subcommand: the kernel socket baseline (docs/bench.md)."""
    p = sub.add_parser(
        "sockets", help="the kernel socket baseline: two namespaces on a Linux bridge",
        description="The container benchmark framework's socket baseline: a sender and a "
                    "receiver in two namespaces ('containers') joined by a Linux bridge over "
                    "veths, exchanging fixed-size frames through UDP or raw (AF_PACKET) "
                    "sockets, one frame a call (batch 1: send/recv) or a batch "
                    "(sendmmsg/recvmmsg). One sluice-sockets process, sender thread on "
                    "--tx-cpu, receiver on --rx-cpu. Rows (switch 'sockets', scenario "
                    "v2v/veth, kernel_path) go to results.jsonl.")
    p.add_argument("--api", type=apis, default=("udp", "raw"),
                   help="comma-separated: udp and/or raw (default udp,raw)")
    p.add_argument("--batch", type=batches, default=(1, 32),
                   help="comma-separated batch sizes: 1 = send/recv, N > 1 = sendmmsg/"
                        "recvmmsg of N (default 1,32)")
    p.add_argument("--sizes", type=std_sizes, default=(64, 1500),
                   help="frame sizes in bytes including the 4-byte FCS (default 64,1500)")
    p.add_argument("--duration", type=float, default=10.0,
                   help="seconds of sending per run (default 10)")
    p.add_argument("--trials", type=int, default=2,
                   help="runs per api, batch and size, round-robin (default 2)")
    p.add_argument("--warmup", type=float, default=1.0,
                   help="first seconds not counted (default 1)")
    p.add_argument("--cooldown", type=float, default=0.0,
                   help="last seconds not counted (default 0)")
    p.add_argument("--tx-cpu", type=int, default=0, help="the sender thread's CPU (default 0)")
    p.add_argument("--rx-cpu", type=int, default=1,
                   help="the receiver thread's CPU (default 1)")
    p.add_argument("--tool", type=Path, default=None,
                   help="the sluice-sockets to use (default build/tools/sockets/sluice-sockets)")
    p.add_argument("--placement-monitor", type=Path, default=None,
                   help="the vCPU-placement monitor (default bin/sluice-placement)")
    p.add_argument("--out", type=Path, default=None,
                   help="results directory (default bench/results/<UTC timestamp>/)")
    p.add_argument("--no-report", action="store_true",
                   help="do not write report.md and report.html at the end")


def add_flow_ctl(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The `flow-ctl` subcommand: control-plane speed of the rule-programmable switches."""
    p = sub.add_parser(
        "flow-ctl", help="control-plane speed: add-flows of 100,000 rules, replace-flows "
                         "of 10,000 under traffic",
        description="Per switch (v2v, one sluice-gen loop as generator and sink): the time "
                    "add-flows of --add-rules ACL rules takes from request to answer and the "
                    "daemon's RSS before and after; then R+ with a --replace-rules ACL, and "
                    "traffic at --load x R+ while replace-flows swaps in another ACL of that "
                    "size: its time and whether any frame was lost. Rows go to "
                    "OUT/flow-ctl.jsonl (docs/bench.md).")
    p.add_argument("--switch", type=switch_keys,
                   default=switch_keys("sluice:flow,ovs-dpdk:flows"),
                   help="comma-separated, flow switches only (default "
                        "sluice:flow,ovs-dpdk:flows)")
    p.add_argument("--add-rules", type=int, default=100_000,
                   help="rules of the add-flows step (default 100000)")
    p.add_argument("--replace-rules", type=int, default=10_000,
                   help="rules of the replace-flows step (default 10000)")
    p.add_argument("--rule-masks", type=int, default=16,
                   help="distinct masks of both ACLs (default 16)")
    p.add_argument("--load", type=float, default=0.5,
                   help="the traffic during replace-flows, a fraction of R+ (default 0.5)")
    p.add_argument("--rplus-seconds", type=float, default=3.0,
                   help="counted seconds of the R+ measurement (default 3)")
    p.add_argument("--traffic-seconds", type=float, default=8.0,
                   help="seconds of traffic around replace-flows (default 8)")
    p.add_argument("--replace-at", type=float, default=3.0,
                   help="seconds into that traffic replace-flows is sent (default 3)")
    p.add_argument("--size", type=int, default=64, help="frame size (default 64)")
    p.add_argument("--gen-ring", type=int, default=16384,
                   help="sluice-gen --ring: zero loss needs rings that outlast the host's "
                        "stalls of a vCPU (default 16384; 0: sluice-gen's own)")
    p.add_argument("--no-control", action="store_true",
                   help="skip the run at the same load without replace-flows")
    p.add_argument("--switch-cpu", type=int, default=1)
    p.add_argument("--gen-cpu", type=int, default=0)
    p.add_argument("--gen", type=Path, default=None, help="the sluice-gen to use")
    p.add_argument("--out", type=Path, default=None,
                   help="results directory (default bench/results/<UTC timestamp>/)")


def run_flow_ctl(args: argparse.Namespace) -> int:
    """`sluice-bench flow-ctl`."""
    from sluice.bench import flowctl, rules
    bad = [k for k in args.switch if k not in ("sluice:flow", "ovs-dpdk:flows")]
    if bad:
        print(f"{PROG} flow-ctl: {', '.join(bad)}: only sluice:flow and ovs-dpdk:flows "
              "take rule lists here", file=sys.stderr)
        return 2
    if not (1 <= args.add_rules <= rules.MAX_RULES and 1 <= args.replace_rules
            <= rules.MAX_RULES and 0 < args.load <= 1 and args.replace_at < args.traffic_seconds):
        print(f"{PROG} flow-ctl: rules 1..{rules.MAX_RULES}, --load in (0, 1], "
              "--replace-at before the end of --traffic-seconds", file=sys.stderr)
        return 2
    keys = []
    for key in args.switch:
        why = ADAPTERS[key.split(":")[0]].available(REPO)
        if why:
            print(f"skipped {key}: {why}", file=sys.stderr)
        else:
            keys.append(key)
    s = flowctl.CtlSettings(tuple(keys), args.add_rules, args.replace_rules, args.rule_masks,
                            args.load, args.rplus_seconds, args.traffic_seconds,
                            args.replace_at, args.size, args.gen_ring, not args.no_control)
    out = args.out or default_out()
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    rows = flowctl.run(s, REPO, out, args.switch_cpu, args.gen_cpu, args.gen,
                       lambda m: print(m, file=sys.stderr))
    print(flowctl.table(rows))
    print(f"results: {out / 'flow-ctl.jsonl'}")
    return 0 if rows else 1


def run_sockets(args: argparse.Namespace) -> int:
    """`sluice-bench sockets`."""
    from sluice.bench.sockets import SocketSettings, SocketsRun
    if args.duration - args.warmup - args.cooldown < 1:
        print(f"{PROG}: --duration {args.duration} leaves under one counted second",
              file=sys.stderr)
        return 2
    s = SocketSettings(apis=args.api, batches=args.batch, sizes=args.sizes,
                       duration=args.duration, trials=args.trials, warmup=args.warmup,
                       cooldown=args.cooldown, tx_cpu=args.tx_cpu, rx_cpu=args.rx_cpu,
                       out=args.out or default_out(), repo=REPO, tool=args.tool,
                       monitor=args.placement_monitor)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    rows = SocketsRun(s, print).run()
    print(f"results: {s.out / 'results.jsonl'} ({len(rows)} rows), manifest: "
          f"{s.out / 'manifest.json'}")
    if not args.no_report and rows:
        from sluice.bench import report
        path = report.write(s.out)
        print(f"report: {path} and {path.with_suffix('.html')}")
    return 0 if rows else 1


def add_idle(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The `idle` subcommand: idle CPU and the idle sleep's latency (docs/bench.md)."""
    p = sub.add_parser(
        "idle", help="an idle switch's CPU, and the latency sluiced's idle sleep adds",
        description="Each switch with two vhost-user ports and no traffic, alone: its "
                    "processes' CPU (utime+stime from /proc, per thread too) over --seconds, "
                    "as %% of one core, --trials times round-robin; then p2p/memif 64 B "
                    "round trips at 0.10 of R+ through sluiced with its default idle sleep "
                    "(sluice:patch+idle) and busy-polling (sluice:patch), in one run. "
                    "Results under OUT/idle/; the report gets 'Idle CPU and idle-sleep "
                    "latency'.")
    p.add_argument("--switch", type=switch_keys, default=idle.DEFAULT_CPU_SWITCHES,
                   help="switches whose idle CPU is measured (default "
                        f"{','.join(idle.DEFAULT_CPU_SWITCHES)}; unavailable ones are "
                        "skipped with a note)")
    p.add_argument("--seconds", type=float, default=10.0,
                   help="length of one idle-CPU trial (default 10)")
    p.add_argument("--trials", type=int, default=3,
                   help="idle-CPU trials per switch (default 3)")
    p.add_argument("--latency-trials", type=int, default=1,
                   help="latency trials per sluice variant, 0 for none (default 1)")
    p.add_argument("--latency-duration", type=float, default=4.0,
                   help="seconds of each latency trial, the first not counted (default 4)")
    p.add_argument("--switch-cpu", type=int, default=1,
                   help="CPU of every switch's forwarding thread (default 1)")
    p.add_argument("--gen-cpu", type=int, default=0,
                   help="CPU of sluice-gen and the switches' control threads (default 0)")
    p.add_argument("--gen", type=Path, default=None, help="the sluice-gen to use")
    p.add_argument("--placement-monitor", type=Path, default=None,
                   help="the vCPU-placement monitor (default bin/sluice-placement)")
    p.add_argument("--vpp-prefix", type=Path, default=None, metavar="DIR",
                   help="the VPP install, when --switch names vpp")
    p.add_argument("--out", type=Path, default=None,
                   help="results directory (default bench/results/<UTC timestamp>/)")
    p.add_argument("--no-report", action="store_true",
                   help="do not write report.md and report.html at the end")


def idle_base(args: argparse.Namespace) -> Settings:
    """The settings the idle stage takes its CPUs, tools and output directory from."""
    return Settings(units=(), switches=(), trials=1, duration=0.0, window=1.0, settle=0.3,
                    warmup=1.0, cooldown=0.0, switch_cpu=args.switch_cpu,
                    gen_cpu=args.gen_cpu, allow_shared_cpu=False, baseline="",
                    out=args.out or default_out(), repo=REPO, gen=args.gen,
                    monitor=args.placement_monitor, switch_options=switch_options(args))


def run_idle(args: argparse.Namespace) -> int:
    """`sluice-bench idle`."""
    if args.seconds < 1 or args.trials < 1 or args.latency_duration < 2:
        print(f"{PROG}: --seconds and --latency-duration need at least 1 and 2 s, --trials "
              "at least 1", file=sys.stderr)
        return 2
    base = idle_base(args)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    sub = idle.run(base, idle.IdleSettings(
        cpu_switches=args.switch, seconds=args.seconds, trials=args.trials,
        latency=args.latency_trials > 0, latency_trials=max(args.latency_trials, 1),
        latency_duration=args.latency_duration), lambda m: print(m, file=sys.stderr))
    print(f"results: {sub}")
    if not args.no_report:
        from sluice.bench import report
        path = report.write(base.out)
        print(f"report: {path} and {path.with_suffix('.html')}")
    return 0 if idle.load_cpu(base.out) else 1


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    ap = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compare software switches (sluice, dpdk-testpmd io, OVS-DPDK, OVS "
                    "userspace without DPDK, Linux bridge, VPP) in NFV scenarios on a small "
                    "machine, by the published method: "
                    "one sluice-gen loop as generator, sink and inline VNFs on one CPU, the "
                    "switch's forwarding thread alone on the other, ratios between userspace "
                    "switches from alternating windows. See docs/bench.md.",
        epilog="examples:\n"
               "  sluice-bench run --scenario v2v --switch sluice,testpmd --sizes 64,1500\n"
               "  sluice-bench run --matrix default --duration 2\n"
               "  sluice-bench compare testpmd testpmd --duration 20\n"
               "  sluice-bench sweep --param chain --values 1,2,3 --switch sluice:patch\n"
               "  sluice-bench run --scenario loopback-1 --vnf l2fwd --allow-shared-cpu\n"
               "  sluice-bench sockets --api udp,raw --batch 1,32 --sizes 64 --duration 10\n"
               "  sluice-bench idle --trials 3 --seconds 10\n"
               "  sluice-bench report bench/results/20261122T174500Z\n")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="run a matrix of scenarios, switches and sizes",
                         description="Run scenarios x switches x sizes and write results.jsonl, "
                                     "manifest.json and the report.")
    add_common(run)
    run.add_argument("--switch", type=switch_keys, default=switch_keys(DEFAULT_SWITCHES),
                     help="comma-separated switches, NAME or NAME:MODE: sluice (patch, learn), "
                          "testpmd (io), basicfwd (fwd: DPDK's skeleton example, no logic; "
                          "scripts/dpdk-examples.sh builds it), ovs-dpdk (normal, flows), "
                          "ovs-netdev (normal, flows with afxdp ports, normal-system, "
                          "flows-system; veth only), linux-bridge (learn; veth only), vpp "
                          "(learn: an L2 bridge domain, xconnect: l2 xconnect pairs; an "
                          "installed VPP, see --vpp-prefix). In v2v the "
                          "veth-only switches run over the containers' veth pairs (v2v/veth, "
                          "kernel_path). A bare name runs every mode. "
                          f"(default {DEFAULT_SWITCHES})")
    run.add_argument("--baseline", default="testpmd",
                     help="switch every other userspace switch is alternated against "
                          "(default testpmd; the first switch when it is absent)")
    run.add_argument("--matrix", choices=("default",),
                     help="default: make bench's matrix (v2v and p2p memif/veth at 64 and "
                          "1500 B, loopback-1 and -3 at 64 B, one way; latency at three loads "
                          "for p2p and at 1 Mpps for the v2v round trip); overrides "
                          "--scenario, --phy, --direction, --sizes, --pairs and --latency")
    run.add_argument("--idle-trials", type=int, default=0, metavar="N",
                     help="after the matrix, the idle stage of `sluice-bench idle` with N "
                          "idle-CPU trials of 10 s per switch and one latency trial per "
                          "sluice variant (make bench: 1, about a minute); default 0: none")
    sw = sub.add_parser("sweep", help="one parameter through a list of values, a curve per "
                                      "switch",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="Run the same scenarios once per value of one parameter; "
                                    "rows carry sweep_param and sweep_value and the report "
                                    "draws a curve per switch.",
                        epilog="parameters:\n"
                               "  rate          latency trials at fractions of R+ (0.05..1.0, "
                               "with a '.') or at rates (1Mpps)\n"
                               "  size          frame sizes (64..1518, imix)\n"
                               "  burst         sluice-gen's packets per transmit burst "
                               "(1..512)\n"
                               "  switch-burst  the switch's receive burst (sluiced and "
                               "testpmd --burst, 1..256): VALE's batching curve\n"
                               "  flows         distinct flows, 5-tuples (1..1000000)\n"
                               "  ring          the generator's ring slots, sluice-gen --ring:"
                               " its virtqueues and memif rings (64..16384, powers of two)\n"
                               "  rules         ACL rules above the steering of the "
                               "rule-programmable switches (0..100000; with --rule-masks, "
                               "--flows)\n"
                               "  pairs         NvsN sender/receiver pairs (1..4)\n"
                               "  chain         loopback-N chain length (1..5)\n"
                               "  fanout        destinations a broadcast is flooded to "
                               "(1..16): one sender, N sink ports (replaces --scenario; "
                               "flooding modes only: sluice:learn, ovs-dpdk:normal, vpp:learn)\n"
                               "example:\n"
                               "  sluice-bench sweep --param switch-burst --values 1,4,16,64,256"
                               " --switch sluice:patch,testpmd --scenario v2v --sizes 64\n")
    sw.add_argument("--param", required=True, help="the parameter to sweep (see below)")
    sw.add_argument("--values", type=csv,
                    help="comma-separated values (defaults: fanout 1,2,4,8; rules "
                         "1,100,1000,10000; flows 1,1000,100000,1000000; every other "
                         "parameter needs them)")
    sw.add_argument("--switch", type=switch_keys, default=switch_keys("sluice:patch,testpmd"),
                    help="comma-separated switches as for run (default sluice:patch,testpmd)")
    sw.add_argument("--baseline", default="testpmd", help="as for run (default testpmd)")
    add_common(sw)
    nd = sub.add_parser("ndr", help="NDR and PDR rates with MLRsearch",
                        description="Zero-loss (NDR) and 0.5 % loss (PDR) rates of each switch "
                                    "with FD.io CSIT's MLRsearch; every trial is an open-loop "
                                    "sluice-gen run, one switch at a time, and a search keeps to "
                                    "one vCPU placement (docs/bench.md).")
    nd.add_argument("--switch", type=switch_keys, default=switch_keys("sluice:patch,testpmd"),
                    help="comma-separated switches as for run (default sluice:patch,testpmd)")
    nd.add_argument("--max-rate", type=rate, default=30e6,
                    help="highest load per sending port a search tries (default 30Mpps)")
    nd.add_argument("--trial-seconds", type=float, default=1.0,
                    help="length of every trial (default 1)")
    nd.add_argument("--duration-sum", type=float, default=3.0,
                    help="trial seconds a bound must rest on (default 3; CSIT uses 21)")
    nd.add_argument("--width", type=float, default=0.02,
                    help="relative width at which a search stops (default 0.02)")
    nd.add_argument("--search-budget", type=float, default=300.0,
                    help="seconds one search may take before it gives up (default 300)")
    nd.add_argument("--gen-ring", type=int, default=16384, metavar="N",
                    help="the generator's ring slots (sluice-gen --ring, which sizes "
                         "memif rings and virtqueues too); zero loss needs rings that "
                         "outlast the host's stalls of a vCPU; 0 keeps sluice-gen's "
                         "defaults (default 16384)")
    nd.add_argument("--placement-wait", type=float, default=8.0, metavar="S",
                    help="longest wait before a trial for the search's placement to come "
                         "back, after which the search starts again in the current one "
                         "(default 8)")
    add_common(nd)
    nd.set_defaults(scenario="p2p,v2v", sizes=(64, 256), baseline="testpmd")
    cmp_ = sub.add_parser("compare", help="two switches in alternating windows",
                          description="Ratio of switch A to switch B (NAME or NAME:MODE) "
                                      "from alternating windows; the same switch twice "
                                      "checks the method (expect a ratio near 1).")
    cmp_.add_argument("a", help="switch A, e.g. sluice:patch")
    cmp_.add_argument("b", help="switch B (the baseline), e.g. testpmd")
    add_common(cmp_)
    add_sockets(sub)
    add_idle(sub)
    add_flow_ctl(sub)
    rep = sub.add_parser("report", help="write report.md and report.html for a results dir",
                         description="Read DIR/results.jsonl and DIR/manifest.json; write "
                                     "DIR/report.md, DIR/report.html and figures.")
    rep.add_argument("dir", type=Path, help="a results directory of 'run' or 'compare'")
    return ap


def units(args: argparse.Namespace) -> tuple[tuple[Scenario, tuple[int, ...]], ...]:
    """(scenario, sizes) pairs from the options or the default matrix."""
    if getattr(args, "matrix", None) == "default":
        return tuple((scenarios.parse(n, phy, "uni", vnf=args.vnf), sz)
                     for n, phy, sz in DEFAULT_MATRIX)
    out = []
    for name in csv(args.scenario):
        for direction in csv(args.direction):
            phys = ["memif"] if name == "v2v" else csv(args.phy)
            out += [(scenarios.parse(name, phy, direction, args.pairs, vnf=args.vnf),
                     args.sizes)
                    for phy in phys]
    return tuple(out)


def latency_settings(args: argparse.Namespace) -> dict[str, object]:
    """The latency part of Settings (the default matrix brings its own)."""
    default = getattr(args, "matrix", None) == "default"
    return {"latency": DEFAULT_MATRIX_LATENCY if default else args.latency,
            "latency_scenarios": (DEFAULT_MATRIX_LATENCY_SCENARIOS if default
                                  else tuple(csv(args.latency_scenarios))),
            "loads": args.loads, "latency_sizes": args.latency_sizes,
            "echo_bursts": args.echo_bursts,
            "latency_duration": args.latency_duration}


def default_out() -> Path:
    """bench/results/<UTC timestamp>/ in a checkout; sluice-bench-results/<UTC timestamp>/
    in the current directory when installed."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    if (REPO / "bench").is_dir():
        return REPO / "bench" / "results" / stamp
    return Path.cwd() / "sluice-bench-results" / stamp


def settings(args: argparse.Namespace, keys: tuple[str, ...], baseline: str) -> Settings:
    """Settings from the parsed options; ValueError when they leave nothing to count."""
    check_rule_options(args)
    warmup = args.warmup if args.warmup is not None else (1.0 if args.duration >= 3 else 0.0)
    if args.duration - warmup - args.cooldown < 1:
        raise ValueError(f"--duration {args.duration} leaves under one counted second after "
                         f"--warmup {warmup} and --cooldown {args.cooldown}")
    if args.latency and args.latency_duration - warmup < 1:
        raise ValueError(f"--latency-duration {args.latency_duration} leaves under one counted "
                         f"second after --warmup {warmup}")
    return Settings(units=units(args), switches=keys, trials=args.trials,
                    duration=args.duration, window=args.window, settle=args.settle,
                    warmup=warmup, cooldown=args.cooldown, switch_cpu=args.switch_cpu,
                    gen_cpu=args.gen_cpu, allow_shared_cpu=args.allow_shared_cpu,
                    baseline=baseline, out=args.out or default_out(), repo=REPO,
                    vnf=args.vnf, vnf_cpus=args.vnf_cpus or (), gen=args.gen,
                    monitor=args.placement_monitor, min_near=args.min_near,
                    budget_s=args.budget, switch_options=switch_options(args),
                    gen_extra=("--flows", str(args.flows)) if args.flows else (),
                    **latency_settings(args))  # type: ignore[arg-type]


def gen_driver(args: argparse.Namespace) -> str:
    """--gen-driver with auto resolved: sluice-gen's own virtio driver where it serves (run,
    compare and sweep; every frame size fixed and at most 1518 B; a sweep over neither size
    nor ring, whose values it does not take), DPDK's virtio-user elsewhere (ndr's deep
    rings, IMIX, jumbo frames)."""
    chosen: str = getattr(args, "gen_driver", "virtio-user")
    if chosen != "auto":
        return chosen
    if getattr(args, "command", None) not in ("run", "compare", "sweep"):
        return "virtio-user"
    if getattr(args, "param", None) in ("size", "ring"):
        return "virtio-user"
    every = [size for _, sizes_ in units(args) for size in sizes_]
    fixed = bool(every) and all(size != IMIX and size <= RAW_GEN_MAX_FRAME for size in every)
    return "virtio-raw" if fixed else "virtio-user"


def switch_options(args: argparse.Namespace) -> dict[str, str]:
    """The options adapters read from Context.extra (vpp_prefix; the ACL of --rules; the
    generator's vhost-user driver, gen_vhost)."""
    prefix = getattr(args, "vpp_prefix", None)
    out = {"vpp_prefix": str(prefix.resolve())} if prefix else {}
    if getattr(args, "rules", None) is not None:
        out["rules"] = str(args.rules)
    driver = gen_driver(args)
    if driver != "virtio-user":
        out["gen_vhost"] = driver
        if getattr(args, "gen_driver", "virtio-user") == "auto":
            out["gen_vhost_auto"] = "1"     # adapters not tried with it keep virtio-user
    from sluice.bench import rules
    if getattr(args, "rule_masks", rules.DEFAULT_MASKS) != rules.DEFAULT_MASKS:
        out["rule_masks"] = str(args.rule_masks)
    if getattr(args, "rule_seed", rules.DEFAULT_SEED) != rules.DEFAULT_SEED:
        out["rule_seed"] = str(args.rule_seed)
    return out


def check_rule_options(args: argparse.Namespace) -> None:
    """ValueError for --rules, --rule-masks or --flows out of range."""
    from sluice.bench import rules
    if getattr(args, "rules", None) is not None and not 0 <= args.rules <= rules.MAX_RULES:
        raise ValueError(f"--rules {args.rules}: 0..{rules.MAX_RULES}")
    if hasattr(args, "rule_masks") and not 1 <= args.rule_masks <= 64:
        raise ValueError(f"--rule-masks {args.rule_masks}: 1..64")
    if getattr(args, "flows", None) is not None and not 1 <= args.flows <= 1_000_000:
        raise ValueError(f"--flows {args.flows}: 1..1000000")


def compare_keys(args: argparse.Namespace) -> tuple[tuple[str, ...], str]:
    """The two keys of compare; the same switch twice gets two instances."""
    a, b = switch_keys(args.a), switch_keys(args.b)
    if len(a) != 1 or len(b) != 1:
        raise SystemExit(f"{PROG} compare: name one mode each (e.g. ovs-dpdk:normal)")
    if a == b:
        # Two instances of one switch: the second key carries a marker the runner strips.
        return (a[0], b[0] + "#2"), b[0] + "#2"
    return (a[0], b[0]), b[0]


def run_ndr(args: argparse.Namespace) -> int:
    """sluice-bench ndr: NDR/PDR searches, rows in results.jsonl, the report."""
    try:
        import MLRsearch  # noqa: F401
    except ImportError:
        print(f"{PROG}: the MLRsearch package is missing: run scripts/setup.sh", file=sys.stderr)
        return 2
    ring = args.gen_ring
    if ring and (ring < 64 or ring > 16384 or ring & (ring - 1)):
        print(f"{PROG} ndr: --gen-ring: a power of two from 64 to 16384, or 0", file=sys.stderr)
        return 2
    # Each trial sends for NDR_WARMUP_S more than it counts: the first bursts after the
    # generator's links come up can be refused while the switch's queues start (32 to 9000
    # frames at any rate, seen here), which is no loss of the rate under test.
    args.duration, args.warmup, args.cooldown = (args.trial_seconds + NDR_WARMUP_S,
                                                 NDR_WARMUP_S, 0.0)
    try:
        s = settings(args, args.switch, args.baseline)
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        return dry_run(s, args)
    from sluice.bench import ndr
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    runner = Runner(s, lambda _s, what: print(what, file=sys.stderr),
                    lambda msg: print(msg, file=sys.stderr))
    rows = ndr.run(runner, args.max_rate, {
        "trial_s": args.trial_seconds, "duration_sum": args.duration_sum,
        "width": args.width, "budget_s": args.search_budget},
        ring=args.gen_ring, placement_wait_s=args.placement_wait)
    print(f"results: {s.out / 'results.jsonl'} ({len(rows)} rows)")
    if not args.no_report and rows:
        from sluice.bench import report
        path = report.write(s.out)
        print(f"report: {path} and {path.with_suffix('.html')}")
    return 0 if rows else 1


def dry_run(s: Settings, args: argparse.Namespace) -> int:
    """Prints the plan of S (every value's, for a sweep) and its expected length."""
    plans = (sweep.plans(s, args.param, args.values, rate, sizes)
             if args.command == "sweep" else [s])
    total = 0.0
    for one in plans:
        r = Runner(one, lambda *_: None, lambda msg: print(f"  {msg}"))
        try:
            if args.command == "ndr":
                for scn, keys, specs in r.plan_cache:
                    for size in sorted({sp.size for sp in specs}):
                        print(f"{scn.label()} {size} B: an NDR/PDR search each for "
                              f"{', '.join(keys)} (at most {args.search_budget:.0f} s each)")
                        total += len(keys) * args.search_budget
                continue
            for scn, keys, specs in r.plan_cache:
                print(f"{scn.label()}: {', '.join(keys)}")
                for sp in specs:
                    at = (f" at {sp.load:g} R+" if sp.load is not None else
                          f" at {sp.rate_pps / 1e6:g} Mpps" if sp.rate_pps else "")
                    print(f"  {sp.size} B trial {sp.trial} {sp.method}{at}: "
                          f"{' vs '.join(sp.gen_order)}")
            total += r.total_seconds(r.plan_cache)
        finally:
            r.cleanup_work()
    if args.command == "ndr":
        print(f"at most {total / 60:.1f} min")
        return 0
    print(f"expected: {total / 60:.1f} min without --min-near extras "
          f"(budget {s.budget_s:.0f} s)")
    return 0


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    """The entry point of bin/sluice-bench."""
    args = make_parser().parse_args(argv)
    if args.command == "report":
        from sluice.bench import report
        path = report.write(args.dir)
        print(f"report: {path} and {path.with_suffix('.html')}")
        return 0
    if args.command == "ndr":
        return run_ndr(args)
    if args.command == "sockets":
        return run_sockets(args)
    if args.command == "idle":
        return run_idle(args)
    if args.command == "flow-ctl":
        return run_flow_ctl(args)
    if args.command == "compare":
        keys, baseline = compare_keys(args)
        args.trials = max(args.trials, 2)
    else:
        keys, baseline = args.switch, args.baseline
    try:
        s = settings(args, keys, baseline)
        if args.command == "sweep":
            if args.values is None:
                args.values = sweep.default_values(args.param)
            sweep.check_values(args.param, args.values)
            for v in args.values:
                sweep.settings_for(s, args.param, v, rate, sizes)
    except (ValueError, argparse.ArgumentTypeError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        try:
            return dry_run(s, args)
        except arrange.SharedCpuError as e:   # process VNFs are refused at planning
            print(f"{PROG}: refused: {e}", file=sys.stderr)
            return 2
    from sluice.bench.progress import run_with_progress
    # SIGTERM and SIGHUP (a timeout, a closed terminal, a cancelled CI job) unwind like ^C,
    # so that every switch is continued, stopped and cleaned up by the runner's finally
    # blocks.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)
    try:
        if args.command == "sweep":
            rows = sweep.run(s, args.param, args.values,
                             lambda one: run_with_progress(Runner, one), rate, sizes)
        else:
            rows = run_with_progress(Runner, s)
    except arrange.SharedCpuError as e:
        print(f"{PROG}: refused: {e}", file=sys.stderr)
        return 2
    print(f"results: {s.out / 'results.jsonl'} ({len(rows)} rows), manifest: "
          f"{s.out / 'manifest.json'}")
    if getattr(args, "idle_trials", 0) > 0:
        idle.run(s, idle.IdleSettings(trials=args.idle_trials),
                 lambda m: print(m, file=sys.stderr))
    if not args.no_report and rows:
        from sluice.bench import report
        path = report.write(s.out)
        print(f"report: {path} and {path.with_suffix('.html')}")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
