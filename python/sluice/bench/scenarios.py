"""Scenarios: which ports a switch gets and which the generator drives.

- `v2v`: two vhost-user ports; the generator and sink attach with virtio-user, as
  containers do. Kernel-facing switches (no vhost-user) get `v2v/veth` instead: two veth
  pairs, the generator's ends standing for the containers' (Docker and LXC put a container
  on a Linux bridge this way); these rows are `kernel_path` and never compared with v2v's.
- `p2p`: two "physical" ports, stood in for by `--phy memif` (a memif link whose far end the
  generator owns) or `--phy veth` (a veth pair whose far end sits in the generator's
  namespace; the switch attaches with af_xdp, or af_packet where that fails; these rows are
  `kernel_path`, bounded by the kernel's veth path).
- `p2v`: a physical stand-in into a VNF's vhost-user port (the generator's virtio-user end
  receives, as the VNF would); `v2p` the reverse, a VNF sending out of the physical port.
- `loopback-N`: phy -> VNF1 -> ... -> VNFN -> phy, every hop through the switch; each VNF is
  two vhost-user ports served inline by the generator's loop (`sluice-gen --vnf-in/--vnf-out`)
  or, with `--vnf l2fwd|l3fwd|testpmd-mac`, by a process of its own (vnfs.py); for switches
  without vhost-user (over `--phy veth` only) two veth pairs, as a container VNF with two
  interfaces on two networks has.
- `chain-mixed`: phy -> an L3 VNF -> firewall rules -> an L2 VNF -> phy, every hop through
  the switch (issue 8 section 3's mixed chain, with its firewall placed as issue 14 does):
  rule-programmable switches (sluice:flow, sluice:flow-normal, ovs-dpdk:flows,
  ovs-netdev:flows*, vpp:acl) hold an ACL (rules.py; 100 rules, or --rules N) on what the L3
  VNF sends out (`Topology.firewall`); the others run the chain without it. Inline, the
  VNFs are sluice-gen's `--vnf-kind l3` then `l2` (DPDK
  l3fwd's and l2fwd's behaviour); with `--vnf l3fwd,l2fwd` they are DPDK's own examples as
  processes. Links and steering are loopback-2's: switches steer it as they steer loopback-2.
- `pairs` N (NvsN): N sender/receiver pairs at once, each with its own two ports (v2v, p2p,
  p2v, v2p).
- `fanout-N` (`sweep --param fanout`): one sender and N receive-only sinks, every port a
  vhost-user port of the switch (the generator's ends virtio-user, as in v2v); for switches
  without vhost-user, `fanout-N/veth`: 1 + N veth pairs, as containers attach (kernel_path).
  The generator sends broadcast frames, which a learning switch floods to the N sinks (`sluice-gen
  --sink-port`): VALE's forwarding rate against the number of destinations. Switches whose
  mode cannot flood (pairs, cross-connects) decline it.
- The v2v round trip (`rtt`, for `--latency fixed:RATE`): four vhost-user ports; the first
  VNF (the generator) sends on one and receives on another, the second (an inline VNF)
  forwards from its first port to its second, so a round trip crosses the switch twice, as
  the seven-switch comparison measured v2v latency.

Links are listed pair by pair: the switch joins link 0 with 1, 2 with 3, and so on.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sluice.bench.switches.base import Link, Topology

MAX_CHAIN = 5
MAX_PAIRS = 4          # sluice-gen serves up to 8 ports
INLINE = "inline"
# The mixed chain: its VNFs' inline kinds (sluice-gen --vnf-kind) and process kinds, in
# chain order.
MIXED = "chain-mixed"
MIXED_INLINE = ("l3", "l2")
MIXED_PROCESS = ("l3fwd", "l2fwd")
MAX_FANOUT = 16        # sluice-gen serves up to 16 --sink-port ports
FAMILIES = ("v2v", "p2p", "p2v", "v2p", "loopback", "chain", "fanout")
# Where fan-out frames go: every learning switch floods a broadcast to all its other ports.
FANOUT_DST_MAC = "ff:ff:ff:ff:ff:ff"


@dataclass(frozen=True)
class Scenario:
    """A scenario with its physical stand-in ('' for v2v) and direction."""

    name: str
    phy: str
    direction: str = "uni"
    pairs: int = 1
    rtt: bool = False
    vnf_kind: str = INLINE         # who serves the VNFs: inline, l2fwd, l3fwd, l3fwd,l2fwd...
    sinks: int = 0                 # fanout: the destinations each frame is flooded to

    @property
    def family(self) -> str:
        """v2v, p2p, p2v, v2p, loopback or chain."""
        return self.name.split("-")[0]

    @property
    def chain(self) -> int:
        """The number of VNFs (0 outside loopback and the mixed chain)."""
        if self.family == "loopback":
            return int(self.name.split("-")[1])
        if self.name == MIXED:
            return len(MIXED_INLINE)
        return 1 if self.rtt else 0

    @property
    def steer_as(self) -> str:
        """The scenario whose steering a switch applies: loopback-N for a chain of N."""
        return f"loopback-{self.chain}" if self.family == "chain" else self.name

    @property
    def process_vnfs(self) -> bool:
        """Whether the VNFs are processes of their own (not sluice-gen's inline ones)."""
        return self.chain > 0 and self.vnf_kind != INLINE

    @property
    def inline_kinds(self) -> tuple[str, ...]:
        """sluice-gen's --vnf-kind of each inline VNF, in chain order."""
        return MIXED_INLINE if self.name == MIXED else ("l2",) * self.chain

    @property
    def process_kinds(self) -> tuple[str, ...]:
        """The process kind of each VNF, in chain order (() for inline VNFs)."""
        if not self.process_vnfs:
            return ()
        kinds = tuple(self.vnf_kind.split(","))
        return kinds if len(kinds) == self.chain else kinds[:1] * self.chain

    @property
    def kernel_path(self) -> bool:
        """Whether the kernel's veth path carries the traffic (and bounds the rate)."""
        return self.phy == "veth"

    @property
    def vnf(self) -> str:
        """The VNF kind of the rows: the chosen kind for loopback (inline for the round
        trip); for the mixed chain the kinds in order, 'inline:l3,l2' or 'l3fwd,l2fwd'; ''
        without VNFs."""
        if self.name == MIXED:
            return self.vnf_kind if self.process_vnfs else f"{INLINE}:{','.join(MIXED_INLINE)}"
        return self.vnf_kind if self.chain else ""

    def label(self) -> str:
        """A short name for logs and reports: p2p/memif uni."""
        if self.family == "fanout":
            veth = "/veth" if self.phy else ""
            return f"{self.name}{veth} (1 sender, {self.sinks} sinks)"
        pairs = f" {self.pairs}vs{self.pairs}" if self.pairs > 1 else ""
        rtt = " round-trip" if self.rtt else ""
        return f"{self.name}{'/' + self.phy if self.phy else ''} {self.direction}{pairs}{rtt}"

    @property
    def gen_ports(self) -> int:
        """How many ports of the generator's (not its inline VNFs') this scenario uses."""
        return 1 + self.sinks if self.family == "fanout" else 2 * self.pairs


def check_vnf(name: str, vnf: str) -> None:
    """ValueError unless VNF (one kind, or kinds in chain order) can serve scenario NAME:
    a list of kinds is the mixed chain's process variant, and the mixed chain takes that or
    inline."""
    mixed = ",".join(MIXED_PROCESS)
    if name == MIXED and vnf not in (INLINE, mixed):
        raise ValueError(f"{MIXED} is an L3 VNF then an L2 VNF: --vnf {INLINE} (sluice-gen's "
                         f"--vnf-kind l3,l2) or {mixed} (DPDK's examples as processes), not "
                         f"{vnf!r}")
    if name != MIXED and "," in vnf:
        raise ValueError(f"--vnf {vnf}: a list of VNF kinds is for {MIXED} only")


def parse(name: str, phy: str, direction: str, pairs: int = 1,
          vnf: str = INLINE) -> Scenario:
    """A Scenario from the command line's words; ValueError for anything unknown. VNF is
    the kind of loopback's VNFs (vnfs.KINDS), or the mixed chain's (inline or
    l3fwd,l2fwd)."""
    m = re.fullmatch(r"v2v|p2p|p2v|v2p|loopback-([1-9])|(chain-mixed)", name)
    if m is None or (m.group(1) and int(m.group(1)) > MAX_CHAIN):
        raise ValueError(f"unknown scenario {name!r}: v2v, p2p, p2v, v2p, "
                         f"loopback-1..{MAX_CHAIN} or {MIXED}")
    chain = bool(m.group(1) or m.group(2))
    if chain:
        check_vnf(name, vnf)
    if phy not in ("memif", "veth"):
        raise ValueError(f"unknown --phy {phy!r}: memif or veth")
    if direction not in ("uni", "bidir"):
        raise ValueError(f"unknown direction {direction!r}: uni or bidir")
    if not 1 <= pairs <= MAX_PAIRS or (pairs > 1 and chain):
        raise ValueError(f"--pairs {pairs}: 1..{MAX_PAIRS}, and 1 for chains")
    return Scenario(name, "" if name == "v2v" else phy, direction, pairs,
                    vnf_kind=vnf if chain else INLINE)


def fanout(sinks: int) -> Scenario:
    """One sender flooding to SINKS destinations over vhost-user (1..MAX_FANOUT)."""
    if not 1 <= sinks <= MAX_FANOUT:
        raise ValueError(f"fanout {sinks}: 1..{MAX_FANOUT} destinations")
    return Scenario(f"fanout-{sinks}", "", "uni", 1, sinks=sinks)


def round_trip() -> Scenario:
    """The four-port v2v round trip (--latency fixed:RATE)."""
    return Scenario("v2v", "", "uni", 1, rtt=True)


def _vhost(work: Path, tag: str, name: str, role: str = "phy") -> Link:
    return Link(name, "vhost", path=str(work / f"{tag}-{name}.sock"), role=role)


def _phy_link(scn: Scenario, work: Path, tag: str, i: int) -> Link:
    name = f"p{i}"
    if scn.phy == "memif":
        return Link(name, "memif", path=str(work / f"{tag}-{name}.memif"))
    return Link(name, "veth", iface=f"{tag}s{i}", peer=f"{tag}g{i}")


def _end(scn: Scenario, work: Path, tag: str, i: int) -> Link:
    """The I-th generator-facing link: even ones send (uni), odd ones receive."""
    virtual = {"v2v": scn.phy != "veth", "p2p": False, "loopback": False, "chain": False,
               "p2v": i % 2 == 1, "v2p": i % 2 == 0}[scn.family]
    return _vhost(work, tag, f"p{i}") if virtual else _phy_link(scn, work, tag, i)


def _vnf_link(work: Path, tag: str, v: int, side: str, veth: bool) -> Link:
    name = f"v{v}{side}"
    if veth:
        return Link(name, "veth", iface=f"{tag}s{name}", peer=f"{tag}g{name}", role="vnf")
    return _vhost(work, tag, name, "vnf")


def topology(scn: Scenario, work: Path, tag: str, netns: str | None = None,
             veth_vnfs: bool = False) -> Topology:
    """The links of one switch (TAG makes its names unique) in scenario SCN. VETH_VNFS: the
    VNFs' ports are veth pairs (switches without vhost-user, on the veth stand-in only)."""
    if scn.family == "fanout":
        return fanout_topology(scn, work, tag, netns)
    links: list[Link] = []
    for p in range(scn.pairs):
        links.append(_end(scn, work, tag, 2 * p))
        for v in range(1, scn.chain + 1):
            links += [_vnf_link(work, tag, v, side, veth_vnfs and scn.phy == "veth")
                      for side in "ab"]
        links.append(_end(scn, work, tag, 2 * p + 1))
    pairs = tuple((i, i + 1) for i in range(0, len(links), 2))
    veth = any(link.kind == "veth" for link in links)
    # The mixed chain's firewall stage sits between its L3 VNF (v1) and its L2 VNF (v2):
    # the rules apply to what the L3 VNF sends out of its port v1b.
    firewall = next(i for i, link in enumerate(links) if link.name == "v1b") if (
        scn.name == MIXED) else None
    return Topology(tuple(links), pairs, netns if veth else None, firewall=firewall)


def fanout_topology(scn: Scenario, work: Path, tag: str, netns: str | None) -> Topology:
    """The sender's link, then one per sink (role `sink`: sluice-gen --sink-port): vhost-user,
    or veth pairs for fanout-N/veth (the switch's ends in NETNS). No pairs: only a switch
    that floods serves it, all ports in one bridge."""
    if scn.phy == "veth":
        names = ["p0"] + [f"k{i}" for i in range(scn.sinks)]
        veths = tuple(Link(n, "veth", iface=f"{tag}s{n}", peer=f"{tag}g{n}",
                           role="phy" if n == "p0" else "sink") for n in names)
        return Topology(veths, (), netns)
    links = (_vhost(work, tag, "p0"),
             *(_vhost(work, tag, f"s{i}", "sink") for i in range(scn.sinks)))
    return Topology(links, ())


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
