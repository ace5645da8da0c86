"""ovs-dpdk: Open vSwitch's DPDK build with a private ovsdb-server and ovs-vswitchd.

Everything lives under the adapter's work directory (database, sockets, logs, the bridge's
OpenFlow socket); no system service is touched. The netdev bridge has dpdkvhostuserclient
ports for vhost links (the generator's virtio-user is then the server), and DPDK vdev ports
(net_memif, net_af_xdp or net_af_packet) for memif and veth links. Mode `normal` leaves the
bridge's NORMAL action (MAC learning, flooding); mode `flows` replaces it with explicit
in_port->output rules for the topology's pairs. The PMD thread runs on the switch CPU
(pmd-cpu-mask); the main and handler threads on the generator's CPU, where they sleep.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from sluice.bench import procs
from sluice.bench.arrange import Poller
from sluice.bench.switches.base import Context, Link, Switch, Topology

VSWITCHD = Path("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk")
SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
BRIDGE = "br0"


class OvsDpdk(Switch):
    """OVS-DPDK 3.x, netdev datapath, NORMAL or in_port->output flows."""

    name = "ovs-dpdk"
    modes = ("normal", "flows")
    vhost_server = False

    def __init__(self, ctx: Context, mode: str) -> None:
        super().__init__(ctx, mode)
        self.dir = ctx.work / "ovs"
        self.prefix = f"{ctx.tag}ov"
        self.db: subprocess.Popen[bytes] | None = None
        self.vswitchd: subprocess.Popen[bytes] | None = None
        self.own_netns: str | None = None

    @classmethod
    def available(cls, repo: Path) -> str | None:
        missing = [str(p) for p in (VSWITCHD, SCHEMA) if not p.exists()]
        missing += [t for t in ("ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl")
                    if shutil.which(t) is None]
        if missing:
            return ("OVS-DPDK is not installed (missing " + ", ".join(missing)
                    + "): run scripts/setup.sh --peers (Debian openvswitch-switch-dpdk)")
        return None

    def unsupported(self, scenario: str, phy: str) -> str | None:
        if self.mode == "normal" and scenario.startswith("loopback"):
            return ("loopback with NORMAL needs VNFs that rewrite MACs to next hops: not yet "
                    "(mode flows steers the chain)")
        if phy == "memif" and scenario != "v2v":
            # Seen here: frames entered OVS's net_memif port and none left the other one.
            # Not yet understood; a guess is that OVS transmits on a queue (one per thread)
            # that sluice-gen's one-queue memif client never connected.
            return ("OVS-DPDK over net_memif forwarded no frames in our runs (not yet "
                    "understood); use --phy veth for OVS in p2p")
        return super().unsupported(scenario, phy)

    def _env(self) -> dict[str, str]:
        d = str(self.dir)
        return {**os.environ, "OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d,
                "OVS_SYSCONFDIR": d, "OVS_PKGDATADIR": "/usr/share/openvswitch"}

    def vsctl(self, *args: str) -> str:
        """ovs-vsctl against the private database."""
        r = subprocess.run(["ovs-vsctl", f"--db=unix:{self.dir}/db.sock", "--timeout=30",
                            *args], capture_output=True, text=True, env=self._env(), timeout=40)
        if r.returncode != 0:
            raise RuntimeError(f"ovs-vsctl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout.strip()

    def ofctl(self, *args: str) -> None:
        """ovs-ofctl against the private bridge's OpenFlow socket."""
        r = subprocess.run(["ovs-ofctl", args[0], f"unix:{self.dir}/{BRIDGE}.mgmt", *args[1:]],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"ovs-ofctl {' '.join(args)}: {r.stderr.strip()}")

    def _start_db(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ovsdb-tool", "create", str(self.dir / "conf.db"), str(SCHEMA)],
                       check=True, capture_output=True)
        self.db = procs.start(
            ["taskset", "-c", str(self.ctx.ctl_cpu), "ovsdb-server", str(self.dir / "conf.db"),
             f"--remote=punix:{self.dir}/db.sock", f"--unixctl={self.dir}/ovsdb.ctl",
             "--no-chdir", f"--log-file={self.dir}/ovsdb.log"], self.dir / "ovsdb.out",
            self._env())
        procs.wait_until((self.dir / "db.sock").exists, self.db, "ovsdb-server")
        cpu_mask = hex(1 << self.ctx.switch_cpu)
        self.vsctl("--no-wait", "init")
        self.vsctl("--no-wait", "set", "Open_vSwitch", ".",
                   "other_config:dpdk-init=true",
                   f"other_config:pmd-cpu-mask={cpu_mask}",
                   "other_config:dpdk-socket-mem=1024",
                   "other_config:dpdk-extra=--file-prefix=" + self.prefix
                   + " --single-file-segments --no-pci --log-level=*:warning")

    def _own_netns(self) -> str:
        """A namespace of our own for vswitchd's taps (its datapath's ovs-netdev, the
        bridge's internal port), so that they never appear beside the host's devices."""
        name = f"{self.ctx.tag}-ovs"
        subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
        self.own_netns = name
        return name

    def _start_vswitchd(self, netns: str | None) -> None:
        log = self.dir / "vswitchd.log"
        netns = netns or self._own_netns()
        cmd = ["taskset", "-c", str(self.ctx.ctl_cpu), str(VSWITCHD),
               f"unix:{self.dir}/db.sock", f"--unixctl={self.dir}/vswitchd.ctl", "--no-chdir",
               f"--log-file={log}", "-vconsole:off", "-vfile:info"]
        cmd = ["ip", "netns", "exec", netns, *cmd]
        self.vswitchd = procs.start(cmd, self.dir / "vswitchd.out", self._env())
        procs.wait_until((self.dir / "vswitchd.ctl").exists, self.vswitchd, "ovs-vswitchd",
                         self.dir / "vswitchd.out", timeout=60)

    def _port_args(self, i: int, link: Link, driver: str) -> list[str]:
        if link.kind == "vhost":
            return ["type=dpdkvhostuserclient", f"options:vhost-server-path={link.path}"]
        if link.kind == "memif":
            args = f"net_memif{i},role=server,socket={link.path},socket-abstract=no"
        else:
            args = f"net_{driver}{i},iface={link.iface}"
        return ["type=dpdk", f"options:dpdk-devargs={args}"]

    def _add_ports(self, topo: Topology) -> str:
        driver = topo.veth_driver
        for i, link in enumerate(topo.links):
            try:
                self.vsctl("add-port", BRIDGE, link.name, "--", "set", "Interface", link.name,
                           *self._port_args(i, link, driver), f"ofport_request={i + 1}")
                self._wait_port(link.name)
            except RuntimeError:
                if link.kind != "veth" or driver == "af_packet":
                    raise
                self.vsctl("--if-exists", "del-port", BRIDGE, link.name)
                driver = "af_packet"
                self.vsctl("add-port", BRIDGE, link.name, "--", "set", "Interface", link.name,
                           *self._port_args(i, link, driver), f"ofport_request={i + 1}")
                self._wait_port(link.name)
        return driver

    def _wait_port(self, name: str) -> None:
        """RuntimeError when OVS reports an error for the interface NAME."""
        for _ in range(20):
            err = self.vsctl("--if-exists", "get", "Interface", name, "error")
            if err not in ("", "[]"):
                raise RuntimeError(f"ovs port {name}: {err}")
            ofport = self.vsctl("get", "Interface", name, "ofport")
            if ofport not in ("[]", "-1"):
                return
            time.sleep(0.2)

    def _flows(self, topo: Topology) -> None:
        self.ofctl("del-flows")
        for a, b in topo.pairs:
            self.ofctl("add-flow", f"in_port={a + 1},actions=output:{b + 1}")
            self.ofctl("add-flow", f"in_port={b + 1},actions=output:{a + 1}")

    def start(self, topo: Topology) -> None:
        self._start_db()
        self._start_vswitchd(topo.netns)
        self.vsctl("add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev")
        driver = self._add_ports(topo)
        if self.mode == "flows":
            self._flows(topo)
        self.topology = Topology(topo.links, topo.pairs, topo.netns, driver)

    def version(self) -> str:
        r = subprocess.run([str(VSWITCHD), "--version"], capture_output=True, text=True,
                           timeout=10)
        return " ".join(r.stdout.split()) or "ovs-vswitchd-dpdk (version unknown)"

    def pids(self) -> list[int]:
        return [self.vswitchd.pid] if self.vswitchd else []

    def pollers(self) -> list[Poller]:
        return [Poller("ovs-vswitchd pmd thread", self.ctx.switch_cpu)]

    def steering(self) -> str:
        if self.mode == "normal":
            return ("OVS-DPDK NORMAL action: MAC learning, flooding of unknown destinations "
                    "(one-way traffic never teaches it the sink's MAC: every frame floods)")
        return "OVS-DPDK explicit rules in_port=A,actions=output:B for each pair, both ways"

    def stop(self) -> None:
        if self.vswitchd is not None:
            if self.vswitchd.poll() is None:
                self.vswitchd.send_signal(signal.SIGCONT)
            subprocess.run(["ovs-appctl", "-T", "10", "-t", str(self.dir / "vswitchd.ctl"), "exit"],
                           capture_output=True, timeout=20, check=False)
            procs.stop(self.vswitchd, timeout=20)
            self.vswitchd = None
        if self.db is not None:
            procs.stop(self.db, timeout=10)
            self.db = None
        procs.remove_hugepage_files(self.prefix)
        if self.own_netns is not None:
            subprocess.run(["ip", "netns", "del", self.own_netns], capture_output=True,
                           timeout=20, check=False)
            self.own_netns = None
