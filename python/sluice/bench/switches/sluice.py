"""sluice: ./build/src/sluiced on its own socket and file prefix, set up over JSON-RPC.

Mode `patch` cross-connects the topology's pairs (`sluicectl patch`); mode `learn` puts all
ports in one learning bridge and is offered only when the daemon accepts
`add-switch --mode learn`. Mode `flow` is a flow switch steered by explicit
`in_port=A,actions=output:B` rules for each pair, as `ovs-dpdk:flows`; `flow-normal` one
steered by a single `actions=normal` rule (the flow switch's learning bridge), as
`ovs-dpdk:normal`. Both load their rules with one `add-flows` from the list rules.py writes
for OVS too, with the run's ACL (--rules) or chain-mixed's firewall above the steering.
The worker is pinned to the switch CPU, the control thread to
the generator's CPU, where it sleeps on its socket. The worker busy-polls
(`--idle-sleep-us 0`) as its peers do; the variants `patch+idle` and `learn+idle` (named
only, never run by a bare `sluice`) keep the daemon's default adaptive idle sleep, for
`sluice-bench idle`. vhost-user ports take sluiced's one-copy path between guests, the
daemon's default (docs/design.md, "One copy between VMs"), which flow mode takes while its
rules look at the input port alone and learn mode for unicast to a learned fast port
(floods take mbufs). The variants `patch+pmd`, `flow+pmd` and `learn+pmd` (named only)
make them with `fast=0`, on DPDK's net_vhost PMD instead, as sluiced did before;
`patch+fast`, `flow+fast` and `learn+fast` (named only) say `fast=1` on vhost-user ports
and on memif ports too (sluiced's own memif server, one copy between two such ports).
The variant `vxlan` (named only) sends every pair through a VXLAN
tunnel and back: A is patched to vxlan port vxaN, which encapsulates onto a ring port (a
loopback: what is sent on it comes back in), where vxlan port vxbN (the tunnel's other end,
addresses swapped) decapsulates, patched to B; each frame is encapsulated and decapsulated
once, as through OVS-DPDK's `vxlan` mode (docs/bench.md, "VXLAN").
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

from sluice.bench import flowctl, procs, program, rules
from sluice.bench.arrange import Poller
from sluice.bench.cost import CumulativeMeter, Meter
from sluice.bench.switches.base import Context, Link, Switch, Topology
from sluice.rpc import RpcClient, RpcError

BRIDGE = "bench"
IDLE_SUFFIX = "+idle"     # a variant that keeps sluiced's default idle sleep
FAST_SUFFIX = "+fast"     # a variant whose vhost-user ports say fast=1 (the default)
PMD_SUFFIX = "+pmd"       # a variant whose vhost-user ports take DPDK's PMD (fast=0)
VXLAN_NEXT_HOP = "02:00:00:00:ff:01"     # vxlan mode: the outer destination MAC


def sluiced_path(repo: Path) -> Path:
    """The daemon as `make build` leaves it, else the installed one."""
    return program(repo, "build/src/sluiced", "sluiced")


class Sluice(Switch):
    """sluiced in patch or learn mode."""

    name = "sluice"
    learning_modes = ("learn", "learn+idle", "learn+fast", "learn+pmd", "flow-normal")
    modes = ("patch", "learn", "flow", "flow-normal")
    variants = ("patch+idle", "learn+idle", "vxlan", "patch+fast", "flow+fast", "learn+fast",
                "patch+pmd", "flow+pmd", "learn+pmd")
    flooding_modes = ("learn", "learn+idle", "learn+fast", "learn+pmd", "flow-normal")
    # Ports get mtu= (Context.extra["mtu"]) when the run has jumbo sizes; vhost-user chains
    # 2 KB buffers. Not memif (base.JUMBO_NOT_MEMIF); veths keep the kernel's 1500 B MTU.
    jumbo_links = ("vhost",)

    def __init__(self, ctx: Context, mode: str) -> None:
        super().__init__(ctx, mode)
        self.proc: subprocess.Popen[bytes] | None = None
        self.prefix = f"{ctx.tag}sl"
        self.socket = ctx.work / "sluiced.sock"
        self.log = ctx.work / "sluiced.log"
        # The forwarding mode (patch, learn) and whether the worker sleeps when idle.
        self.fwd_mode = (mode.removesuffix(IDLE_SUFFIX).removesuffix(FAST_SUFFIX)
                         .removesuffix(PMD_SUFFIX))
        self.idle_sleep = mode.endswith(IDLE_SUFFIX)
        # vhost-user ports: "" leaves the daemon's default (the one-copy path), else the
        # spec's fast= as the variant names it.
        self.fast_key = (",fast=1" if mode.endswith(FAST_SUFFIX) else
                         ",fast=0" if mode.endswith(PMD_SUFFIX) else "")
        self.vhost_fast = not mode.endswith(PMD_SUFFIX)
        # The daemon's forwarding function: flow-normal is a flow switch too.
        self.daemon_mode = ("flow" if self.fwd_mode.startswith("flow") else
                            "patch" if self.fwd_mode == "vxlan" else self.fwd_mode)

    @classmethod
    def available(cls, repo: Path) -> str | None:
        if not sluiced_path(repo).exists():
            return f"{sluiced_path(repo)} is missing: run 'make build'"
        return None

    def _spec(self, link: Link, driver: str) -> str:
        # A run with jumbo sizes gives its vhost-user and memif ports the MTU they need
        # (docs/ports.md, "MTU and jumbo frames"); the check costs smaller frames nothing.
        mtu = f",mtu={self.ctx.extra['mtu']}" if "mtu" in self.ctx.extra else ""
        if link.kind == "vhost":
            return f"vhost-user:server,path={link.path}{mtu}{self.fast_key}"
        if link.kind == "memif":
            # The +fast variants make memif servers on sluiced's own memif too, one copy
            # between two such ports (docs/ports.md, "One copy between memif peers").
            memif_fast = ",fast=1" if self.mode.endswith(FAST_SUFFIX) else ""
            return f"memif:role=server,socket={link.path}{mtu}{memif_fast}"
        return f"{driver}:iface={link.iface}"

    def _daemon(self, topo: Topology) -> None:
        cmd = [str(sluiced_path(self.ctx.repo)), "--socket", str(self.socket), "--file-prefix",
               self.prefix, "--main-cpu", str(self.ctx.ctl_cpu), "--worker-cpus",
               str(self.ctx.switch_cpu), "--log-level", "warning"]
        if not self.idle_sleep:
            # The worker has the switch CPU to itself, as in an NFV deployment: it
            # busy-polls like testpmd, OVS-DPDK's PMDs and VPP's workers, instead of
            # napping when idle (the daemon's default, which costs the first frame after
            # a pause its wake-up: 57 us mean in the 1000 pps echo test here). The +idle
            # variants keep the default (--idle-sleep-us 50).
            cmd += ["--idle-sleep-us", "0"]
        if "burst" in self.ctx.extra:
            cmd += ["--burst", self.ctx.extra["burst"]]
        if topo.netns:
            cmd = ["ip", "netns", "exec", topo.netns, *cmd]
        self.proc = procs.start(cmd, self.log)
        procs.wait_until(self.socket.exists, self.proc, "sluiced", self.log)

    def _add_ports(self, rpc: RpcClient, topo: Topology) -> Topology:
        """Adds every link; a veth refused with af_xdp is retried with af_packet."""
        driver = topo.veth_driver
        for link in topo.links:
            try:
                rpc.call("add-port", switch=BRIDGE, name=link.name,
                         spec=self._spec(link, driver))
            except RpcError:
                if link.kind != "veth" or driver == "af_packet":
                    raise
                driver = "af_packet"
                rpc.call("add-port", switch=BRIDGE, name=link.name,
                         spec=self._spec(link, driver))
        return dataclasses.replace(topo, veth_driver=driver)

    def start(self, topo: Topology) -> None:
        self._daemon(topo)
        with RpcClient(str(self.socket), timeout=30) as rpc:
            rpc.call("add-switch", name=BRIDGE, mode=self.daemon_mode)
            self.topology = self._add_ports(rpc, topo)
            if self.fwd_mode == "vxlan":
                self._tunnels(rpc, topo)
            elif self.fwd_mode == "patch":
                for a, b in topo.pairs:
                    rpc.call("patch", switch=BRIDGE, port1=topo.links[a].name,
                             port2=topo.links[b].name)
            elif self.daemon_mode == "flow":
                steering = (rules.normal_rules() if self.fwd_mode == "flow-normal"
                            else rules.pair_rules(topo.pairs))
                lines, self.acl_rules, self.acl_masks = rules.for_switch(
                    steering, self.ctx.extra, topo.firewall)
                self.load_flows(lines)

    def _tunnels(self, rpc: RpcClient, topo: Topology) -> None:
        """Pair N's ends A and B joined through a tunnel over a ring loopback (vxlan mode)."""
        rpc.call("add-switch", name="under", mode="patch")
        rpc.call("add-port", switch="under", name="ul", spec=f"ring:name={self.prefix}ul")
        for n, (a, b) in enumerate(topo.pairs):
            for end, link, local, remote in (("a", a, 1, 2), ("b", b, 2, 1)):
                name = f"vx{end}{n}"
                rpc.call("add-port", switch=BRIDGE, name=name, spec=(
                    f"vxlan:underlay=ul,local_ip=10.{200 + n}.0.{local},"
                    f"remote_ip=10.{200 + n}.0.{remote},vni={100 + n},"
                    f"remote_mac={VXLAN_NEXT_HOP}"))
                rpc.call("patch", switch=BRIDGE, port1=topo.links[link].name, port2=name)

    def load_flows(self, lines: list[str]) -> float:
        """Adds LINES (ovs-ofctl syntax, ports by OpenFlow number) to the flow switch with
        `add-flows`, in as few requests as sluiced's 64 MiB request lines allow (flowctl.py);
        the seconds from the first request to the last answer."""
        return flowctl.add_flows_chunked(self.socket, BRIDGE, lines)[0]

    def learn_supported(self) -> bool:
        """Whether the running daemon accepts a learn-mode switch (tried and removed)."""
        with RpcClient(str(self.socket), timeout=10) as rpc:
            try:
                rpc.call("add-switch", name="probe-learn", mode="learn")
            except RpcError:
                return False
            rpc.call("del-switch", name="probe-learn")
            return True

    def version(self) -> str:
        r = subprocess.run([str(sluiced_path(self.ctx.repo)), "--version"],
                           capture_output=True, text=True, timeout=10)
        return " ".join((r.stdout or r.stderr).split()) or "sluiced (version unknown)"

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc else []

    def pollers(self) -> list[Poller]:
        return [Poller("sluiced worker", self.ctx.switch_cpu)]

    def steering(self) -> str:
        poll = ("worker sleeps when idle (default --idle-sleep-us 50)" if self.idle_sleep
                else "worker busy-polls (--idle-sleep-us 0)")
        if self.fwd_mode == "vxlan":
            return ("sluiced vxlan: each pair's ends patched to the two ends of a VXLAN tunnel "
                    f"over a ring loopback (encapsulated and decapsulated once); {poll}")
        if self.fwd_mode == "patch":
            fast = (", vhost-user ports one copy between guests (fast, the default)"
                    if self.vhost_fast else ", vhost-user ports on DPDK's PMD (fast=0)")
            if self.mode.endswith(FAST_SUFFIX):
                fast += ", memif ports fast=1 (sluiced's own memif server)"
            return (f"sluiced patch: each pair of ports cross-connected (sluicectl patch)"
                    f"{fast}; {poll}")
        if self.daemon_mode == "flow":
            how = ("one rule actions=normal (the flow switch's learning bridge)"
                   if self.fwd_mode == "flow-normal" else
                   "explicit rules in_port=A,actions=output:B for each pair, both ways")
            acl = (f"; {self.acl_rules} ACL rules over {self.acl_masks} masks above them"
                   + (" (the chain's firewall, on the L3 VNF's output)" if self.topology
                      and self.topology.firewall is not None else "") if self.acl_rules else "")
            return f"sluiced flow: {how}{acl}; {poll}"
        fast = (", vhost-user ports fast (learned unicast copied once between guests)"
                if self.vhost_fast else ", vhost-user ports on DPDK's PMD (fast=0)")
        return (f"sluiced learn: all ports in one learning bridge (MAC learning, flooding)"
                f"{fast}; {poll}")

    def worker_cycles(self) -> tuple[float, int] | None:
        """Busy TSC cycles and packets received of all workers so far (`stats`)."""
        try:
            with RpcClient(str(self.socket), timeout=5) as rpc:
                workers = rpc.call("stats").get("workers", [])
        except (OSError, RpcError):
            return None
        return (float(sum(int(w["busy_cycles"]) for w in workers)),
                sum(int(w["packets"]) for w in workers))

    def cost_meter(self) -> Meter | None:
        # A worker counts the TSC cycles of each pass that received something (its receive
        # bursts, the forwarding function, the transmit bursts), not those of empty passes.
        return CumulativeMeter("sluiced stats: worker busy cycles / packets received",
                               self.worker_cycles)

    def port_counters(self) -> dict[str, dict[str, Any]] | None:
        """sluiced's per-port counters (`stats`): rx, tx, the input port's drops by reason
        (a frame the output ring refused counts as tx_full at the port it came in on)."""
        try:
            with RpcClient(str(self.socket), timeout=5) as rpc:
                sws = rpc.call("stats", switch=BRIDGE).get("switches", [])
        except (OSError, RpcError):
            return None
        if not sws:
            return None
        return {str(p["name"]): {"rx": int(p["rx_packets"]), "tx": int(p["tx_packets"]),
                                 "dropped": int(p["dropped"]),
                                 "rx_missed": int(p.get("rx_missed", 0)),
                                 "drops": {k: int(v) for k, v in p.get("drops", {}).items()}}
                for p in sws[0].get("ports", [])}

    def stats(self) -> dict[str, object]:
        """The daemon's counters for the bench switch."""
        with RpcClient(str(self.socket), timeout=10) as rpc:
            return dict(rpc.call("stats", switch=BRIDGE))

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc, timeout=15)
            self.proc = None
        procs.remove_hugepage_files(self.prefix)
        self.socket.unlink(missing_ok=True)
