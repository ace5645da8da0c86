"""`sluice-bench sockets`: the kernel socket baseline of the container benchmark framework.

The container study (seed 003, its Table 2) measured, before any fast framework, two
containers on one host joined by a Linux bridge, exchanging 64 B packets through POSIX
sockets: UDP or raw sockets, send/recv or sendmmsg/recvmmsg (0.34-0.44 Mpps there). This
module repeats that here: namespaces `TAG-tx` and `TAG-rx` stand for the two containers,
each with one end of a veth pair, whose other ends a Linux bridge in `TAG-br` joins (the
linux-bridge adapter makes it, as for the other rows). One `sluice-sockets` process has its
sender thread's socket in the first namespace, pinned to --tx-cpu, and its receiver's in
the second, pinned to --rx-cpu. Rows go to results.jsonl with the usual schema: switch
`sockets`, mode `API-bBATCH`, scenario v2v/veth, kernel_path, interleaved trials (one run
per api, batch and size, round-robin), R+ from the per-second samples after --warmup.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.bench import manifest, placement, procs, program
from sluice.bench.plan import round_robin
from sluice.bench.scenarios import Namespaces, run_ip
from sluice.bench.schema import Row, append_rows
from sluice.bench.stats import Sample, loss_fraction, r_plus, trim
from sluice.bench.switches.base import Context, Link, Topology
from sluice.bench.switches.linux_bridge import LinuxBridge

APIS = ("udp", "raw")
TX_IP, RX_IP = "10.77.0.1", "10.77.0.2"


def tool_path(repo: Path) -> Path:
    """sluice-sockets as `make build` leaves it, else the installed one."""
    return program(repo, "build/tools/sockets/sluice-sockets", "sluice-sockets")


@dataclass(frozen=True)
class SocketSettings:
    """Everything a sockets run needs, from the command line."""

    apis: tuple[str, ...]
    batches: tuple[int, ...]
    sizes: tuple[int, ...]
    duration: float
    trials: int
    warmup: float
    cooldown: float
    tx_cpu: int
    rx_cpu: int
    out: Path
    repo: Path
    tool: Path | None = None
    monitor: Path | None = None

    def variants(self) -> list[str]:
        """The modes of the run: udp-b1, udp-b32, raw-b1, ..."""
        return [f"{a}-b{b}" for a in self.apis for b in self.batches]


def split_mode(mode: str) -> tuple[str, int]:
    """('udp', 32) from 'udp-b32'; ValueError for anything else."""
    api, sep, batch = mode.partition("-b")
    if api not in APIS or not sep or not batch.isdigit() or not 1 <= int(batch) <= 1024:
        raise ValueError(f"not a sockets mode: {mode!r} (udp-b1, raw-b32, ...)")
    return api, int(batch)


def parse_output(text: str) -> tuple[list[Sample], dict[str, Any]]:
    """Per-second samples and the summary from sluice-sockets --json output."""
    samples: list[Sample] = []
    summary: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if obj.get("tool") == "sluice-sockets":
            summary = obj
        elif "monotonic_s" in obj:
            samples.append(Sample(float(obj["t"]), float(obj["monotonic_s"]),
                                  float(obj["tx_pps"]), float(obj["rx_pps"])))
    return samples, summary


def describe_api(summary: dict[str, Any]) -> str:
    """'udp send/recv' or 'raw sendmmsg/recvmmsg, batch 32' from the tool's summary."""
    api, calls, batch = summary.get("api", "?"), summary.get("calls", "?"), summary.get("batch")
    return f"{api} {calls}" + (f", batch {batch}" if batch not in (None, 1) else "")


class BridgedPair:
    """Two 'containers' (namespaces TAG-tx, TAG-rx) on a Linux bridge in TAG-br."""

    def __init__(self, tag: str, work: Path) -> None:
        self.ns = Namespaces(tag)
        self.tx, self.rx, self.br = f"{tag}-tx", f"{tag}-rx", f"{tag}-br"
        self.tx_if, self.rx_if = f"{tag}c0", f"{tag}c1"
        ctx = Context(work=work, tag=tag, switch_cpu=0, ctl_cpu=0, repo=work)
        self.bridge = LinuxBridge(ctx, "learn")

    def _pair(self, i: int, ns: str, dev: str, ip: str) -> Link:
        sw = f"{self.ns.tag}p{i}"
        run_ip("-n", self.br, "link", "add", sw, "type", "veth", "peer", "name", dev,
               "netns", ns)
        run_ip("-n", self.br, "link", "set", sw, "up")
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                        "net.ipv6.conf.all.disable_ipv6=1"], capture_output=True, timeout=10,
                       check=False)
        run_ip("-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
        run_ip("-n", ns, "link", "set", dev, "up")
        return Link(f"p{i}", "veth", iface=sw, peer=dev)

    def create(self) -> None:
        """Makes the namespaces, veths and the bridge (ARP resolves in the first
        milliseconds of a trial, inside its uncounted warm-up)."""
        for name in (self.br, self.tx, self.rx):
            self.ns.create(name)
        links = (self._pair(0, self.tx, self.tx_if, TX_IP),
                 self._pair(1, self.rx, self.rx_if, RX_IP))
        self.bridge.start(Topology(links, ((0, 1),), self.br))

    def delete(self) -> None:
        """Removes all that create() made (idempotent)."""
        self.bridge.stop()
        self.ns.delete()


class SocketsRun:
    """Runs the settings' trials; SAY gets one line per trial."""

    def __init__(self, s: SocketSettings, say: Callable[[str], None]) -> None:
        self.s = s
        self.say = say
        self.tool = s.tool or tool_path(s.repo)
        self.work = Path(tempfile.mkdtemp(prefix="sbsock-", dir="/tmp"))
        self.tag = f"sk{os.getpid() % 100000}"
        self.monitor = placement.Monitor(s.monitor or placement.monitor_path(s.repo),
                                         self.work, (s.tx_cpu, s.rx_cpu))
        self.results = s.out / "results.jsonl"
        self.failed: list[dict[str, str]] = []

    def command(self, pair: BridgedPair, mode: str, size: int, out: Path) -> list[str]:
        """The sluice-sockets command of one trial."""
        api, batch = split_mode(mode)
        return [str(self.tool), "--api", api, "--batch", str(batch), "--size", str(size),
                "--duration", str(self.s.duration), "--tx-netns", pair.tx, "--rx-netns",
                pair.rx, "--tx-iface", pair.tx_if, "--rx-iface", pair.rx_if, "--src", TX_IP,
                "--dst", RX_IP, "--tx-cpu", str(self.s.tx_cpu), "--rx-cpu", str(self.s.rx_cpu),
                "--json", "--out", str(out)]

    def run_tool(self, cmd: list[str], log: Path) -> tuple[list[Sample], dict[str, Any], float]:
        """Runs CMD to its end (killed by PID if it overruns); samples, summary, CPU s."""
        before = os.times()
        with log.open("w") as f:
            f.write("$ " + " ".join(cmd) + "\n")
            f.flush()
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
            try:
                proc.wait(self.s.duration + 20)
            except subprocess.TimeoutExpired:
                procs.stop(proc, timeout=5)
                raise RuntimeError(f"sluice-sockets overran (log {log})") from None
            except BaseException:
                procs.stop(proc, timeout=5)       # ^C or SIGTERM: never leave it running
                raise
        after = os.times()
        if proc.returncode != 0:
            raise RuntimeError(f"sluice-sockets exited with {proc.returncode}: "
                               f"{procs.tail(log, 2)}")
        samples, summary = parse_output(log.read_text())
        cpu = (after.children_user - before.children_user
               + after.children_system - before.children_system)
        return samples, summary, round(cpu, 3)

    def trial(self, pair: BridgedPair, mode: str, size: int, t: int) -> list[Row]:
        """One run of the tool; its rows, one per placement label."""
        name = f"sockets-{mode}-{size}-{t}"
        log = self.s.out / "logs" / f"{name}.log"
        busy0, t0 = procs.cpu_busy(), time.monotonic()
        with self.monitor.running():
            samples, summary, cpu = self.run_tool(
                self.command(pair, mode, size, self.work / f"{name}.json"), log)
        wall = round(time.monotonic() - t0, 3)
        busy = {c: round(v - busy0.get(c, 0.0), 3) for c, v in procs.cpu_busy().items()}
        kept = trim(samples, self.s.warmup, self.s.cooldown, self.s.duration)
        common = {"mode": mode, "size": size, "trial": t, "summary": summary, "cpu": cpu,
                  "busy": busy, "wall": wall}
        return self.rows(kept, common)

    def rows(self, kept: Sequence[Sample], c: dict[str, Any]) -> list[Row]:
        """Rows of one trial per placement label of its counted seconds."""
        probes = self.monitor.probes()
        groups: dict[str, list[Sample]] = defaultdict(list)
        for s in kept:
            groups[placement.label(probes, s.monotonic_s - 1.0, s.monotonic_s)].append(s)
        summ = c["summary"]
        api = describe_api(summ)
        out = []
        for lab, ss in sorted(groups.items()):
            tx, rx = sum(s.tx_pps for s in ss), sum(s.rx_pps for s in ss)
            out.append(Row(
                switch="sockets", mode=c["mode"], key=f"sockets:{c['mode']}", scenario="v2v",
                phy="veth", vnf="", size=c["size"], direction="uni", trial=c["trial"],
                placement=lab, method="interleaved", rx_pps=r_plus(ss), tx_pps=tx / len(ss),
                loss=loss_fraction(tx, rx), oversubscribed=False, generator_bound=False,
                kernel_path=True, rx_pps_median=sorted(s.rx_pps for s in ss)[len(ss) // 2],
                samples=len(ss), counted_s=float(len(ss)), port_kind="veth (kernel)",
                steering=("Linux bridge (learning) between two namespaces' veths; endpoints: "
                          + api + ", sender and receiver threads pinned"),
                gen_cpu_s=c["cpu"], cpu_busy_s=c["busy"], wall_s=c["wall"], api=api))
        return out

    def run(self) -> list[Row]:
        """Every trial, in round-robin order per size; rows appended as they come."""
        (self.s.out / "logs").mkdir(parents=True, exist_ok=True)
        pair = BridgedPair(self.tag, self.work)
        rows: list[Row] = []
        try:
            pair.create()
            for size in self.s.sizes:
                for t, mode in round_robin(self.s.variants(), self.s.trials):
                    rows += self.one(pair, mode, size, t)
        finally:
            pair.delete()
            self.write_manifest()
            shutil.rmtree(self.work, ignore_errors=True)
        return rows

    def one(self, pair: BridgedPair, mode: str, size: int, t: int) -> list[Row]:
        """One trial; a failure is recorded, not fatal."""
        try:
            got = self.trial(pair, mode, size, t)
        except RuntimeError as e:
            self.failed.append({"switch": f"sockets:{mode}", "scenario": "v2v/veth uni",
                                "reason": f"trial failed: {e}"})
            self.say(f"sockets:{mode} {size} B trial {t}: failed: {e}")
            return []
        append_rows(self.results, got)
        for r in got:
            self.say(f"sockets:{mode} {size} B trial {t} ({r.placement}): "
                     f"R+ {r.rx_pps / 1e6:.3f} Mpps, sent {r.tx_pps / 1e6:.3f}, "
                     f"loss {r.loss:.2%}")
        return got

    def write_manifest(self) -> None:
        """manifest.json with the environment, versions, settings and failed trials."""
        settings = {k: (str(v) if isinstance(v, Path) else v)
                    for k, v in self.s.__dict__.items()}
        settings["placement_monitor"] = (str(self.monitor.exe) if self.monitor.available
                                         else None)
        versions = {"linux-bridge": self.bridge_version(), "sluice-sockets": str(self.tool)}
        m = manifest.collect(self.s.repo, versions, settings)
        m["skipped"] = self.failed
        manifest.write(self.s.out / "manifest.json", m)

    @staticmethod
    def bridge_version() -> str:
        """The kernel's release: the bridge's version."""
        return f"Linux bridge, kernel {os.uname().release}"
