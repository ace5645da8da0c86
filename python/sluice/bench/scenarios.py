"""Scenarios: which ports a switch gets and which the generator drives.

- `v2v`: two vhost-user ports; the generator and sink attach with virtio-user, as
  containers do.
- `p2p`: two "physical" ports, stood in for by `--phy memif` (a memif link whose far end the
  generator owns) or `--phy veth` (a veth pair whose far end sits in the generator's
  namespace; the switch attaches with af_xdp, or af_packet where that fails; these rows are
  `kernel_path`, bounded by the kernel's veth path).
- `loopback-N`: phy -> VNF1 -> ... -> VNFN -> phy, every hop through the switch; each VNF is
  two vhost-user ports served inline by the generator's loop (`sluice-gen --vnf-in/--vnf-out`)
  or, with `--vnf l2fwd|l3fwd|testpmd-mac`, by a process of its own (vnfs.py).

Links are listed pair by pair: the switch joins link 0 with 1, 2 with 3, and so on.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sluice.bench.switches.base import Link, Topology

MAX_CHAIN = 5


@dataclass(frozen=True)
class Scenario:
    """A scenario with its physical stand-in ('' for v2v) and direction."""

    name: str
    phy: str
    direction: str = "uni"
    vnf_kind: str = "inline"       # who serves loopback's VNFs: inline, l2fwd, l3fwd, ...

    @property
    def family(self) -> str:
        """v2v, p2p or loopback."""
        return self.name.split("-")[0]

    @property
    def chain(self) -> int:
        """The number of VNFs (0 outside loopback)."""
        return int(self.name.split("-")[1]) if self.family == "loopback" else 0

    @property
    def kernel_path(self) -> bool:
        """Whether the kernel's veth path carries the traffic (and bounds the rate)."""
        return self.phy == "veth"

    @property
    def vnf(self) -> str:
        """The VNF kind of the rows: the chosen kind for loopback, '' otherwise."""
        return self.vnf_kind if self.chain else ""

    def label(self) -> str:
        """A short name for logs and reports: p2p/memif uni."""
        return f"{self.name}{'/' + self.phy if self.phy else ''} {self.direction}"


def parse(name: str, phy: str, direction: str, vnf: str = "inline") -> Scenario:
    """A Scenario from the command line's words; ValueError for anything unknown. VNF is
    the kind of loopback's VNFs (vnfs.KINDS)."""
    m = re.fullmatch(r"v2v|p2p|loopback-([1-9])", name)
    if m is None or (m.group(1) and int(m.group(1)) > MAX_CHAIN):
        raise ValueError(f"unknown scenario {name!r}: v2v, p2p or loopback-1..{MAX_CHAIN}")
    if phy not in ("memif", "veth"):
        raise ValueError(f"unknown --phy {phy!r}: memif or veth")
    if direction not in ("uni", "bidir"):
        raise ValueError(f"unknown direction {direction!r}: uni or bidir")
    return Scenario(name, "" if name == "v2v" else phy, direction, vnf)


def _phy_link(scn: Scenario, work: Path, tag: str, i: int) -> Link:
    name = f"p{i}"
    if scn.family == "v2v":
        return Link(name, "vhost", path=str(work / f"{tag}-{name}.sock"))
    if scn.phy == "memif":
        return Link(name, "memif", path=str(work / f"{tag}-{name}.memif"))
    return Link(name, "veth", iface=f"{tag}s{i}", peer=f"{tag}g{i}")


def topology(scn: Scenario, work: Path, tag: str, netns: str | None = None) -> Topology:
    """The links of one switch (TAG makes its names unique) in scenario SCN."""
    links = [_phy_link(scn, work, tag, 0)]
    for v in range(1, scn.chain + 1):
        for side in "ab":
            links.append(Link(f"v{v}{side}", "vhost", path=str(work / f"{tag}-v{v}{side}.sock"),
                              role="vnf"))
    links.append(_phy_link(scn, work, tag, 1))
    pairs = tuple((i, i + 1) for i in range(0, len(links), 2))
    return Topology(tuple(links), pairs, netns if scn.phy == "veth" else None)


def run_ip(*args: str) -> None:
    """Runs `ip ARGS`; RuntimeError with ip's words when it fails."""
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


class Namespaces:
    """Network namespaces for veth scenarios, made by us and deleted by us (which deletes
    their veths too): one for the generator's ends, one per switch for the switch's ends (a
    switch's kernel-side devices, such as OVS's taps, then stay apart from the others')."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.gen = f"{tag}-gen"
        self.made: list[str] = []

    def create(self, name: str) -> str:
        """Makes namespace NAME with its loopback up; returns NAME."""
        run_ip("netns", "add", name)
        self.made.append(name)
        run_ip("-n", name, "link", "set", "lo", "up")
        return name

    def add_veths(self, topo: Topology) -> None:
        """One veth pair per veth link of TOPO: the switch's end in TOPO's namespace, the
        generator's in the generator's (made on first use)."""
        if self.gen not in self.made:
            self.create(self.gen)
        assert topo.netns is not None
        for link in topo.links:
            if link.kind != "veth":
                continue
            run_ip("-n", topo.netns, "link", "add", link.iface, "type", "veth", "peer",
                   "name", link.peer, "netns", self.gen)
            for ns, dev in ((topo.netns, link.iface), (self.gen, link.peer)):
                run_ip("-n", ns, "link", "set", dev, "mtu", "1600", "up")
                subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                                f"net.ipv6.conf.{dev}.disable_ipv6=1"],
                               capture_output=True, timeout=10, check=False)

    def delete(self) -> None:
        """Deletes the namespaces this object made."""
        while self.made:
            subprocess.run(["ip", "netns", "del", self.made.pop()], capture_output=True,
                           timeout=20, check=False)
