"""ovs-netdev: Open vSwitch's userspace datapath without DPDK, on the switch's veth ends.

The plain build of ovs-vswitchd (Debian openvswitch-switch, linked with libxdp) with a
private ovsdb-server (switches/ovsdb.py), a bridge with datapath_type=netdev, and the
scenario's veth ends as its ports, of one of two kinds:

- `afxdp` (modes `normal`, `flows`): an AF_XDP socket per port, polled by a PMD thread on the
  switch CPU (pmd-cpu-mask): a busy poller, like OVS-DPDK's. The main thread sleeps on the
  generator's CPU. Where OVS refuses an afxdp port, the adapter falls back to system ports.
- `system` (modes `normal-system`, `flows-system`): OVS's netdev-linux ports, an AF_PACKET
  socket per port read and written in batches by vswitchd's main thread, which sleeps in
  poll() when idle: no busy poller, so the whole process runs on the switch CPU.

Mode `normal` keeps the bridge's NORMAL action (learning, flooding); `flows` replaces it with
in_port->output rules for the topology's pairs. Only the veth stand-in (p2p; v2v as
containers attach, over their veth pairs; loopback with VNFs on veth pairs, flows modes), so
every row is `kernel_path`.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

from sluice.bench import rules
from sluice.bench.arrange import Poller
from sluice.bench.cost import Meter
from sluice.bench.switches import ovsdb
from sluice.bench.switches.base import Context, Link, Switch, Topology

VSWITCHD = Path("/usr/lib/openvswitch-switch/ovs-vswitchd")


class OvsNetdev(Switch):
    """OVS 3.x userspace datapath, afxdp or system ports on veths, NORMAL or flows."""

    name = "ovs-netdev"
    learning_modes = ("normal", "normal-system")
    modes = ("normal", "flows", "normal-system", "flows-system")
    scenarios = ("p2p", "v2v", "loopback")
    phys = ("veth",)
    veth_only = True

    def __init__(self, ctx: Context, mode: str) -> None:
        super().__init__(ctx, mode)
        self.ovs = ovsdb.PrivateOvs(ctx.work / "ovs", ctx.tag)
        self.port_type = "system" if mode.endswith("-system") else "afxdp"
        self.fallback = ""

    @classmethod
    def available(cls, repo: Path) -> str | None:
        missing = ovsdb.missing(VSWITCHD)
        if missing:
            return ("Open vSwitch is not installed (missing " + ", ".join(missing)
                    + "): run scripts/setup.sh --peers (Debian openvswitch-switch)")
        return None

    def unsupported(self, scenario: str, phy: str) -> str | None:
        if scenario.startswith("loopback") and self.mode.startswith("normal"):
            return ("loopback with NORMAL needs VNFs that rewrite MACs to next hops: not yet "
                    "(the flows modes steer the chain)")
        if scenario == "v2v" and phy != "veth":
            return "ovs-netdev has no vhost-user ports (that needs DPDK): v2v over veths only"
        return super().unsupported(scenario, phy)

    def fanout_unsupported(self) -> str | None:
        # NORMAL would flood; what is missing is a run that shows 1 + N afxdp (or system)
        # ports of this datapath delivering the copies.
        return ("ovs-netdev: fanout over its afxdp/system ports is not tried yet (NORMAL "
                "floods, but no run here has checked 1 + N such ports)")

    def _add_ports(self, topo: Topology) -> None:
        try:
            self._add_all(topo)
        except RuntimeError as e:
            if self.port_type != "afxdp":
                raise
            for link in topo.links:
                self.ovs.vsctl("--if-exists", "del-port", ovsdb.BRIDGE, link.name)
            self.fallback = f"afxdp refused ({e}); system ports instead"
            self.port_type = "system"
            self._add_all(topo)

    def _add_all(self, topo: Topology) -> None:
        extra = ["options:n_rxq=1"] if self.port_type == "afxdp" else []
        for i, link in enumerate(topo.links):
            self.ovs.add_port(link.name, i + 1, [f"type={self.port_type}", *extra])

    def _link_names(self, topo: Topology) -> Topology:
        """OVS names a system or afxdp port after its kernel device: the switch's veth end."""
        links = tuple(Link(link.iface, link.kind, link.path, link.iface, link.peer, link.role)
                      for link in topo.links)
        return dataclasses.replace(topo, links=links)

    def start(self, topo: Topology) -> None:
        if topo.netns is None or any(link.kind != "veth" for link in topo.links):
            raise ValueError("ovs-netdev needs veth links in a namespace")
        named = self._link_names(topo)
        self.ovs.start_db(self.ctx.ctl_cpu, [f"pmd-cpu-mask={hex(1 << self.ctx.switch_cpu)}"])
        # System ports are served by the main thread: it is the forwarding thread then.
        cpu = self.ctx.ctl_cpu if self.port_type == "afxdp" else self.ctx.switch_cpu
        self.ovs.start_vswitchd(VSWITCHD, str(cpu), topo.netns)
        self.ovs.add_bridge()
        self._add_ports(named)
        if self.port_type == "system" and cpu != self.ctx.switch_cpu:
            self._move_to(self.ctx.switch_cpu)
        if self.mode.startswith("flows"):
            lines, self.acl_rules, self.acl_masks = rules.for_switch(
                rules.pair_rules(topo.pairs), self.ctx.extra, topo.firewall)
            self.ovs.load_flows(lines)
        self.topology = dataclasses.replace(topo, veth_driver=self.port_type)

    def _move_to(self, cpu: int) -> None:
        """Pins every thread of vswitchd to CPU (after a fallback to system ports)."""
        pid = self.ovs.pid()
        if pid:
            subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(pid)],
                           capture_output=True, timeout=10, check=False)

    def gen_spec(self, link: Link, raw: bool = True) -> str:
        return f"{self.ctx.extra.get('gen_veth_driver', 'af_packet')}:iface={link.peer}"

    def port_kind(self) -> str:
        vnfs = self.topology is not None and any(link.role == "vnf"
                                                 for link in self.topology.links)
        return f"veth, OVS {self.port_type} port" + (", VNFs on veths" if vnfs else "")

    def port_counters(self) -> dict[str, dict[str, Any]] | None:
        """vswitchd's counters of its ports (`ovs-ofctl dump-ports`), by OpenFlow number."""
        if self.topology is None:
            return None
        return self.ovs.port_counters([link.name for link in self.topology.links])

    def cost_meter(self) -> Meter | None:
        return self.ovs.cost_meter()

    def version(self) -> str:
        return ovsdb.version(VSWITCHD) + " (userspace datapath, no DPDK)"

    def pids(self) -> list[int]:
        pid = self.ovs.pid()
        return [pid] if pid else []

    def pollers(self) -> list[Poller]:
        if self.port_type == "afxdp":
            return [Poller("ovs-vswitchd pmd thread (afxdp)", self.ctx.switch_cpu)]
        return []

    def steering(self) -> str:
        ports = (f"{self.port_type} ports" + (f" ({self.fallback})" if self.fallback else ""))
        if self.mode.startswith("normal"):
            return (f"OVS userspace datapath, {ports}, NORMAL action: MAC learning, flooding "
                    "of unknown destinations (one-way traffic floods every frame)")
        return (f"OVS userspace datapath, {ports}, rules in_port=A,actions=output:B for each "
                "pair, both ways")

    def stop(self) -> None:
        self.ovs.stop()
