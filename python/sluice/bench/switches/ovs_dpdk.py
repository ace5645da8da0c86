"""ovs-dpdk: Open vSwitch's DPDK build with a private ovsdb-server and ovs-vswitchd.

Everything lives under the adapter's work directory (switches/ovsdb.py: database, sockets,
logs, the bridge's OpenFlow socket); no system service is touched. The netdev bridge has
dpdkvhostuserclient ports for vhost links (the generator's end is then the server, server=1),
and DPDK vdev ports (net_memif, net_af_xdp or net_af_packet) for memif and veth links (a
memif client of OVS opens a receive ring per OVS transmit queue: see MEMIF_TX_QUEUES). Mode
`normal` leaves the bridge's NORMAL action (MAC learning, flooding); mode `flows` replaces it
with explicit in_port->output rules for the topology's pairs. The PMD thread runs on the
switch CPU (pmd-cpu-mask); the main and handler threads on the generator's CPU, where they
sleep. The variant `vxlan` (named only) sends every pair through a VXLAN tunnel and back, set
up the OVS userspace way: vxlan ports on br0 (`options:local_ip`, `remote_ip`, `key`), the
tunnel endpoints' addresses on the LOCAL port of a second netdev bridge br-phy whose one
port is a DPDK ring loopback (`net_ring`: what is sent comes back in), the next hop set with
`tnl/arp/set`; rules send A to tunnel end vxaN and what arrives on vxbN (the other end) to
B, and br-phy passes LOCAL <-> ring, where OVS pushes and pops the headers (docs/bench.md,
"VXLAN").
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path
from typing import Any

from sluice.bench import procs, rules
from sluice.bench.arrange import Poller
from sluice.bench.cost import Meter
from sluice.bench.switches import ovsdb
from sluice.bench.switches.base import Context, Link, Switch, Topology

VSWITCHD = Path("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk")
# OVS gives every port a transmit queue per thread that sends: the main thread takes queue
# 0, the one PMD thread (pmd-cpu-mask, one CPU) queue 1, where it sends everything it
# forwards. A DPDK 22.11 memif server has a ring only for the queues its client opened
# receive queues for, and its transmit on any other queue sends nothing: with a one-queue
# client every forwarded frame was dropped (docs/bench.md, "OVS-DPDK over memif";
# tests/functional/test_ovs_memif.py). So the generator's memif clients open this many.
MEMIF_TX_QUEUES = 2
PHY_BRIDGE = "br-phy"                # vxlan mode: the tunnel endpoints' bridge
PHY_MAC = "02:00:00:00:ff:01"


class OvsDpdk(Switch):
    """OVS-DPDK 3.x, netdev datapath, NORMAL or in_port->output flows."""

    name = "ovs-dpdk"
    learning_modes = ("normal",)
    modes = ("normal", "flows")
    variants = ("vxlan",)
    flooding_modes = ("normal",)
    vhost_server = False

    def __init__(self, ctx: Context, mode: str) -> None:
        super().__init__(ctx, mode)
        self.prefix = f"{ctx.tag}ov"
        self.ovs = ovsdb.PrivateOvs(ctx.work / "ovs", ctx.tag)

    @classmethod
    def available(cls, repo: Path) -> str | None:
        missing = ovsdb.missing(VSWITCHD)
        if missing:
            return ("OVS-DPDK is not installed (missing " + ", ".join(missing)
                    + "): run scripts/setup.sh --peers (Debian openvswitch-switch-dpdk)")
        return None

    def _port_args(self, i: int, link: Link, driver: str) -> list[str]:
        if link.kind == "vhost":
            return ["type=dpdkvhostuserclient", f"options:vhost-server-path={link.path}"]
        if link.kind == "memif":
            args = f"net_memif{i},role=server,socket={link.path},socket-abstract=no"
        else:
            args = f"net_{driver}{i},iface={link.iface}"
        return ["type=dpdk", f"options:dpdk-devargs={args}"]

    def gen_spec(self, link: Link, raw: bool = True) -> str:
        """The generator's end; a memif client receives on every queue OVS sends on."""
        spec = super().gen_spec(link, raw)
        return f"{spec},rx_queues={MEMIF_TX_QUEUES}" if link.kind == "memif" else spec

    def _check_memif_queues(self, topo: Topology) -> None:
        """RuntimeError when OVS configured another number of transmit queues on a memif
        port than the generator's clients will open receive rings for."""
        shown = self.ovs.appctl("dpctl/show")
        for link in topo.links:
            if link.kind != "memif":
                continue
            m = re.search(rf"\b{re.escape(link.name)} \(dpdk:[^)]*configured_tx_queues=(\d+)",
                          shown)
            if m is None or int(m.group(1)) != MEMIF_TX_QUEUES:
                raise RuntimeError(
                    f"OVS-DPDK's memif port {link.name} has "
                    f"{m.group(1) if m else 'an unknown number of'} transmit queues, the "
                    f"generator opens {MEMIF_TX_QUEUES} receive rings: frames sent on the "
                    "others would be dropped")

    def _add_ports(self, topo: Topology) -> str:
        driver = topo.veth_driver
        for i, link in enumerate(topo.links):
            try:
                self.ovs.add_port(link.name, i + 1, self._port_args(i, link, driver))
            except RuntimeError:
                if link.kind != "veth" or driver == "af_packet":
                    raise
                driver = "af_packet"
                self.ovs.add_port(link.name, i + 1, self._port_args(i, link, driver))
        return driver

    def start(self, topo: Topology) -> None:
        cpu_mask = hex(1 << self.ctx.switch_cpu)
        self.ovs.start_db(self.ctx.ctl_cpu, [
            "dpdk-init=true", f"pmd-cpu-mask={cpu_mask}", "dpdk-socket-mem=1024",
            "dpdk-extra=--file-prefix=" + self.prefix
            + " --single-file-segments --no-pci --log-level=*:warning"])
        self.ovs.start_vswitchd(VSWITCHD, str(self.ctx.ctl_cpu), topo.netns)
        self.ovs.add_bridge()
        driver = self._add_ports(topo)
        self._check_memif_queues(topo)
        if self.mode == "flows":
            lines, self.acl_rules, self.acl_masks = rules.for_switch(
                rules.pair_rules(topo.pairs), self.ctx.extra, topo.firewall)
            self.ovs.load_flows(lines)
        elif self.mode == "vxlan":
            self._tunnels(topo)
        self.topology = dataclasses.replace(topo, veth_driver=driver)

    def _tunnels(self, topo: Topology) -> None:
        """Pair N's ends joined through a VXLAN tunnel looped over br-phy's ring port."""
        vs, netns = self.ovs.vsctl, self.ovs.own_netns or topo.netns
        vs("add-br", PHY_BRIDGE, "--", "set", "bridge", PHY_BRIDGE, "datapath_type=netdev",
           f"other_config:hwaddr={PHY_MAC}")
        vs("add-port", PHY_BRIDGE, "ring", "--", "set", "Interface", "ring", "type=dpdk",
           f"options:dpdk-devargs=net_ring0,nodeaction={self.prefix}r:0:CREATE",
           # net_ring loops transmit queue i into receive queue i, and OVS's PMD sends on
           # queue 1 (queue 0 is the main thread's): both are polled, or nothing returns.
           "options:n_rxq=2", "ofport_request=1")
        self.ovs.wait_port("ring")
        steering = []
        base = len(topo.links) + 1
        for n, (a, b) in enumerate(topo.pairs):
            for end, local, remote in (("a", 1, 2), ("b", 2, 1)):
                ip = f"10.{200 + n}.0.{local}"
                vs("add-port", ovsdb.BRIDGE, f"vx{end}{n}", "--", "set", "Interface",
                   f"vx{end}{n}", "type=vxlan", f"options:local_ip={ip}",
                   f"options:remote_ip=10.{200 + n}.0.{remote}", f"options:key={100 + n}",
                   f"ofport_request={base + 2 * n + (end == 'b')}")
                subprocess.run(["ip", "netns", "exec", netns, "ip", "addr", "add",
                                f"{ip}/32", "dev", PHY_BRIDGE], check=True,
                               capture_output=True, timeout=20)
            # A's frames into the tunnel's end a, what leaves its end b to B; and back.
            va, vb = base + 2 * n, base + 2 * n + 1
            steering += [f"in_port={a + 1},actions=output:{va}",
                         f"in_port={vb},actions=output:{b + 1}",
                         f"in_port={b + 1},actions=output:{vb}",
                         f"in_port={va},actions=output:{a + 1}"]
        subprocess.run(["ip", "netns", "exec", netns, "ip", "link", "set", PHY_BRIDGE, "up"],
                       check=True, capture_output=True, timeout=20)
        for n in range(len(topo.pairs)):
            for local in (1, 2):
                self.ovs.appctl("tnl/arp/set", PHY_BRIDGE, f"10.{200 + n}.0.{local}", PHY_MAC)
        self.ovs.load_flows(steering)
        phy = ["in_port=LOCAL,actions=output:1", "in_port=1,actions=LOCAL"]
        mgmt = f"unix:{self.ovs.dir}/{PHY_BRIDGE}.mgmt"
        subprocess.run(["ovs-ofctl", "del-flows", mgmt], check=True, capture_output=True,
                       timeout=30)
        for line in phy:
            subprocess.run(["ovs-ofctl", "add-flow", mgmt, line], check=True,
                           capture_output=True, timeout=30)

    def port_counters(self) -> dict[str, dict[str, Any]] | None:
        """vswitchd's counters of its ports (`ovs-ofctl dump-ports`), by OpenFlow number.
        memif ports are left out: DPDK 22.11's memif counts per connected ring, so their
        rx and tx read 0 whenever no client is connected (before and after a trial)."""
        if self.topology is None:
            return None
        got = self.ovs.port_counters([link.name for link in self.topology.links])
        if got is None:
            return None
        memif = {link.name for link in self.topology.links if link.kind == "memif"}
        return {name: c for name, c in got.items() if name not in memif}

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        """vswitchd's process (its exit status names a crash in the run's restarts)."""
        return self.ovs.vswitchd

    def cost_meter(self) -> Meter | None:
        return self.ovs.cost_meter()

    def version(self) -> str:
        return ovsdb.version(VSWITCHD)

    def pids(self) -> list[int]:
        pid = self.ovs.pid()
        return [pid] if pid else []

    def pollers(self) -> list[Poller]:
        return [Poller("ovs-vswitchd pmd thread", self.ctx.switch_cpu)]

    def steering(self) -> str:
        if self.mode == "vxlan":
            return ("OVS-DPDK vxlan: in_port rules send each pair's ends through a VXLAN "
                    "tunnel (type=vxlan ports, endpoints on br-phy's LOCAL port, tnl/arp/set) "
                    "looped over br-phy's net_ring port: pushed and popped once")
        if self.mode == "normal":
            return ("OVS-DPDK NORMAL action: MAC learning, flooding of unknown destinations "
                    "(one-way traffic never teaches it the sink's MAC: every frame floods)")
        acl = (f"; {self.acl_rules} ACL rules over {self.acl_masks} masks above them"
               + (" (the chain's firewall, on the L3 VNF's output)" if self.topology
                  and self.topology.firewall is not None else "") if self.acl_rules else "")
        return ("OVS-DPDK explicit rules in_port=A,actions=output:B for each pair, both ways"
                + acl)

    def stop(self) -> None:
        self.ovs.stop()
        procs.remove_hugepage_files(self.prefix)
