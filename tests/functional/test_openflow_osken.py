"""An os-ken application drives sluiced over OpenFlow 1.3 (issue 16, "Interoperability").

osken-manager (os-ken 3.1.0, the version Faucet pins) runs a small learning switch
(openflow/osken_learning_switch.py): every packet misses to the controller, which floods
or sends it by packet-out and installs a rule per learned pair. Hosts in namespaces on
af_packet ports ping each other through it, and the rules the controller installed are
what dump-flows shows.
"""

from __future__ import annotations

import shutil
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
    wait_connected,
    wait_port,
)

from conftest import Daemon, assert_accounting, wait_for

OSKEN = shutil.which("osken-manager", path=str(VENV_BIN)) or shutil.which("osken-manager")
APP = Path(__file__).parent / "openflow" / "osken_learning_switch.py"
pytestmark = pytest.mark.skipif(OSKEN is None, reason="os-ken 3.1.0 not installed "
                                "(scripts/setup.sh installs it)")


@pytest.fixture
def daemon(workdir: Path) -> Iterator[Daemon]:
    """sluiced running the agent itself."""
    d = agent_daemon(workdir, "d", spawn=True).start()
    yield d
    assert d.stop() == 0, d.log.read_text()


@pytest.fixture
def hosts() -> Iterator[NetHosts]:
    h = NetHosts(3, net=94)
    yield h
    h.delete()


def test_osken_learning_switch(daemon: Daemon, hosts: NetHosts) -> None:
    add_ports(daemon, "br0", hosts)
    port = free_tcp_port()
    assert OSKEN is not None
    osken = Proc([OSKEN, "--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", str(port),
                  str(APP)], daemon.workdir / "osken.log")
    try:
        wait_port(port)
        daemon.call("set-controller", switch="br0", targets=[f"tcp:127.0.0.1:{port}"])
        daemon.call("set-datapath-id", switch="br0", datapath_id="0xa1")
        wait_connected(daemon, "br0")
        wait_for(lambda: any(f["priority"] == 0 and "CONTROLLER" in f["actions"].upper()
                             for f in daemon.call("dump-flows", switch="br0")["flows"]))
        assert hosts.ping(0, 1, count=3), osken.text() + daemon.log.read_text()
        assert hosts.ping(2, 0, count=3)
        flows = daemon.call("dump-flows", switch="br0")["flows"]
        learned = [f for f in flows if f["priority"] == 1]
        assert len(learned) >= 4, flows
        assert all("dl_dst=" in f["match"] and f["actions"].startswith("output:")
                   for f in learned), flows
        # later pings ride the installed rules, not the controller
        def misses() -> int:
            return sum(f["packets"] for f in daemon.call("dump-flows", switch="br0")["flows"]
                       if f["priority"] == 0)
        before = misses()
        assert hosts.ping(0, 1, count=3)
        assert misses() - before <= 2
        wait_for(lambda: daemon.call("get-controller", switch="br0")["status"]["packet_outs"]
                 >= 2)
        status = daemon.call("get-controller", switch="br0")["status"]
        assert status["errors_sent"] == 0 and status["packet_ins"] >= 2, status
        assert "switch 00000000000000a1" in osken.text()
        show = daemon.call("show")["switches"][0]
        assert show["openflow"]["status"]["connections"][0]["connected"]
        assert_accounting(daemon.port_stats("br0"))
    finally:
        osken.stop()
