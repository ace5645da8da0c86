"""Port kinds beyond tap and vhost-user server, each with a real peer: vhost-user client
mode with testpmd as the server (and a restart of it), memif with testpmd, af_packet and
af_xdp on veth pairs whose far ends scapy drives from a network namespace."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import (
    TESTPMD,
    Daemon,
    assert_accounting,
    remove_hugepage_files,
    stop_process,
    wait_for,
)


def link(d: Daemon, port: str) -> str:
    return {p["name"]: p["link"] for p in d.call("list-ports")}[port]


class PmdApp:
    """A dpdk-testpmd on CPU 0 with one vdev, ended by PID."""

    def __init__(self, workdir: Path, name: str, vdev: str, mode: str) -> None:
        self.prefix = f"sltk{os.getpid()}{name}"
        self.log = workdir / f"testpmd-{name}.log"
        self.cmd = [TESTPMD, "--lcores", "0@0,1@0", "--no-pci", "--file-prefix", self.prefix,
                    "--single-file-segments", "--in-memory", "-m", "256", "--vdev", vdev,
                    "--log-level=*:warning", "--", f"--forward-mode={mode}",
                    "--stats-period", "1", "--nb-cores", "1", "--txd", "512", "--rxd", "512"]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PmdApp:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, sig=2)
        remove_hugepage_files(self.prefix)


@pytest.fixture
def testpmds() -> Iterator[list[PmdApp]]:
    started: list[PmdApp] = []
    yield started
    for t in started:
        t.stop()


def test_vhost_client_survives_vm_restart(daemon: Daemon, workdir: Path,
                                          testpmds: list[PmdApp]) -> None:
    """sluice as vhost-user client of a 'VM' (testpmd, virtio-user server=1) that restarts."""
    sock = workdir / "vm.sock"
    vm = PmdApp(workdir, "vm", f"net_virtio_user0,path={sock},server=1", "txonly")
    testpmds.append(vm)
    vm.start()
    wait_for(sock.exists)
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="vm", spec=f"vhost-user:client,path={sock}")
    daemon.call("add-port", switch="br0", name="sink", spec="null")
    daemon.call("patch", switch="br0", port1="vm", port2="sink")
    wait_for(lambda: daemon.port_stats("br0")["vm"]["rx_packets"] > 10_000)
    vm.stop()
    wait_for(lambda: link(daemon, "vm") == "down")
    before = daemon.port_stats("br0")["vm"]["rx_packets"]
    vm.start()                                 # the VM comes back: sluice reconnects
    wait_for(lambda: daemon.port_stats("br0")["vm"]["rx_packets"] > before + 10_000, 30)
    assert link(daemon, "vm") == "up"
    vm.stop()
    wait_for(lambda: link(daemon, "vm") == "down")
    time.sleep(0.2)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["sink"]["tx_packets"] == stats["vm"]["forwarded"]


def test_memif_with_testpmd(daemon: Daemon, workdir: Path, testpmds: list[PmdApp]) -> None:
    sock = workdir / "memif.sock"
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="m", spec=f"memif:role=server,socket={sock}")
    daemon.call("add-port", switch="br0", name="sink", spec="null")
    daemon.call("patch", switch="br0", port1="m", port2="sink")
    app = PmdApp(workdir, "memif",
                  f"net_memif0,role=client,socket={sock},socket-abstract=no", "txonly")
    testpmds.append(app)
    app.start()
    wait_for(lambda: daemon.port_stats("br0")["m"]["rx_packets"] > 10_000)
    assert link(daemon, "m") == "up"
    app.stop()
    time.sleep(0.5)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["sink"]["tx_packets"] == stats["m"]["forwarded"] > 10_000


class Netns:
    """A network namespace holding the far ends of veth pairs."""

    def __init__(self, name: str) -> None:
        self.name = name
        subprocess.run(["ip", "netns", "add", name], check=True)

    def veth(self, inside: str, outside: str) -> None:
        subprocess.run(["ip", "link", "add", outside, "type", "veth", "peer", "name", inside,
                        "netns", self.name], check=True)
        for cmd in (["ip", "link", "set", outside, "up"],
                    ["sysctl", "-qw", f"net.ipv6.conf.{outside}.disable_ipv6=1"],
                    ["ip", "netns", "exec", self.name, "sysctl", "-qw",
                     f"net.ipv6.conf.{inside}.disable_ipv6=1"],
                    ["ip", "netns", "exec", self.name, "ip", "link", "set", inside, "up"]):
            subprocess.run(cmd, check=True)

    def python(self, code: str, timeout: float = 30) -> str:
        py = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python")
        out = subprocess.run(["ip", "netns", "exec", self.name, py, "-c", code],
                             capture_output=True, text=True, timeout=timeout, check=True)
        return out.stdout

    def delete(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], check=False)


@pytest.fixture
def netns() -> Iterator[Netns]:
    ns = Netns(f"slt{os.getpid()}")
    yield ns
    ns.delete()


SEND_AND_SNIFF = """
import time
from scapy.all import AsyncSniffer, Ether, IP, UDP, Raw, sendp
frames = [Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b") / IP(src="10.8.0.1",
          dst="10.8.0.2") / UDP(sport=2000 + i, dport=9) / Raw(b"sluice-kinds%04d" % i)
          for i in range(40)]
s = AsyncSniffer(iface="{rx}", lfilter=lambda p: b"sluice-kinds" in bytes(p))
s.start()
time.sleep(0.5)
sendp(frames, iface="{tx}", verbose=False)
time.sleep(1.5)
got = s.stop()
print(sum(bytes(a) == bytes(b) for a, b in zip(got, frames)), len(got))
"""


@pytest.mark.parametrize("kind", ["af_packet", "af_xdp"])
def test_veth_ports_with_scapy_in_netns(daemon: Daemon, netns: Netns, kind: str) -> None:
    n = os.getpid() % 1000
    out_a, out_b = f"sla{n}{kind[3]}", f"slb{n}{kind[3]}"
    netns.veth("in0", out_a)
    netns.veth("in1", out_b)
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="a", spec=f"{kind}:iface={out_a}")
    daemon.call("add-port", switch="br0", name="b", spec=f"{kind}:iface={out_b}")
    daemon.call("patch", switch="br0", port1="a", port2="b")
    same, got = netns.python(SEND_AND_SNIFF.format(tx="in0", rx="in1")).split()
    assert (int(same), int(got)) == (40, 40)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["a"]["forwarded"] >= 40 and stats["b"]["tx_packets"] >= 40
    for p in ("a", "b"):
        daemon.call("del-port", switch="br0", name=p)
    for iface in (out_a, out_b):
        subprocess.run(["ip", "link", "del", iface], check=False)


def test_frame_bytes_unchanged_through_veth(daemon: Daemon, netns: Netns) -> None:
    """Odd sizes from 60 to 1514 bytes cross an af_packet patch unchanged."""
    n = os.getpid() % 1000
    netns.veth("in0", f"slc{n}")
    netns.veth("in1", f"sld{n}")
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="a", spec=f"af_packet:iface=slc{n}")
    daemon.call("add-port", switch="br0", name="b", spec=f"af_packet:iface=sld{n}")
    daemon.call("patch", switch="br0", port1="a", port2="b")
    code = SEND_AND_SNIFF.replace(
        'Raw(b"sluice-kinds%04d" % i)',
        'Raw(b"sluice-kinds%04d" % i + bytes(range(256)) * ((i * 37) % 6))').format(
        tx="in0", rx="in1")
    same, got = netns.python(code).split()
    assert (int(same), int(got)) == (40, 40)
    for iface in (f"slc{n}", f"sld{n}"):
        subprocess.run(["ip", "link", "del", iface], check=False)
