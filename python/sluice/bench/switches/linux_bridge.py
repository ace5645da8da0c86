"""linux-bridge: the kernel's bridge between the switch's veth ends, in our own namespace.

The generator's veth ends sit in its namespace, the switch's ends in the switch namespace the
scenario made, where this adapter adds a bridge per pair of links and enslaves them: one in
p2p and v2v, one with every port in fanout-N/veth (it floods the sender's broadcasts); in
loopback one per segment (phy-VNF1, VNF1-VNF2, ..., VNFN-phy), as a chain of
container networks joins VNFs with two interfaces each. In p2p the generator's ends stand
for NICs; in v2v (run as v2v/veth) and for loopback's VNFs they stand for containers: a
container on a Linux bridge (Docker's default network, LXC's veth type) has one end of a
veth pair as its eth0 and the other enslaved to the bridge, which is exactly this wiring.
Taps are what a VM's QEMU gets (and need vhost_net, absent here, to be fast); they would
make the generator, not the container runtime, create the switch's ports, so they are not
used. There is no process: the bridge forwards in softirq on whichever CPU sent the frame,
so its rows come from interleaved trials with placement labels, and CPU time is per-CPU
busy time.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

from sluice.bench.arrange import Poller
from sluice.bench.switches.base import Context, Link, Switch, Topology, which


def ip(netns: str, *args: str) -> None:
    """`ip -n NETNS ARGS`; RuntimeError with ip's words when it fails."""
    r = subprocess.run(["ip", "-n", netns, *args], capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise RuntimeError(f"ip -n {netns} {' '.join(args)}: {r.stderr.strip()}")


class LinuxBridge(Switch):
    """A Linux bridge with STP off and learning on."""

    name = "linux-bridge"
    learning_modes = ("learn",)
    modes = ("learn",)
    kernel = True
    scenarios = ("p2p", "v2v", "loopback")
    phys = ("veth",)
    veth_only = True
    flooding_modes = ("learn",)

    def __init__(self, ctx: Context, mode: str) -> None:
        super().__init__(ctx, mode)
        self.bridges: list[str] = []
        self.netns: str | None = None

    @classmethod
    def available(cls, repo: Path) -> str | None:
        if which("ip") is None:
            return "iproute2 is not installed: run scripts/setup.sh"
        if not Path("/sys/class/net").exists():
            return "no /sys/class/net: cannot make veths"
        return None

    def unsupported(self, scenario: str, phy: str) -> str | None:
        if scenario == "v2v" and phy != "veth":
            return "linux-bridge has no vhost-user ports: v2v over containers' veths only"
        return super().unsupported(scenario, phy)

    def start(self, topo: Topology) -> None:
        if topo.netns is None or any(link.kind != "veth" for link in topo.links):
            raise ValueError("linux-bridge needs veth links in a namespace")
        self.netns = topo.netns
        if not topo.pairs:        # fanout: one bridge with every port, which floods
            self._bridge(f"{self.ctx.tag}br0"[:15], *(link.iface for link in topo.links))
        for k, (a, b) in enumerate(topo.pairs):
            self._bridge(f"{self.ctx.tag}br{k}"[:15], topo.links[a].iface, topo.links[b].iface)
        self.topology = dataclasses.replace(topo, veth_driver="kernel")

    def _bridge(self, name: str, *ports: str) -> None:
        """A learning bridge NAME (STP off) with PORTS enslaved, up."""
        assert self.netns is not None
        ip(self.netns, "link", "add", "name", name, "type", "bridge", "stp_state", "0",
           "forward_delay", "0")
        self.bridges.append(name)
        for port in ports:
            ip(self.netns, "link", "set", port, "master", name)
        ip(self.netns, "link", "set", name, "up")

    def gen_spec(self, link: Link, raw: bool = True) -> str:
        return f"{self.ctx.extra.get('gen_veth_driver', 'af_packet')}:iface={link.peer}"

    def port_kind(self) -> str:
        vnfs = self.topology is not None and any(link.role == "vnf"
                                                 for link in self.topology.links)
        return "veth (kernel)" + (", VNFs on veths" if vnfs else "")

    def port_counters(self) -> dict[str, dict[str, Any]] | None:
        """The bridge ports' (the switch's veth ends') kernel counters, `ip -s link` in the
        switch namespace (what /sys/class/net/*/statistics holds there)."""
        if self.netns is None or self.topology is None:
            return None
        r = subprocess.run(["ip", "-n", self.netns, "-j", "-s", "link", "show"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            return None
        by_iface = {d["ifname"]: d.get("stats64", {}) for d in json.loads(r.stdout)}
        out = {}
        for link in self.topology.links:
            st = by_iface.get(link.iface)
            if st is None:
                return None
            out[link.name] = {"rx": int(st["rx"]["packets"]), "tx": int(st["tx"]["packets"]),
                              "rx_dropped": int(st["rx"]["dropped"]),
                              "tx_dropped": int(st["tx"]["dropped"])}
        return out

    def version(self) -> str:
        r = subprocess.run(["uname", "-r"], capture_output=True, text=True, timeout=5)
        return f"Linux bridge, kernel {r.stdout.strip()}"

    def pids(self) -> list[int]:
        return []

    def pollers(self) -> list[Poller]:
        return []

    def steering(self) -> str:
        if self.topology is not None and not self.topology.pairs:
            return ("Linux bridge: one bridge with every port (fanout): the sender's "
                    "broadcasts flooded to every sink; ports: veth ends (the containers' veth "
                    "pairs; the generator holds their ends with af_xdp or af_packet)")
        return ("Linux bridge: MAC learning; unknown destinations flooded to the other port; "
                "one bridge per segment (loopback: phy-VNF1, VNF1-VNF2, ..., as container "
                "networks chain VNFs). Ports: veth ends (v2v: the containers' veth pairs, as "
                "Docker and LXC attach a container to a bridge; the generator holds the "
                "containers' ends with af_xdp or af_packet)")

    def stop(self) -> None:
        while self.netns is not None and self.bridges:
            subprocess.run(["ip", "-n", self.netns, "link", "del", self.bridges.pop()],
                           capture_output=True, timeout=20, check=False)
        self.netns = None
