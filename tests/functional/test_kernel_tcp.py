"""TCP across kernel-facing ports with the kernels' default offloads (issue 15).

Two namespaces, each with a veth whose other end stays in the root namespace as a port of a
sluiced learn switch. The namespace ends keep their default offloads (checksums left to
the device, TSO/GSO on), so the switch receives partial checksums and 64 KB super-frames.
iperf3 must move data, the receiver must count no checksum errors, and every port's
counters must hold rx = forwarded + dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from conftest import Daemon, assert_accounting, wait_for

IPERF = shutil.which("iperf3")
pytestmark = pytest.mark.skipif(IPERF is None, reason="iperf3 not installed "
                                "(scripts/setup.sh installs it)")


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=30)


class Hosts:
    """Namespaces ns0 and ns1 (10.91.0.1 and .2); the root-namespace end of each veth
    (or a tap moved in) is the switch's."""

    def __init__(self) -> None:
        tag = f"kt{os.getpid() % 100000}"
        self.ns = [f"{tag}-h0", f"{tag}-h1"]
        self.switch_side = [f"{tag}s0", f"{tag}s1"]
        self.addr = ["10.91.0.1", "10.91.0.2"]
        self.made_ns: list[str] = []
        self.made_links: list[str] = []
        for ns in self.ns:
            run("ip", "netns", "add", ns)
            self.made_ns.append(ns)
            run("ip", "-n", ns, "link", "set", "dev", "lo", "up")

    def veth(self, i: int) -> None:
        """A veth from namespace I (end 'eth0', default offloads) to the root namespace."""
        run("ip", "link", "add", self.switch_side[i], "type", "veth", "peer", "name", "eth0",
            "netns", self.ns[i])
        self.made_links.append(self.switch_side[i])
        run("ip", "link", "set", "dev", self.switch_side[i], "up")
        self.address(i, "eth0")

    def adopt(self, i: int, iface: str) -> None:
        """Moves IFACE (a tap the daemon made) into namespace I."""
        run("ip", "link", "set", "dev", iface, "netns", self.ns[i])
        self.address(i, iface)

    def address(self, i: int, iface: str) -> None:
        run("ip", "-n", self.ns[i], "addr", "add", f"{self.addr[i]}/24", "dev", iface)
        run("ip", "-n", self.ns[i], "link", "set", "dev", iface, "up")

    def counters(self, i: int) -> dict[str, int]:
        """The kernel's SNMP counters of namespace I (absolute)."""
        out = run("ip", "netns", "exec", self.ns[i], "nstat", "-a", "-z", "-s", "--json").stdout
        return json.loads(out)["kernel"]

    def delete(self) -> None:
        for link in self.made_links:
            run("ip", "link", "del", link, check=False)
        for ns in self.made_ns:
            run("ip", "netns", "del", ns, check=False)


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    h = Hosts()
    yield h
    h.delete()


def iperf(h: Hosts, seconds: int = 3) -> dict:
    """iperf3 from namespace 0 to namespace 1; both pinned to CPU 0 (the worker has 1)."""
    server = subprocess.Popen(["ip", "netns", "exec", h.ns[1], "taskset", "-c", "0", IPERF,
                               "-s", "-1"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):      # the server listens within a moment
            if ":5201" in run("ip", "netns", "exec", h.ns[1], "ss", "-ltn").stdout:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        r = subprocess.run(["ip", "netns", "exec", h.ns[0], "taskset", "-c", "0", IPERF, "-c",
                            h.addr[1], "-t", str(seconds), "-J"], capture_output=True,
                           text=True, timeout=seconds + 30)
    finally:
        if server.poll() is None:
            server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(5)
        if server.poll() is None:
            server.kill()
            server.wait()
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)["end"]


def csum_errors(c: dict[str, int]) -> int:
    return sum(v for k, v in c.items() if k.endswith("CsumErrors"))


def check_tcp(daemon: Daemon, h: Hosts) -> dict:
    out = subprocess.run(["ip", "netns", "exec", h.ns[0], "ping", "-c", "1", "-W", "2",
                          h.addr[1]], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stdout
    before = [h.counters(0), h.counters(1)]
    end = iperf(h)
    after = [h.counters(0), h.counters(1)]
    got = end["sum_received"]["bytes"]
    assert got > 10_000_000, end["sum_received"]         # 10 MB in 3 s at the very least
    for i in (0, 1):
        assert csum_errors(after[i]) == csum_errors(before[i]), (i, after[i])
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    return end


def test_tcp_between_namespaces_over_af_packet(daemon: Daemon, hosts: Hosts) -> None:
    """Default offloads on both namespace ends; the switch passes super-frames whole."""
    daemon.call("add-switch", name="br0", mode="learn")
    for i in (0, 1):
        hosts.veth(i)
        daemon.call("add-port", switch="br0", name=f"p{i}",
                    spec=f"af_packet:iface={hosts.switch_side[i]}")
    for i in (0, 1):
        offloads = run("ip", "netns", "exec", hosts.ns[i], "ethtool", "-k", "eth0").stdout
        assert "tcp-segmentation-offload: on" in offloads
        assert "tx-checksumming: on" in offloads
    check_tcp(daemon, hosts)
    stats = daemon.port_stats("br0")
    # Super-frames crossed whole: more bytes than 1514-byte frames could carry.
    assert stats["p0"]["rx_bytes"] > 2000 * stats["p0"]["rx_packets"] / 2, stats["p0"]


def test_tcp_from_af_packet_to_tap(daemon: Daemon, hosts: Hosts) -> None:
    """A tap port cannot take partial checksums or super-frames: the worker completes the
    checksums and cuts the frames into segments, in both directions."""
    daemon.call("add-switch", name="br0", mode="learn")
    hosts.veth(0)
    daemon.call("add-port", switch="br0", name="p0",
                spec=f"af_packet:iface={hosts.switch_side[0]}")
    tap = hosts.switch_side[1]
    daemon.call("add-port", switch="br0", name="p1", spec=f"tap:name={tap}")
    hosts.adopt(1, tap)
    check_tcp(daemon, hosts)
    stats = daemon.port_stats("br0")
    # Segments leave the tap port as more frames than the af_packet port received.
    assert stats["p1"]["tx_packets"] > stats["p0"]["forwarded"], stats


def test_tcp_between_namespaces_over_af_xdp(daemon: Daemon, hosts: Hosts) -> None:
    """With an XDP program on the switch's end the kernel sends no super-frames to it, but
    still leaves the checksums of the namespace's TCP to the device: sluiced completes
    exactly those (the checksum field holds the pseudo-header sum), and leaves any other
    checksum as it came."""
    daemon.call("add-switch", name="br0", mode="learn")
    for i in (0, 1):
        hosts.veth(i)
        daemon.call("add-port", switch="br0", name=f"p{i}",
                    spec=f"af_xdp:iface={hosts.switch_side[i]}")
    offloads = run("ip", "netns", "exec", hosts.ns[0], "ethtool", "-k", "eth0").stdout
    assert "tx-checksumming: on" in offloads
    check_tcp(daemon, hosts)


def test_af_packet_port_sends_again_after_its_link_comes_up(daemon: Daemon,
                                                             hosts: Hosts) -> None:
    """Frames patched to an af_packet port whose link is down fill its transmit ring (the
    kernel refuses to send them); once the link comes up, the port sends again, and what
    was lost while it was down is counted."""
    daemon.call("add-switch", name="br0")
    for i in (0, 1):
        hosts.veth(i)
    run("ip", "link", "set", "dev", hosts.switch_side[1], "down")
    for i in (0, 1):
        daemon.call("add-port", switch="br0", name=f"p{i}",
                    spec=f"af_packet:iface={hosts.switch_side[i]}")
    daemon.call("patch", switch="br0", port1="p0", port2="p1")
    # 300 broadcast pings, more than the 64 frames of the down port's transmit ring
    run("ip", "netns", "exec", hosts.ns[0], "ping", "-b", "-q", "-c", "300", "-i", "0.002",
        "-W", "0.01", "10.91.0.255", check=False)
    wait_for(lambda: daemon.port_stats("br0")["p0"]["rx_packets"] >= 300, timeout=10)
    stats = daemon.port_stats("br0")
    assert stats["p0"]["drops"]["link_down"] > 0, stats["p0"]
    assert_accounting(stats)
    run("ip", "link", "set", "dev", hosts.switch_side[1], "up")
    ping = subprocess.run(["ip", "netns", "exec", hosts.ns[0], "ping", "-c", "3", "-i", "0.2",
                           "-w", "10", hosts.addr[1]], capture_output=True, text=True,
                          timeout=20)
    assert ping.returncode == 0, (ping.stdout, daemon.port_stats("br0"))
    assert_accounting(daemon.port_stats("br0"))
