"""One Faucet controls two sluiced "hosts" joined by VXLAN (issue 16, "Many hosts").

Each host is a network namespace running its own sluiced (its own socket and DPDK file
prefix) with a flow switch br0: two host namespaces on af_packet ports (OpenFlow ports 1
and 2) and a vxlan port (port 3) over an af_packet underlay on a veth pair between the two
hosts' namespaces. Faucet runs in a third namespace, the controllers' network, reached by
each host over its own management veth; its faucet.yaml has two datapaths (0xa and 0xb),
each with the two host ports and the vxlan port in one VLAN, no stacking: each Faucet
datapath learns the other host's machines behind its vxlan port. The proof: both pipelines
load with no OpenFlow error, the four machines ping each other across the tunnel, iperf3
runs across, Faucet learns all four on both datapaths, and its Prometheus metrics show both
datapaths up.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from of_helpers import AGENT, PYTHON, VENV_BIN, Proc, run, wait_connected
from test_vxlan import Net, addr, iperf, ping_until

from conftest import Daemon, assert_accounting, wait_for

FAUCET = shutil.which("faucet", path=str(VENV_BIN)) or shutil.which("faucet")
IPERF = shutil.which("iperf3")
pytestmark = pytest.mark.skipif(FAUCET is None or IPERF is None,
                                reason="faucet or iperf3 not installed (scripts/setup.sh)")

OF_PORT, PROM_PORT = 6653, 9302      # in the controllers' own namespace: nothing else there

# The same text is in docs/multihost.md and scripts/demo-multihost.sh --faucet.
FAUCET_YAML = """\
vlans:
  tenant:
    vid: 100
dps:
  host-a:
    dp_id: 0xa
    hardware: "Open vSwitch"
    interfaces:
      1: {native_vlan: tenant}
      2: {native_vlan: tenant}
      3: {native_vlan: tenant, description: "vxlan to host-b"}
  host-b:
    dp_id: 0xb
    hardware: "Open vSwitch"
    interfaces:
      1: {native_vlan: tenant}
      2: {native_vlan: tenant}
      3: {native_vlan: tenant, description: "vxlan to host-a"}
"""


class Host:
    """One 'machine': namespace NAME running sluiced with flow switch br0 (two machines of
    its own on p1, p2; the tunnel vx), its underlay end and its management link."""

    def __init__(self, net: Net, workdir: Path, name: str, n: int, ctl_ns: str) -> None:
        self.name, self.n = name, n
        self.ns = net.ns(name)
        self.vms = [net.ns(f"{name}{i}") for i in (1, 2)]
        self.ips = [f"192.168.94.{n * 10 + i}" for i in (1, 2)]
        for i, vm in enumerate(self.vms):
            net.veth(f"{net.tag}{name}{i + 1}", self.ns, "eth0", vm)
            addr(vm, "eth0", f"{self.ips[i]}/24", mtu=1450)
        # management: 10.201.N.2 here, 10.201.N.1 the controllers' end
        net.veth(f"{net.tag}m{name}", self.ns, f"{net.tag}c{name}", ctl_ns)
        addr(self.ns, f"{net.tag}m{name}", f"10.201.{n}.2/30")
        addr(ctl_ns, f"{net.tag}c{name}", f"10.201.{n}.1/30")
        self.controller = f"tcp:10.201.{n}.1:{OF_PORT}"
        self.tag = net.tag
        self.daemon = Daemon(workdir, f"fm{name}", ["--ofagent", str(AGENT)])
        self.daemon.args = ["ip", "netns", "exec", self.ns, *self.daemon.args]

    def start(self, local: str, remote: str, dpid: str) -> None:
        d = self.daemon.start()
        d.call("add-switch", name="under", mode="patch")
        d.call("add-port", switch="under", name="ul",
               spec=f"af_packet:iface={self.tag}u{self.name}")
        d.call("add-switch", name="br0", mode="flow")
        for i in (1, 2):
            d.call("add-port", switch="br0", name=f"p{i}",
                   spec=f"af_packet:iface={self.tag}{self.name}{i}")
        d.call("add-port", switch="br0", name="vx",
               spec=f"vxlan:underlay=ul,local_ip={local},remote_ip={remote},vni=100")
        d.call("set-datapath-id", switch="br0", datapath_id=dpid)
        d.call("set-controller", switch="br0", targets=[self.controller])

    def flows(self) -> list[dict[str, object]]:
        return list(self.daemon.call("dump-flows", switch="br0")["flows"])


def metrics(ctl_ns: str) -> dict[str, float]:
    """Faucet's Prometheus metrics (read in the controllers' namespace): 'name{labels}' ->
    value."""
    code = ("import urllib.request,sys;"
            f"sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:{PROM_PORT}/metrics',"
            "timeout=5).read().decode())")
    r = run("ip", "netns", "exec", ctl_ns, PYTHON, "-c", code, check=False)
    out: dict[str, float] = {}
    for line in r.stdout.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def dp_metric(m: dict[str, float], name: str, dp: str) -> float | None:
    for key, value in m.items():
        if key.startswith(name + "{") and f'dp_name="{dp}"' in key:
            return value
    return None


@pytest.fixture
def net() -> Iterator[Net]:
    n = Net()
    yield n
    n.delete()


def test_one_faucet_two_hosts(net: Net, workdir: Path) -> None:
    ctl = net.ns("ctl")
    a = Host(net, workdir, "a", 1, ctl)
    b = Host(net, workdir, "b", 2, ctl)
    net.veth(f"{net.tag}ua", a.ns, f"{net.tag}ub", b.ns)
    (workdir / "faucet.yaml").write_text(FAUCET_YAML)
    env = {"FAUCET_CONFIG": str(workdir / "faucet.yaml"),
           "FAUCET_LOG": str(workdir / "faucet.log"),
           "FAUCET_EXCEPTION_LOG": str(workdir / "faucet_exception.log"),
           "FAUCET_PROMETHEUS_ADDR": "127.0.0.1", "FAUCET_PROMETHEUS_PORT": str(PROM_PORT)}
    assert FAUCET is not None
    # `ip netns exec` execs env, which execs faucet: the PID is Faucet's
    faucet = Proc(["ip", "netns", "exec", ctl, "env", f"PATH={VENV_BIN}:/usr/bin:/bin",
                   *(f"{k}={v}" for k, v in env.items()), FAUCET,
                   "--ryu-ofp-tcp-listen-port", str(OF_PORT)], workdir / "faucet.out")
    try:
        wait_for(lambda: f":{OF_PORT}" in run("ip", "netns", "exec", ctl, "ss", "-ltn").stdout,
                 timeout=30)
        a.start("10.200.0.1", "10.200.0.2", "0xa")
        b.start("10.200.0.2", "10.200.0.1", "0xb")
        for h in (a, b):
            wait_connected(h.daemon, "br0")
        wait_for(lambda: all(dp_metric(metrics(ctl), "dp_status", dp) == 1.0
                             for dp in ("host-a", "host-b")), timeout=30)
        for h in (a, b):
            wait_for(lambda h=h: any("goto_table:1" in str(f["actions"]) for f in h.flows()),
                     timeout=20)

        # across the tunnel both ways, and locally on A; all four machines have spoken
        ping_until(a.vms[0], b.ips[0], timeout=30)
        ping_until(b.vms[1], a.ips[1])
        ping_until(a.vms[0], a.ips[1])
        ping_until(b.vms[0], a.ips[1])
        assert iperf(a.vms[0], b.vms[0], b.ips[0]) > 1e6
        assert iperf(b.vms[1], a.vms[1], a.ips[1]) > 1e6

        wait_for(lambda: all(dp_metric(metrics(ctl), "vlan_hosts_learned", dp) == 4.0
                             for dp in ("host-a", "host-b")), timeout=15)
        # Faucet learned B's machines behind A's vxlan port (and the other way round)
        for here, there in ((a, b), (b, a)):
            macs = [run("ip", "-n", vm, "-br", "link", "show", "eth0").stdout.split()[2]
                    for vm in there.vms]
            flows = here.flows()
            for mac in macs:
                assert any(f"dl_src={mac}" in str(f["match"]) and "in_port=vx" in
                           str(f["match"]) for f in flows), (mac, flows)
        for h in (a, b):
            status = h.daemon.call("get-controller", switch="br0")["status"]
            assert status["errors_sent"] == 0, status
            assert_accounting(h.daemon.port_stats("br0"))
            assert_accounting(h.daemon.port_stats("under"))
        log = (workdir / "faucet.log").read_text()
        assert "OFPErrorMsg" not in log, log
        m = metrics(ctl)
        for dp in ("host-a", "host-b"):
            assert dp_metric(m, "dp_status", dp) == 1.0, m
            assert (dp_metric(m, "of_dp_connections_total", dp) or 0) >= 1, m
    finally:
        rcs = {h.name: h.daemon.stop() for h in (a, b) if h.daemon.proc is not None}
        faucet.stop()
    assert all(rc == 0 for rc in rcs.values()), (rcs, a.daemon.log.read_text(),
                                                 b.daemon.log.read_text())
