"""testpmd: dpdk-testpmd --forward-mode=io, the no-logic bound.

Ports are vdevs in the topology's order; testpmd's paired port topology forwards port 0 to
1 and 1 to 0, 2 to 3 and back, and so on, which is exactly the topology's pairs (scenarios
list links pair by pair). The forwarding lcore is pinned to the switch CPU, the main lcore to
the generator's CPU, where it sleeps on its command prompt: testpmd runs interactively
(`-i --auto-start`) with its standard input a pipe of the adapter's, which asks `show fwd
stats all` for the cycles `--record-core-cycles` counts (cost per packet, cost.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from sluice.bench import procs
from sluice.bench.arrange import Poller
from sluice.bench.cost import CumulativeMeter, Meter
from sluice.bench.switches import telemetry
from sluice.bench.switches.base import Context, Link, Switch, Topology, which

READY = "forwards packets on"  # printed once forwarding has started
PROMPT = "testpmd> "
ACCUMULATED = "Accumulated forward statistics for all ports"
# 22.11: "CPU cycles/packet=78.70 (total cycles=7194733700 / total io packets=91416512) at
# 2450 MHz Clock"; later releases say "busy cycles".
_CYCLES = re.compile(r"CPU cycles/packet=[0-9.]+ \((?:total|busy) cycles=(\d+) / total \S+ "
                     r"packets=(\d+)\)")
_RX = re.compile(r"RX-packets:\s+(\d+)")


def parse_fwd_stats(text: str) -> tuple[float, int] | None:
    """(busy cycles, packets) from the answer to `show fwd stats all` in TEXT (its last
    one): the forwarding cores' cycles with --record-core-cycles and the packets they
    received. testpmd prints no cycles line before its first packet: (0, 0) then. None
    when TEXT holds no complete answer (the prompt after the accumulated block)."""
    at = text.rfind(ACCUMULATED)
    if at < 0 or PROMPT not in text[at:]:
        return None
    block = text[at:at + text[at:].index(PROMPT)]
    m = _CYCLES.search(block)
    if m:
        return float(m.group(1)), int(m.group(2))
    rx = _RX.search(block)
    return (0.0, 0) if rx and int(rx.group(1)) == 0 else None


class Testpmd(Switch):
    """dpdk-testpmd io-forward between paired ports."""

    name = "testpmd"
    modes = ("io",)
    ready = READY
    stop_signal = signal.SIGINT
    # Runs with -i and --record-core-cycles, asked for its cycles through standard input.
    interactive = True
    # Its vhost PMD chains a 9000 B frame into 2 KB mbufs and io-forward passes the chain on
    # (seen here: 9000 B frames between two vhost-user ports, none lost, with the adapter's
    # command line as it is). Not memif: see JUMBO_NOT_MEMIF.
    jumbo_links = ("vhost",)

    def __init__(self, ctx: Context, mode: str) -> None:
        super().__init__(ctx, mode)
        self.proc: subprocess.Popen[bytes] | None = None
        self.prefix = f"{ctx.tag}tp"
        self.log = ctx.work / "testpmd.log"
        self.asks = itertools.count(1)        # markers of the questions asked on stdin

    @classmethod
    def available(cls, repo: Path) -> str | None:
        if which("dpdk-testpmd") is None:
            return "dpdk-testpmd is not installed: run scripts/setup.sh (Debian package dpdk)"
        return None

    @staticmethod
    def _vdev(i: int, link: Link, driver: str) -> str:
        if link.kind == "vhost":
            return f"net_vhost{i},iface={link.path},queues=1"
        if link.kind == "memif":
            return f"net_memif{i},role=server,socket={link.path},socket-abstract=no"
        return f"net_{driver}{i},iface={link.iface}"

    def fanout_unsupported(self) -> str | None:
        return (f"{self.name} {self.mode} forwards each port to its pair only (0<->1, 2<->3, "
                "...): it never copies a frame to several ports, so it cannot fan out")

    def command(self, vdevs: list[str]) -> list[str]:
        """The switch's command line with VDEVS (--vdev arguments)."""
        lcores = f"0@{self.ctx.ctl_cpu},1@{self.ctx.switch_cpu}"
        # Interactive, with a prompt on a pipe: the main lcore sleeps in read() until the
        # adapter asks for statistics. --record-core-cycles adds two TSC reads per burst
        # that received packets, to the io forwarding function (none to empty polls).
        cmd = ["dpdk-testpmd", "--lcores", lcores,
               "--no-pci", "--file-prefix", self.prefix, "--single-file-segments",
               "--log-level=*:warning", *vdevs, "--", "-i", "--forward-mode=io",
               "--nb-cores", "1", "--port-topology=paired", "--record-core-cycles",
               "--txd", "1024", "--rxd", "1024", "--auto-start"]
        if "burst" in self.ctx.extra:
            cmd.append(f"--burst={self.ctx.extra['burst']}")
        return cmd

    def _check_pairs(self, topo: Topology) -> None:
        want = tuple((i, i + 1) for i in range(0, len(topo.links), 2))
        if topo.pairs != want:
            raise ValueError(f"{self.name} pairs ports 0-1, 2-3, ...; topology asks "
                             f"{topo.pairs}")

    def _launch(self, topo: Topology, driver: str) -> bool:
        """Starts testpmd with DRIVER for veths; False when it exits before forwarding."""
        vdevs = [a for i, link in enumerate(topo.links)
                 for a in ("--vdev", self._vdev(i, link, driver))]
        # stdbuf: the stdout of a DPDK app into a file is block-buffered; READY must be seen.
        cmd = ["stdbuf", "-oL", *self.command(vdevs)]
        if topo.netns:
            cmd = ["ip", "netns", "exec", topo.netns, *cmd]
        self.log.write_text("")
        self.proc = procs.start(cmd, self.log,
                                stdin=subprocess.PIPE if self.interactive else subprocess.DEVNULL)
        try:
            procs.wait_until(lambda: self.ready in self.log.read_text(errors="replace"),
                             self.proc, self.name, self.log)
        except RuntimeError:
            if topo.netns and driver == "af_xdp":
                self.stop()
                return False
            raise
        return True

    def start(self, topo: Topology) -> None:
        self._check_pairs(topo)
        driver = topo.veth_driver
        if not self._launch(topo, driver):
            driver = "af_packet"
            self._launch(topo, driver)
        self.topology = dataclasses.replace(topo, veth_driver=driver)

    def version(self) -> str:
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpdk"],
                           capture_output=True, text=True, timeout=20)
        return f"dpdk-testpmd io (Debian dpdk {r.stdout.strip() or 'unknown'})"

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc else []

    def pollers(self) -> list[Poller]:
        return [Poller("testpmd forwarding lcore", self.ctx.switch_cpu)]

    def steering(self) -> str:
        return "testpmd io: port 0<->1, 2<->3, ... (paired topology, no lookup)"

    def port_counters(self) -> dict[str, dict[str, Any]] | None:
        """The ethdev counters of its ports (port N is link N), from DPDK's telemetry socket:
        testpmd's own statistics print only every --stats-period (an hour here) or on its
        interactive prompt, which the harness does not use. memif ports are left out: 22.11's
        net_memif in the server role reports 0 received and 0 sent while it forwards (seen
        here with 25 M frames through it), so their hops are merged with the next."""
        if self.topology is None:
            return None
        links = self.topology.links
        st = telemetry.ethdev_stats(self.prefix, len(links))
        if st is None:
            return None
        return {link.name: c for link, c in zip(links, st, strict=True) if link.kind != "memif"}

    def fwd_cycles(self, timeout: float = 0.5) -> tuple[float, int] | None:
        """(busy cycles, packets received) of the forwarding lcore so far, asked on the
        prompt; None when no answer came within TIMEOUT (e.g. testpmd was stopped). Each
        question follows a comment line with a number of its own, which the prompt echoes,
        so a late answer to an earlier question is never taken for this one's."""
        if self.proc is None or self.proc.stdin is None or self.proc.poll() is not None:
            return None
        mark = f"# sluice-bench question {next(self.asks)}."
        try:
            offset = self.log.stat().st_size
            self.proc.stdin.write(f"{mark}\nshow fwd stats all\n".encode())
            self.proc.stdin.flush()
        except OSError:
            return None
        deadline = time.monotonic() + timeout
        with self.log.open("rb") as f:
            text = ""
            while time.monotonic() < deadline:
                f.seek(offset)
                text = f.read().decode(errors="replace")
                at = text.find(mark)
                got = parse_fwd_stats(text[at:]) if at >= 0 else None
                if got is not None:
                    return got
                time.sleep(0.005)
        return None

    def cost_meter(self) -> Meter | None:
        if not self.interactive:
            return None
        return CumulativeMeter("testpmd --record-core-cycles: io forwarding busy cycles / "
                               "packets received", self.fwd_cycles)

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc, self.stop_signal, timeout=15)
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc = None
        procs.remove_hugepage_files(self.prefix)
