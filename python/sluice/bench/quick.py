"""make bench-quick: sluiced (patch, or learn with --mode) against dpdk-testpmd io-forward
(or a second sluiced in patch mode, --against patch) as the switch, v2v.

Both switches run at once with their forwarding threads on the same CPU (--switch-cpu); one
sluice-gen process on the other CPU (--gen-cpu) generates and sinks on four virtio-user
ports, two per switch, and sends into one switch at a time in alternating windows while it
keeps the other switch SIGSTOPped (PLATFORM.md: separate trials of one switch drift by up
to 1.5x here, alternating windows do not). Prints, per frame size, both medians, the ratio
with its quartiles and how many seconds each figure rests on, and stores the results.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from sluice.bench.abwindows import Comparison, Window, compare, neighbour_ratios

REPO = Path(__file__).resolve().parents[3]
SLUICED = REPO / "build" / "src" / "sluiced"
GEN = REPO / "build" / "tools" / "gen" / "sluice-gen"


def wait_for_path(path: Path, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear")
        time.sleep(0.1)


class Switches:
    """sluiced and testpmd, each with two vhost-user server ports, worker on SWITCH_CPU."""

    def __init__(self, work: Path, switch_cpu: int, ctl_cpu: int) -> None:
        self.work = work
        self.switch_cpu = switch_cpu
        self.ctl_cpu = ctl_cpu
        self.procs: list[tuple[subprocess.Popen[bytes], str]] = []

    def start_sluiced(self, mode: str = "patch", flows: int = 1,
                      ports: tuple[str, str] = ("a0", "a1")) -> subprocess.Popen[bytes]:
        """sluiced with one switch in MODE on PORTS. A learn switch gets the generator's
        FLOWS destination MACs as static entries on the second port (the sink never sends,
        so nothing would teach it where they are) and learns the sources itself."""
        tag = ports[0][0]
        cfg = self.work / f"sluiced-{tag}.conf"
        switch: dict[str, object] = {"name": "bench", "mode": mode}
        if mode == "learn":
            switch["max_entries"] = max(1024, 4 * flows)
        lines: list[dict[str, object]] = [{"method": "add-switch", "params": switch}]
        for p in ports:
            lines.append({"method": "add-port", "params": {
                "switch": "bench", "name": p,
                "spec": f"vhost-user:server,path={self.work}/{p}.sock"}})
        if mode == "patch":
            lines.append({"method": "patch", "params": {"switch": "bench", "port1": ports[0],
                                                        "port2": ports[1]}})
        for f in range(flows if mode == "learn" else 0):
            mac = f"02:00:02:{f >> 16 & 255:02x}:{f >> 8 & 255:02x}:{f & 255:02x}"
            lines.append({"method": "fdb-add", "params": {"switch": "bench", "mac": mac,
                                                          "port": ports[1]}})
        cfg.write_text("".join(json.dumps(x) + "\n" for x in lines))
        prefix = f"slbench{os.getpid()}{tag}"
        with open(self.work / f"sluiced-{tag}.log", "wb") as log:
            proc = subprocess.Popen(
                [str(SLUICED), "--socket", str(self.work / f"sluiced-{tag}.sock"),
                 "--file-prefix", prefix, "--main-cpu", str(self.ctl_cpu), "--worker-cpus",
                 str(self.switch_cpu), "--config", str(cfg)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append((proc, prefix))
        wait_for_path(self.work / f"sluiced-{tag}.sock", proc, timeout=120)
        return proc

    def start_testpmd(self) -> subprocess.Popen[bytes]:
        prefix = f"slbench{os.getpid()}b"
        vdevs = []
        for i, p in enumerate(("b0", "b1")):
            vdevs += ["--vdev", f"net_vhost{i},iface={self.work}/{p}.sock,queues=1"]
        with open(self.work / "testpmd.log", "wb") as log:
            proc = subprocess.Popen(
                ["dpdk-testpmd", "--lcores", f"0@{self.ctl_cpu},1@{self.switch_cpu}",
                 "--no-pci", "--file-prefix", prefix, "--single-file-segments",
                 "--log-level=*:warning", *vdevs, "--", "--forward-mode=io",
                 "--nb-cores", "1", "--stats-period", "60", "--txd", "1024", "--rxd", "1024"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append((proc, prefix))
        wait_for_path(self.work / "b1.sock", proc)
        return proc

    def stop(self) -> None:
        for proc, prefix in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGCONT)
                    proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for f in glob.glob(f"/dev/hugepages/{prefix}map_*"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f)


def run_generator(work: Path, size: int, args: argparse.Namespace, pids: tuple[int, int],
                  swapped: bool, duration: float, out: Path) -> None:
    """sluiced's ports are the generator's pair A, testpmd's pair B; SWAPPED: the reverse."""
    pairs = [("a0", "a1", pids[0]), ("b0", "b1", pids[1])]
    if swapped:
        pairs.reverse()
    ports = []
    for tx, rx, _ in pairs:
        ports += ["--port", f"virtio-user:path={work}/{tx}.sock",
                  "--port", f"virtio-user:path={work}/{rx}.sock"]
    cmd = [str(GEN), "--cpu", str(args.gen_cpu), "--role", "txrx", *ports,
           "--alternate", f"{pairs[0][2]},{pairs[1][2]}", "--window", str(args.window),
           "--settle", str(args.settle), "--duration", str(duration),
           "--size", str(size), "--rate", "max", "--out", str(out)]
    if args.flows > 1:
        cmd += ["--flows", str(args.flows), "--vary", "mac"]
    order = f"{args.b_name} first" if swapped else f"{args.a_name} first"
    print(f"  {size} B: {duration:.0f} s of {args.window:.1f} s windows, {order} ...",
          flush=True)
    with open(out.with_suffix(".log"), "wb") as log:
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=True,
                       timeout=duration + 60)


def load_windows(path: Path, swapped: bool) -> list[Window]:
    """Windows labelled A for sluiced and B for testpmd, whatever the generator's order."""
    data = json.loads(path.read_text())
    flip = {"A": "B", "B": "A"} if swapped else {"A": "A", "B": "B"}
    return [Window(index=w["index"], switch=flip[w["switch"]], rx_pps=float(w["rx_pps"]),
                   counted_s=float(w["counted_s"])) for w in data["windows"]]


def report_line(size: int, c: Comparison, a: str = "sluiced", b: str = "testpmd") -> str:
    return (f"{size:>6} B  {a} {c.a_median_pps / 1e6:7.2f} Mpps ({c.a_windows} windows, "
            f"{c.a_seconds:.0f} s)  {b} {c.b_median_pps / 1e6:7.2f} Mpps "
            f"({c.b_windows} windows, {c.b_seconds:.0f} s)  ratio {c.ratio_median:.3f} "
            f"[q1 {c.ratio_q1:.3f}, q3 {c.ratio_q3:.3f}, {c.n_ratios} ratios]")


def markdown_report(record: dict) -> str:
    a, b = record["a"], record["b"]
    flows = record.get("flows", 1)
    lines = [
        f"# bench-quick {record['time']}: {a} vs {b}, v2v"
        + (f", {flows} MAC flows" if flows > 1 else ""),
        "",
        f"Switch workers on CPU {record['switch_cpu']}, sluice-gen (generator and sink, one "
        f"loop) on CPU {record['gen_cpu']}; alternating {record['window_s']} s windows, the "
        f"first {record['settle_s']} s of each not counted; the idle switch SIGSTOPped. "
        f"Half the time with {a} as the generator's first pair, half with {b} "
        "first; the ratios of both halves are pooled.",
        "",
        f"| frame | {a} Mpps | {b} Mpps | ratio (median) | q1 | q3 | ratios | "
        f"ratio, {a} first / {b} first | counted s (A/B) | "
        "generator idle | generator bound |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in record["results"]:
        lines.append(
            f"| {r['size']} B | {r['a_median_pps'] / 1e6:.2f} | {r['b_median_pps'] / 1e6:.2f} "
            f"| {r['ratio_median']:.3f} | {r['ratio_q1']:.3f} | {r['ratio_q3']:.3f} | "
            f"{r['n_ratios']} | {r['ratio_by_order']['sluiced_first']:.3f} / "
            f"{r['ratio_by_order']['testpmd_first']:.3f} | "
            f"{r['a_seconds']:.0f}/{r['b_seconds']:.0f} | "
            f"{100 * r['gen_idle_fraction']:.1f} % | {r['generator_bound']} |")
    lines += ["", "Rates are received frames per second at the sink (L2, per direction). "
              "Absolute rates move with the host's placement of the vCPUs; the ratio is the "
              "figure to compare.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="bench/quick.sh",
        description="sluiced patch vs dpdk-testpmd io-forward over vhost-user (v2v), "
                    "measured in alternating windows by one sluice-gen loop.")
    ap.add_argument("--sizes", default="64,1500", help="frame sizes incl. FCS (64,1500)")
    ap.add_argument("--mode", choices=("patch", "learn"), default="patch",
                    help="sluiced's forwarding function (patch)")
    ap.add_argument("--against", choices=("testpmd", "patch"), default="testpmd",
                    help="the other switch: dpdk-testpmd io-forward, or a second sluiced in "
                         "patch mode (testpmd)")
    ap.add_argument("--flows", type=int, default=1,
                    help="distinct source/destination MAC pairs the generator sends (1); "
                         "a learn switch gets the destinations as static entries")
    ap.add_argument("--duration", type=float, default=40.0, help="seconds per size (40)")
    ap.add_argument("--window", type=float, default=1.0, help="window length, s (1.0)")
    ap.add_argument("--settle", type=float, default=0.3,
                    help="uncounted start of each window, s (0.3)")
    ap.add_argument("--switch-cpu", type=int, default=1, help="CPU of both switches' workers")
    ap.add_argument("--gen-cpu", type=int, default=0, help="CPU of sluice-gen")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results",
                    help="directory for the JSON results")
    args = ap.parse_args(argv)
    args.a_name = f"sluiced {args.mode}"
    args.b_name = "testpmd io" if args.against == "testpmd" else "sluiced patch"
    for exe in (SLUICED, GEN):
        if not exe.exists():
            print(f"{exe} is missing: run 'make build'", file=sys.stderr)
            return 2
    if shutil.which("dpdk-testpmd") is None:
        print("dpdk-testpmd is missing: run scripts/setup.sh", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="sluice-bench-", dir="/tmp"))
    switches = Switches(work, args.switch_cpu, args.gen_cpu)
    results = []
    print(f"bench-quick: switches' workers on CPU {args.switch_cpu}, sluice-gen on CPU "
          f"{args.gen_cpu}, control threads on CPU {args.gen_cpu} (sleeping); logs in {work}")
    try:
        a = switches.start_sluiced(args.mode, args.flows)
        b = (switches.start_testpmd() if args.against == "testpmd" else
             switches.start_sluiced("patch", args.flows, ("b0", "b1")))
        for size in (int(s) for s in args.sizes.split(",")):
            # The generator serves its two pairs in a fixed order; each order gets half the
            # time, and the ratios of both are pooled, so a bias of position cancels.
            ratios: list[float] = []
            windows: list[Window] = []
            by_order: dict[str, float] = {}
            for swapped in (False, True):
                out = work / f"gen-{size}-{int(swapped)}.json"
                run_generator(work, size, args, (a.pid, b.pid), swapped, args.duration / 2,
                              out)
                part = load_windows(out, swapped)
                part_ratios = neighbour_ratios(part)
                by_order["testpmd_first" if swapped else "sluiced_first"] = \
                    statistics.median(part_ratios) if part_ratios else float("nan")
                ratios += part_ratios
                windows += part
                gen = json.loads(out.read_text())
            c = compare(windows, ratios)
            print(report_line(size, c, args.a_name, args.b_name), flush=True)
            print(f"{'':8}ratio by generator order: {args.a_name} first "
                  f"{by_order['sluiced_first']:.3f}, {args.b_name} first "
                  f"{by_order['testpmd_first']:.3f}", flush=True)
            print(f"{'':8}sluice-gen: idle {100 * gen['idle_fraction']:.1f}% of loop passes, "
                  f"{gen['not_accepted'] + gen.get('retried', 0)} frames refused by full "
                  f"rings ({gen.get('load', 'open')} loop), {gen['lost']} lost",
                  flush=True)
            results.append({"size": size, **asdict(c), "ratio_by_order": by_order,
                            "gen_idle_fraction": gen["idle_fraction"],
                            "gen_not_accepted": gen["not_accepted"],
                            "gen_retried": gen.get("retried", 0), "gen_lost": gen["lost"],
                            "generator_bound": gen["idle_fraction"] < 0.01})
    finally:
        switches.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    record = {"bench": "quick", "time": stamp, "a": args.a_name,
              "b": "dpdk-testpmd io" if args.against == "testpmd" else "sluiced patch",
              "flows": args.flows,
              "switch_cpu": args.switch_cpu, "gen_cpu": args.gen_cpu,
              "window_s": args.window, "settle_s": args.settle, "results": results}
    (args.out / f"quick-{stamp}.json").write_text(json.dumps(record, indent=2) + "\n")
    report = args.out / f"quick-{stamp}.md"
    report.write_text(markdown_report(record))
    print(f"results: {args.out / f'quick-{stamp}.json'}, report: {report}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
