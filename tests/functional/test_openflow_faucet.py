"""Faucet drives sluiced over OpenFlow 1.3 (issue 16, "Interoperability").

Faucet (PyPI `faucet`, run as a process with its own faucet.yaml in the test's directory)
controls a flow switch through sluice-ofagent: three hosts in namespaces on af_packet
ports, one VLAN, an ACL that blocks TCP port 22 on every port. Faucet's multi-table
pipeline must load without an OpenFlow error, the hosts ping each other, iperf3 moves
data, port 22 is blocked, a host moved to another port is learned there, and Faucet's
Prometheus metrics show the datapath up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from of_helpers import (
    VENV_BIN,
    NetHosts,
    Proc,
    add_ports,
    agent_daemon,
    free_tcp_port,
    run,
    wait_connected,
    wait_port,
)

from conftest import Daemon, wait_for

FAUCET = shutil.which("faucet", path=str(VENV_BIN)) or shutil.which("faucet")
IPERF = shutil.which("iperf3")
pytestmark = pytest.mark.skipif(FAUCET is None or IPERF is None,
                                reason="faucet or iperf3 not installed (scripts/setup.sh)")

FAUCET_YAML = """\
vlans:
  office:
    vid: 100
acls:
  block-ssh:
    - rule:
        dl_type: 0x800
        nw_proto: 6
        tcp_dst: 22
        actions:
          allow: 0
    - rule:
        actions:
          allow: 1
dps:
  sw1:
    dp_id: 0xa1
    hardware: "Open vSwitch"
    interfaces:
{interfaces}
"""


def faucet_yaml(n_ports: int) -> str:
    ports = "".join(f"      {i}:\n        native_vlan: office\n        acls_in: [block-ssh]\n"
                    for i in range(1, n_ports + 1))
    return FAUCET_YAML.format(interfaces=ports.rstrip("\n"))


@pytest.fixture
def daemon(workdir: Path) -> Iterator[Daemon]:
    """sluiced running the agent itself."""
    d = agent_daemon(workdir, "d", spawn=True).start()
    yield d
    assert d.stop() == 0, d.log.read_text()


@pytest.fixture
def hosts() -> Iterator[NetHosts]:
    h = NetHosts(3, net=95)
    spare = f"of{os.getpid() % 100000}v4"
    run("ip", "link", "add", spare, "type", "veth", "peer", "name", f"{spare}h")
    h.ifaces.append(spare)
    yield h
    h.delete()


def metric(port: int, name: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return None


def tcp_connects(hosts: NetHosts, i: int, j: int, port: int) -> bool:
    r = run(*hosts.exec(i, IPERF or "iperf3", "-c", hosts.addr[j], "-p", str(port), "-t", "1",
                        "--connect-timeout", "2000"), check=False, timeout=20)
    return r.returncode == 0


def move_diagnostics(daemon: Daemon, faucet: Proc, workdir: Path) -> str:
    """What a failed host move leaves to read: Faucet's log, the ports' counters and
    links, the rules with their counts, the agent's status."""
    ports = daemon.call("list-ports")
    flows = daemon.call("dump-flows", switch="br0")["flows"]
    status = daemon.call("get-controller", switch="br0")["status"]
    log = (workdir / "faucet.log").read_text(errors="replace")
    return "\n".join(["the moved host is not reached or not learned", f"ports: {ports}",
                      "flows:", *(str(f) for f in flows), f"agent: {status}",
                      "faucet.log:", log[-6000:], "faucet.out:", faucet.text()[-2000:],
                      "sluiced log:", daemon.log.read_text(errors="replace")[-3000:]])


def test_faucet_pipeline(daemon: Daemon, hosts: NetHosts, workdir: Path) -> None:
    add_ports(daemon, "br0", hosts)      # p1..p3 the hosts', p4 the spare for the move
    of_port, prom_port = free_tcp_port(), free_tcp_port()
    (workdir / "faucet.yaml").write_text(faucet_yaml(4))
    env = dict(os.environ, FAUCET_CONFIG=str(workdir / "faucet.yaml"),
               FAUCET_LOG=str(workdir / "faucet.log"),
               FAUCET_EXCEPTION_LOG=str(workdir / "faucet_exception.log"),
               FAUCET_PROMETHEUS_ADDR="127.0.0.1", FAUCET_PROMETHEUS_PORT=str(prom_port),
               PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    assert FAUCET is not None
    faucet = Proc([FAUCET, "--ryu-ofp-listen-host", "127.0.0.1",
                   "--ryu-ofp-tcp-listen-port", str(of_port)], workdir / "faucet.out",
                  env=env)
    servers: list[subprocess.Popen[bytes]] = []
    try:
        wait_port(of_port, timeout=30)
        daemon.call("set-datapath-id", switch="br0", datapath_id="0xa1")
        daemon.call("set-controller", switch="br0", targets=[f"tcp:127.0.0.1:{of_port}"])
        wait_connected(daemon, "br0")
        wait_for(lambda: metric(prom_port, "dp_status") == 1.0, timeout=30)
        wait_for(lambda: any("goto_table:1" in f["actions"] for f in
                             daemon.call("dump-flows", switch="br0")["flows"]), timeout=20)

        for i, j in ((0, 1), (1, 2), (2, 0)):
            assert hosts.ping(i, j, count=2), faucet.text() + daemon.log.read_text()
        wait_for(lambda: metric(prom_port, "vlan_hosts_learned") == 3.0, timeout=10)

        # iperf3 on 5201 works; the same server on port 22 is never reached
        for port in (5201, 22):
            servers.append(subprocess.Popen(hosts.exec(1, IPERF or "iperf3", "-s", "-p",
                                                       str(port)),
                                            stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        wait_for(lambda: all(f":{p}" in run(*hosts.exec(1, "ss", "-ltn")).stdout
                             for p in (5201, 22)))
        assert tcp_connects(hosts, 0, 1, 5201), daemon.log.read_text()
        assert not tcp_connects(hosts, 0, 1, 22)
        dropped = [f for f in daemon.call("dump-flows", switch="br0")["flows"]
                   if "tp_dst=22" in f["match"] and f["actions"] == "drop"]
        assert sum(f["packets"] for f in dropped) > 0, dropped

        # host 3 moves from port 3 to port 4, keeping its MAC and address
        ns3 = hosts.ns[2]
        mac = run("ip", "-n", ns3, "-br", "link", "show", "eth0").stdout.split()[2]
        run("ip", "-n", ns3, "link", "del", "eth0")
        moved = f"{hosts.ifaces[3]}h"
        run("ip", "link", "set", moved, "netns", ns3)
        run("ip", "-n", ns3, "link", "set", moved, "address", mac)
        run("ip", "-n", ns3, "addr", "add", f"{hosts.addr[2]}/24", "dev", moved)
        run("ip", "-n", ns3, "link", "set", moved, "up")
        run("ip", "link", "set", hosts.ifaces[3], "up")
        try:
            wait_for(lambda: hosts.ping(2, 0, count=1), timeout=30)
        except AssertionError as e:
            raise AssertionError(move_diagnostics(daemon, faucet, workdir)) from e
        # The ping can pass by flooding before Faucet's packet-in handling has put the
        # learned rule in: wait for the rule.
        try:
            wait_for(lambda: any(f"dl_src={mac}" in f["match"] and "in_port=p4" in f["match"]
                                 for f in daemon.call("dump-flows", switch="br0")["flows"]),
                     timeout=10)
        except AssertionError as e:
            raise AssertionError(move_diagnostics(daemon, faucet, workdir)) from e
        assert hosts.ping(0, 2, count=2)

        status = daemon.call("get-controller", switch="br0")["status"]
        assert status["errors_sent"] == 0, status
        log = (workdir / "faucet.log").read_text()
        assert "OFPErrorMsg" not in log, log
        assert metric(prom_port, "dp_status") == 1.0
        assert (metric(prom_port, "of_dp_connections_total") or 0) >= 1
    finally:
        for s in servers:
            s.terminate()
            s.wait(5)
        faucet.stop()
