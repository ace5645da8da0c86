"""Process VNFs for loopback-N (`--vnf l2fwd|l3fwd|testpmd-mac`) and the mixed chain
(`--vnf l3fwd,l2fwd`: a kind per VNF, in chain order): each VNF its own DPDK process,
attached with virtio-user to the two vhost-user ports of the switch that the scenario made
for it (links with role "vnf", two per VNF, in chain order), on its own CPU.

- `l2fwd`: DPDK's example, MAC updating on (its default): a frame leaving port P gets
  destination 02:00:00:00:00:0P and the port's own source MAC; sluice-gen's inline VNF does
  the same (tools/gen/vnf.c), so both VNF kinds put the same frames on the wire.
- `l3fwd`: DPDK's example, LPM, with routes that send the generator's flows (to 10.128.0.0/9)
  out of its second port and anything to the generator's sources (10.0.0.0/9) out of its
  first; it decrements the TTL and sets the destination MAC to 02:00:00:00:00:0P as l2fwd
  does. One way only: both of sluice-gen's directions carry the same addresses, and a route
  looks at the destination alone.
- `testpmd-mac`: dpdk-testpmd --forward-mode=mac (destination 02:00:00:00:00:0P by default,
  source the port's MAC), its idle main lcore on the same CPU as its forwarding lcore.

On two CPUs every such VNF busy-polls beside another poller: the figures measure the
scheduler (../shared/PLATFORM.md), so the harness runs them only with --allow-shared-cpu and
marks the rows oversubscribed. They are functional checks of the scenario, not benchmarks.
A VNF is started right after its switch (virtio-user negotiates with the running switch),
stopped and continued with it, and stopped before it.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from sluice.bench import examples, procs
from sluice.bench.arrange import Poller
from sluice.bench.scenarios import Scenario
from sluice.bench.switches.base import Link, Switch, which

INLINE = "inline"
PROCESS_KINDS = ("l2fwd", "l3fwd", "testpmd-mac")
KINDS = (INLINE, *PROCESS_KINDS)
# Printed once a VNF forwards: l2fwd and l3fwd log it per lcore, testpmd when it starts.
READY = {"l2fwd": "entering main loop", "l3fwd": "entering main loop",
         "testpmd-mac": "forwards packets on"}
# l3fwd's routes: the generator's destinations out of port 1, its sources out of port 0.
L3FWD_RULES_V4 = "R10.128.0.0/9 1\nR10.0.0.0/9 0\n"
L3FWD_RULES_V6 = "R2001:db8:1::/48 1\nR2001:db8::/48 0\n"   # l3fwd wants both files


def parts(kind: str) -> list[str]:
    """The kinds of KIND: 'l3fwd,l2fwd' (one per VNF, in chain order) or one for all."""
    return kind.split(",")


def kinds_along(kind: str, chain: int) -> list[str]:
    """The kind of each of CHAIN VNFs: KIND's list, or its one kind CHAIN times."""
    ks = parts(kind)
    return ks if len(ks) == chain else ks[:1] * chain


def is_process(kind: str) -> bool:
    """Whether VNFs of KIND (or of every kind of a list) are processes of their own, not
    sluice-gen's inline ones."""
    return all(k in PROCESS_KINDS for k in parts(kind))


def cli_kind(text: str) -> str:
    """--vnf's value: one of KINDS, or process kinds in chain order (l3fwd,l2fwd); ValueError
    for anything else (scenarios.check_vnf says which scenario takes a list)."""
    if text in KINDS or (len(parts(text)) > 1 and is_process(text)):
        return text
    raise ValueError(f"--vnf {text!r}: one of {', '.join(KINDS)}, or process kinds in chain "
                     f"order such as l3fwd,l2fwd")


def port_mac(vnf: int, port: int) -> str:
    """The fixed MAC of port PORT (0 or 1) of VNF number VNF (from 0): 02:5e:00:00:VV:0P,
    set with virtio-user's mac=, so frames are the same from run to run."""
    return f"02:5e:00:00:{vnf:02x}:{port:02x}"


def available(kind: str, repo: Path) -> str | None:
    """None when VNFs of KIND (each of a list) can run here, else why not and how to get
    them."""
    if len(parts(kind)) > 1:
        return next((w for k in parts(kind) if (w := available(k, repo))), None)
    if kind == "testpmd-mac":
        return None if which("dpdk-testpmd") else ("dpdk-testpmd is not installed: run "
                                                   "scripts/setup.sh (Debian package dpdk)")
    if kind in ("l2fwd", "l3fwd"):
        return examples.missing(repo, kind)
    return None


def unsupported(kind: str, scn: Scenario) -> str | None:
    """None when VNFs of KIND can serve SCN, else why not."""
    if "l3fwd" in parts(kind) and scn.direction == "bidir":
        return ("l3fwd routes by destination address, and both of sluice-gen's directions "
                "carry the same addresses: one way (uni) only")
    return None


def cpus_for(chain: int, cpus: Sequence[int]) -> list[int]:
    """The CPU of each of CHAIN VNFs: CPUS in turn."""
    return [cpus[k % len(cpus)] for k in range(chain)]


def planned_pollers(kind: str, chain: int, cpus: Sequence[int], owner: str = "") -> list[Poller]:
    """The busy pollers CHAIN VNFs of KIND add (one forwarding lcore each)."""
    if not is_process(kind):
        return []
    return [Poller(f"{k} VNF {i + 1}{' of ' + owner if owner else ''}", cpu)
            for i, (k, cpu) in enumerate(zip(kinds_along(kind, chain), cpus_for(chain, cpus),
                                             strict=True))]


class Vnf:
    """One VNF process on two vhost-user ports of a switch."""

    def __init__(self, kind: str, index: int, links: tuple[Link, Link], cpu: int,
                 vhost_server: bool, repo: Path, work: Path, prefix: str) -> None:
        self.kind = kind
        self.index = index
        self.links = links
        self.cpu = cpu
        self.vhost_server = vhost_server
        self.repo = repo
        self.work = work
        self.prefix = prefix
        self.log = work / f"vnf{index + 1}-{kind}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def vdevs(self) -> list[str]:
        """--vdev arguments: virtio-user on the switch's two sockets, MACs fixed. The
        switch's vhost-user client mode (OVS) pairs with virtio-user server=1."""
        server = "" if self.vhost_server else ",server=1"
        out = []
        for port, link in enumerate(self.links):
            out += ["--vdev", f"net_virtio_user{port},path={link.path},queues=1,"
                              f"mac={port_mac(self.index, port)}{server}"]
        return out

    def eal(self, lcores: str) -> list[str]:
        """EAL options: pinned, no PCI, memory of its own (virtio-user moves packets only
        with --single-file-segments)."""
        return ["--lcores", lcores, "--no-pci", "--in-memory", "--single-file-segments",
                "--file-prefix", self.prefix, *self.vdevs()]

    def command(self) -> list[str]:
        """The VNF's command line."""
        if self.kind == "l2fwd":
            # -q 2: both ports on the one lcore; MAC updating is l2fwd's default.
            return [str(examples.path(self.repo, "l2fwd")), *self.eal(f"0@{self.cpu}"),
                    "--", "-p", "0x3", "-q", "2", "-T", "10"]
        if self.kind == "l3fwd":
            v4, v6 = (self.work / f"vnf{self.index + 1}-{v}.cfg" for v in ("v4", "v6"))
            v4.write_text(L3FWD_RULES_V4)
            v6.write_text(L3FWD_RULES_V6)
            return [str(examples.path(self.repo, "l3fwd")), *self.eal(f"0@{self.cpu}"),
                    "--", "-p", "0x3", "--config=(0,0,0),(1,0,0)", "--parse-ptype",
                    f"--rule_ipv4={v4}", f"--rule_ipv6={v6}"]
        if self.kind == "testpmd-mac":
            return ["dpdk-testpmd", *self.eal(f"0@{self.cpu},1@{self.cpu}"), "--",
                    "--forward-mode=mac", "--nb-cores", "1", "--port-topology=paired",
                    "--stats-period", "3600", "--auto-start"]
        raise ValueError(f"not a process VNF: {self.kind!r}")

    def start(self) -> None:
        """Starts the VNF; returns when it forwards (RuntimeError with its log if not)."""
        self.log.write_text("")
        # stdbuf: stdout into a file is block-buffered, and READY must be seen.
        self.proc = procs.start(["stdbuf", "-oL", *self.command()], self.log)
        procs.wait_until(lambda: READY[self.kind] in self.log.read_text(errors="replace"),
                         self.proc, f"{self.kind} VNF {self.index + 1}", self.log)

    def stop(self) -> None:
        """Ends the process (SIGINT: each of them closes its ports on it)."""
        if self.proc is not None:
            procs.stop(self.proc, signal.SIGINT, timeout=10)
            self.proc = None
        procs.remove_hugepage_files(self.prefix)


class VnfSet:
    """The VNF processes of one switch in one chain scenario (KIND: one kind for every VNF,
    or one per VNF in chain order)."""

    def __init__(self, kind: str, owner: str, cpus: Sequence[int]) -> None:
        self.kind = kind
        self.owner = owner
        self.cpus = tuple(cpus)
        self.vnfs: list[Vnf] = []

    def start(self, sw: Switch) -> None:
        """Starts one VNF per pair of SW's vnf links, in chain order; on failure the ones
        started are stopped again and the error is raised."""
        assert sw.topology is not None
        links = [link for link in sw.topology.links if link.role == "vnf"]
        if any(link.kind != "vhost" for link in links):
            raise ValueError(f"{self.kind} VNFs attach with virtio-user to vhost-user ports, "
                             f"and {sw.name} gives its VNFs {links[0].kind} ports: use "
                             "--vnf inline")
        chain = len(links) // 2
        kinds = kinds_along(self.kind, chain)
        try:
            for k, cpu in enumerate(cpus_for(chain, self.cpus)):
                v = Vnf(kinds[k], k, (links[2 * k], links[2 * k + 1]), cpu, sw.vhost_server,
                        sw.ctx.repo, sw.ctx.work, f"{sw.ctx.tag}v{k + 1}")
                self.vnfs.append(v)
                v.start()
        except Exception:
            self.stop()
            raise

    def pids(self) -> list[int]:
        """The PIDs to stop and continue with the switch."""
        return [v.proc.pid for v in self.vnfs if v.proc is not None]

    def pollers(self) -> list[Poller]:
        """The VNFs' busy pollers, for the CPU-arrangement rule."""
        return planned_pollers(",".join(v.kind for v in self.vnfs), len(self.vnfs), self.cpus,
                               self.owner) if self.vnfs else []

    def stop(self) -> None:
        """Stops every VNF (idempotent)."""
        for v in self.vnfs:
            v.stop()


def version(kind: str) -> str:
    """What runs as VNF KIND (each of a list, joined by '; '), for the manifest."""
    if len(parts(kind)) > 1:
        return "; ".join(version(k) for k in dict.fromkeys(parts(kind)))
    if kind == "testpmd-mac":
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpdk"],
                           capture_output=True, text=True, timeout=20)
        return f"dpdk-testpmd --forward-mode=mac (Debian dpdk {r.stdout.strip() or 'unknown'})"
    return f"{kind} ({examples.version()})"
