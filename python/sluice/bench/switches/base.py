"""The interface every switch adapter implements, and the links a scenario asks for.

A scenario describes the switch's ports as links: a vhost-user socket, a memif socket or a
veth pair, each with the generator's end. An adapter starts its switch, builds those ports
and the forwarding between them (patch pairs, flows or a learning bridge), says which of its
processes busy-poll on which CPU and which PIDs to SIGSTOP, and cleans up everything it made.
Adding a switch is one file with one subclass, listed in `switches/__init__.py`.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from sluice.bench.arrange import Poller
from sluice.bench.cost import Meter

# Why no switch runs jumbo frames over memif: DPDK 22.11's memif driver, which sluice-gen
# and the switches share, chains a 9000 B frame over 2 KB buffers, and at full rate here
# (testpmd io-forward and sluiced alike; paced at 50 kpps they arrived whole) frames
# arrived cut to 2048 B multiples, run together (9018 B) and out of sequence.
JUMBO_NOT_MEMIF = ("DPDK 22.11's memif driver delivers chained 9000 B frames cut, run together "
                   "and out of sequence at full rate (docs/bench.md, 'Jumbo frames')")


@dataclass(frozen=True)
class Link:
    """One port of the switch and the generator's end of it.

    KIND is vhost, memif or veth. For vhost and memif PATH is the socket; for veth IFACE is
    the switch's end (in the switch namespace) and PEER the generator's (in its namespace).
    ROLE is phy (the generator's traffic ports), vnf (an inline VNF's ports) or sink (a
    fan-out destination: a receive-only port of the generator's, sluice-gen --sink-port)."""

    name: str
    kind: str
    path: str = ""
    iface: str = ""
    peer: str = ""
    role: str = "phy"


@dataclass(frozen=True)
class Topology:
    """The ports of one switch in one scenario and the pairs of ports it cross-connects.

    PAIRS lists the link indices a patch or in_port->output configuration joins (both ways);
    a learning bridge puts all links in one bridge instead. NETNS is the namespace of the
    switch's veth ends (None without veths); VETH_DRIVER is af_xdp or af_packet. FIREWALL
    is the link index whose input passes the chain's firewall rules (chain-mixed: the L3
    VNF's output port; rules.py), None elsewhere."""

    links: tuple[Link, ...]
    pairs: tuple[tuple[int, int], ...]
    netns: str | None = None
    veth_driver: str = "af_xdp"
    firewall: int | None = None


@dataclass(frozen=True)
class Context:
    """What every adapter needs: a private work directory, CPUs, a unique tag."""

    work: Path
    tag: str                       # unique per run and switch: file prefixes, bridge names
    switch_cpu: int
    ctl_cpu: int
    repo: Path
    extra: dict[str, str] = field(default_factory=dict)


class Switch(ABC):
    """A switch under test. Lifecycle: available() -> start(topology) -> ... -> stop()."""

    name: ClassVar[str]
    modes: ClassVar[tuple[str, ...]]
    kernel: ClassVar[bool] = False         # no process to stop: interleaved trials only
    scenarios: ClassVar[tuple[str, ...]] = ("v2v", "p2p", "p2v", "v2p", "loopback")
    phys: ClassVar[tuple[str, ...]] = ("memif", "veth")
    vhost_server: ClassVar[bool] = True    # False: the switch connects (vhost-user client)
    # Whether --gen-driver auto may put the generator's ends of this switch's vhost-user
    # links on sluice-gen's virtio-raw (False: not yet tried against it; virtio-raw only
    # when named).
    raw_gen_by_default: ClassVar[bool] = True
    # True: the switch has no vhost-user ports (a kernel-facing switch). In v2v its ports are
    # the containers' veth pairs (the runner gives it a v2v/veth scenario of its own,
    # kernel_path); in loopback its VNF ports are veth pairs too.
    veth_only: ClassVar[bool] = False
    # Modes that learn MACs and flood what they have not learned. sluice-gen announces its
    # ports to them (--announce) and, in chains, VNFs address each next hop by its MAC.
    learning_modes: ClassVar[tuple[str, ...]] = ()
    # The modes that flood a broadcast to every other port (the fanout scenario needs one).
    flooding_modes: ClassVar[tuple[str, ...]] = ()
    # Variants of the modes that run only when named (NAME:VARIANT): a bare NAME on the
    # command line means every mode, never these (sluice's patch+idle, a worker that sleeps
    # when idle, is measured apart: sluice-bench idle).
    variants: ClassVar[tuple[str, ...]] = ()
    # The link kinds (vhost, memif, veth) over which the adapter carries frames longer than
    # 1518 B (stats.is_jumbo), as it starts the switch. A scenario whose links are not all
    # of these runs no jumbo size for it: the run skips that size with a note.
    jumbo_links: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx: Context, mode: str) -> None:
        if mode not in self.modes + self.variants:
            raise ValueError(f"{self.name}: mode {mode!r} not one of "
                             f"{self.modes + self.variants}")
        self.ctx = ctx
        self.mode = mode
        self.topology: Topology | None = None
        # The ACL rules (rules.py) loaded above the steering, and their distinct masks:
        # set by rule-programmable switches when they load some.
        self.acl_rules = 0
        self.acl_masks = 0

    @classmethod
    @abstractmethod
    def available(cls, repo: Path) -> str | None:
        """None when the switch can run here, else why not (and how to install it)."""

    @classmethod
    def available_with(cls, repo: Path, extra: Mapping[str, str]) -> str | None:
        """available() given the run's switch options (Context.extra, e.g. vpp_prefix from
        --vpp-prefix); adapters without options of their own need only REPO."""
        return cls.available(repo)

    @property
    def learns(self) -> bool:
        """Whether this mode learns MACs (and floods what it has not learned)."""
        return self.mode in self.learning_modes

    def unsupported(self, scenario: str, phy: str) -> str | None:
        """None when this switch and mode can run SCENARIO over PHY, else why not."""
        family = scenario.split("-")[0]
        if family == "fanout":
            return self.fanout_unsupported()
        if family not in self.scenarios:
            return f"{self.name} does not do {scenario}"
        if family != "v2v" and phy not in self.phys:
            return f"{self.name} has no {phy} ports"
        if self.learns and family == "loopback" and phy == "veth" and not self.veth_only:
            return ("a learning chain addresses every hop by MAC, and the generator's veth "
                    "ends keep the kernel's: use --phy memif")
        return None

    def jumbo_unsupported(self, scenario: str, phy: str) -> str | None:
        """None when this switch carries jumbo frames over every link of SCENARIO over PHY,
        else why not."""
        family = scenario.split("-")[0]
        virtual = "veth" if self.veth_only else "vhost"     # a container's or VNF's port
        kinds = {virtual} if family in ("v2v", "fanout") else {phy}
        if family not in ("v2v", "fanout", "p2p"):
            kinds.add(virtual)
        missing = sorted(kinds - set(self.jumbo_links))
        if not missing:
            return None
        if missing == ["memif"]:
            return JUMBO_NOT_MEMIF
        return (f"{self.name}'s adapter does not set up its {' and '.join(missing)} ports "
                "for frames over 1518 B")

    def fanout_unsupported(self) -> str | None:
        """None when this mode floods a broadcast to every other port over vhost-user ports
        (the fanout scenario), else why not."""
        if self.mode not in self.flooding_modes:
            if self.flooding_modes:
                return (f"{self.name} {self.mode} does not flood (fanout needs a mode that "
                        f"copies a broadcast to every port: {', '.join(self.flooding_modes)})")
            return f"{self.name} never copies a frame to several ports: it cannot fan out"
        return None

    @abstractmethod
    def start(self, topo: Topology) -> None:
        """Starts the switch with TOPO's ports and forwarding; returns when it forwards."""

    @abstractmethod
    def version(self) -> str:
        """The switch's name and version as it reports them."""

    @abstractmethod
    def pids(self) -> list[int]:
        """The processes to SIGSTOP while another switch is measured (empty: kernel)."""

    @abstractmethod
    def pollers(self) -> list[Poller]:
        """The busy-polling threads while it runs."""

    def gen_spec(self, link: Link, raw: bool = True) -> str:
        """The sluice-gen port spec of the generator's end of LINK: the other role of the
        switch's socket, or the generator's veth end with the same driver. With
        --gen-driver virtio-raw a vhost-user link's end is sluice-gen's own driver where
        RAW and the link is one the generator sends and receives on ('phy'): virtio-raw
        serves no inline VNF, fan-out sink ('sink'), reflector or ping port, so those stay
        on virtio-user."""
        if link.kind == "vhost":
            # Where the switch's port is a vhost-user client (OVS-DPDK's
            # dpdkvhostuserclient), the generator's end is the socket's server.
            server = "" if self.vhost_server else ",server=1"
            own = raw and link.role == "phy"
            asked = self.ctx.extra.get("gen_vhost") == "virtio-raw" and (
                self.raw_gen_by_default or "gen_vhost_auto" not in self.ctx.extra)
            driver = "virtio-raw" if own and asked else "virtio-user"
            return f"{driver}:path={link.path}{server}"
        if link.kind == "memif":
            return f"memif:role=client,socket={link.path}"
        driver = self.topology.veth_driver if self.topology else "af_packet"
        return f"{driver}:iface={link.peer}"

    @abstractmethod
    def steering(self) -> str:
        """How this switch in this mode steers a scenario's frames, for the report."""

    @abstractmethod
    def stop(self) -> None:
        """Stops every process and removes everything start() made (idempotent)."""

    def cost_meter(self) -> Meter | None:
        """The switch's own cycle counters for cost per packet (cost.py: busy TSC cycles of
        its forwarding threads and the packets they received, read without stopping it);
        None when it has none. Its forwarding threads' CPU time is read from /proc for
        every switch alike."""
        return None

    def port_counters(self) -> dict[str, dict[str, Any]] | None:
        """The switch's own counters of each topology link's port, by link name: `rx` and
        `tx` packets, and where the switch has them `rx_missed`, `dropped` and `drops`
        (reason -> count). Totals since the switch started; the runner takes differences.
        None when the switch's counters cannot be read without disturbing it."""
        return None

    def port_kind(self) -> str:
        """The driver of the switch's ports in the current topology."""
        if self.topology is None or not self.topology.links:
            return ""
        kind = self.topology.links[0].kind
        return {"vhost": "vhost-user", "memif": "memif"}.get(kind, self.topology.veth_driver)


def which(program: str) -> str | None:
    """The path of PROGRAM on PATH, or None."""
    return shutil.which(program)
