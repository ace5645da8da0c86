"""The switch adapters, by name. Adding a switch: one file and one line here."""

from __future__ import annotations

from sluice.bench.switches.base import Context, Link, Switch, Topology
from sluice.bench.switches.basicfwd import Basicfwd
from sluice.bench.switches.linux_bridge import LinuxBridge
from sluice.bench.switches.ovs_dpdk import OvsDpdk
from sluice.bench.switches.ovs_netdev import OvsNetdev
from sluice.bench.switches.sluice import Sluice
from sluice.bench.switches.testpmd import Testpmd
from sluice.bench.switches.vpp import Vpp

ADAPTERS: dict[str, type[Switch]] = {
    cls.name: cls for cls in (Sluice, Testpmd, Basicfwd, OvsDpdk, OvsNetdev, LinuxBridge,
                               Vpp)
}

__all__ = ["ADAPTERS", "Context", "Link", "Switch", "Topology"]
