"""Helpers of the flow-mode tests (test_flow*.py): a flow switch of tap ports whose kernel
sides are watched by raw sockets, frames built by scapy and sent in, and what came out
where, parsed back by scapy; checksums recomputed; pcap files written and read fast."""

from __future__ import annotations

import errno
import json
import os
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from test_learn import ETH_P_ALL, MARK, PACKET_AUXDATA, SOL_PACKET, Taps, with_tag

from conftest import Daemon, assert_accounting, wait_for

__all__ = ["MARK", "FlowTaps", "Subscriber", "numbered", "read_pcap", "rebuilt", "write_pcap"]


class FlowTaps(Taps):
    """Taps of a flow switch, their kernel names under a prefix of their own (so a test's
    switch and a module's shared one never meet), with a faster way to see where a frame
    went than a fixed settle time."""

    def __init__(self, daemon: Daemon, switch: str, count: int, prefix: str = "slf",
                 **switch_args: Any) -> None:
        self.daemon, self.switch = daemon, switch
        tag = os.getpid() % 10000
        self.ifaces = [f"{prefix}{tag}p{i}" for i in range(count)]
        self.ports = [f"p{i}" for i in range(count)]
        daemon.call("add-switch", name=switch, mode=switch_args.pop("mode", "flow"),
                    **switch_args)
        self.socks: dict[str, socket.socket] = {}
        for port, iface in zip(self.ports, self.ifaces, strict=True):
            daemon.call("add-port", switch=switch, name=port, spec=f"tap:name={iface}")
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{iface}.disable_ipv6=1"],
                           check=False)
            subprocess.run(["ip", "link", "set", iface, "up"], check=True)
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s.bind((iface, 0))
            s.setblocking(False)
            self.socks[port] = s
        wait_for(lambda: all(p["link"] == "up" for p in self.show()["ports"]), 10)
        # The tap driver sets each interface up before IPv6 can be turned off on it, so the
        # kernel may have sent a neighbour solicitation or an MLD report already: counted
        # before the test begins, and forgotten with them.
        time.sleep(0.1)
        self.received()
        daemon.call("clear-stats", switch=switch)

    def received(self, settle: float = 0.0) -> dict[str, list[bytes]]:
        """As Taps.received, but a port whose kernel side is down (fast-failover tests take
        links down) has simply received nothing."""
        time.sleep(settle)
        out: dict[str, list[bytes]] = {}
        for port, s in self.socks.items():
            got = []
            while True:
                try:
                    data, ancillary, _, addr = s.recvmsg(65536, 1024)
                except BlockingIOError:
                    break
                except OSError as e:
                    if e.errno != errno.ENETDOWN:
                        raise
                    break
                if addr[2] != socket.PACKET_OUTGOING and MARK in data:
                    got.append(with_tag(data, ancillary))
            out[port] = got
        return out

    def show(self) -> dict[str, Any]:
        return next(s for s in self.daemon.call("show")["switches"] if s["name"] == self.switch)

    def port_stats(self) -> dict[str, dict[str, Any]]:
        return {p["name"]: p for p in self.stats()["ports"]}

    def check_accounting(self) -> dict[str, dict[str, Any]]:
        """rx = forwarded + dropped on every port, the reasons adding up; the switch's
        totals are the ports' sums."""
        st = self.stats()
        ports = {p["name"]: p for p in st["ports"]}
        assert_accounting(ports)
        for key in ("rx_packets", "forwarded", "dropped"):
            assert st[key] == sum(p[key] for p in ports.values()), (key, st)
        for reason, n in st["drops"].items():
            assert n == sum(p["drops"][reason] for p in ports.values()), (reason, st)
        return ports

    def flows(self, *lines: str) -> None:
        """The switch's rules become LINES (replace-flows)."""
        self.daemon.call("replace-flows", switch=self.switch, flows=list(lines))

    def out(self, port: str, frame: bytes | Ether, settle: float = 0.05) -> dict[str, list[Ether]]:
        """Sends FRAME into PORT, waits until the switch handled it, and returns the frames
        each port sent (parsed; ports that sent none are left out)."""
        self.send_and_wait(port, frame)
        got = self.received(settle)
        return {p: [Ether(f) for f in fs] for p, fs in got.items() if fs}

    def one(self, port: str, frame: bytes | Ether, to: str) -> Ether:
        """Sends FRAME into PORT and returns the one frame that left, by port TO only."""
        got = self.out(port, frame)
        assert set(got) == {to} and len(got[to]) == 1, got
        return got[to][0]

    def dropped_as(self, port: str, frame: bytes | Ether, reason: str) -> None:
        """FRAME sent into PORT leaves by no port and counts as dropped for REASON."""
        before = self.port_stats()[port]["drops"][reason]
        got = self.out(port, frame)
        assert got == {}, got
        after = self.port_stats()[port]["drops"][reason]
        assert after == before + 1, (reason, before, after)


def rebuilt(f: Ether) -> Ether:
    """F with every checksum (IPv4, TCP, UDP, ICMP, ICMPv6, SCTP) computed afresh by scapy:
    a frame whose checksums are right equals it byte for byte."""
    g = f.copy()
    layer = g
    while layer is not None and not isinstance(layer, bytes):
        for field in ("chksum", "cksum"):
            if field in layer.fields and not isinstance(layer, IPv6):
                del layer.fields[field]
        layer = layer.payload if layer.payload else None
    return Ether(bytes(g))


PCAP_HEADER = struct.Struct("<IHHiIII")
PCAP_RECORD = struct.Struct("<IIII")


def write_pcap(path: Path, frames: list[bytes]) -> None:
    """FRAMES as a pcap file (Ethernet), fast: scapy's writer takes seconds for thousands."""
    with open(path, "wb") as f:
        f.write(PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, b in enumerate(frames):
            f.write(PCAP_RECORD.pack(i // 1_000_000, i % 1_000_000, len(b), len(b)))
            f.write(b)


def read_pcap(path: Path) -> list[bytes]:
    """The frames of a pcap file (microsecond or nanosecond timestamps, little-endian)."""
    data = path.read_bytes()
    off, out = PCAP_HEADER.size, []
    while off + PCAP_RECORD.size <= len(data):
        _, _, incl, _ = PCAP_RECORD.unpack_from(data, off)
        off += PCAP_RECORD.size
        out.append(data[off:off + incl])
        off += incl
    return out


def numbered(template: bytes, n: int) -> list[bytes]:
    """N copies of TEMPLATE (a frame ending in six digits) numbered 0..N-1 in those digits:
    the frames differ only in their last bytes, as a flow's do."""
    return [template[:-6] + b"%06d" % i for i in range(n)]


class Subscriber:
    """A `subscribe` connection to a switch's event stream (ctl_events.h), read as a
    controller's agent reads it: notifications one JSON line each."""

    def __init__(self, path: Path, switch: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.buf = b""
        req = {"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {"switch": switch}}
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        while True:
            msg = self.next_message(5.0)
            if msg is None:
                raise TimeoutError("no answer to subscribe")
            if msg.get("id") == 1:
                break

    def next_message(self, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except TimeoutError:
                return None
            if not chunk:
                raise ConnectionError("sluiced closed the subscription")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return dict(json.loads(line))

    def next_packet_in(self, timeout: float) -> bytes | None:
        """The next packet-in's frame, or None after TIMEOUT."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.next_message(max(0.0, deadline - time.monotonic()))
            if msg is None:
                return None
            if msg.get("method") == "packet-in":
                return bytes.fromhex(msg["params"]["data"])

    def close(self) -> None:
        self.sock.close()
