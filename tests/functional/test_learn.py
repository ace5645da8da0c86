"""Learn mode: the learning bridge, driven with frames built by scapy on tap ports.

Each test makes a learn switch with tap ports and watches every tap at once through raw
packet sockets, so a test sees exactly which ports a frame left by (and which it did not).
"""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from conftest import (
    Daemon,
    RpcError,
    assert_accounting,
    remove_hugepage_files,
    stop_process,
    wait_for,
)

MARK = b"sluice-learn"
ETH_P_ALL = 3
SOL_PACKET, PACKET_AUXDATA, TP_STATUS_VLAN_VALID = 263, 8, 1 << 4
AUXDATA = struct.Struct("=IIIHHHH")   # struct tpacket_auxdata


def with_tag(data: bytes, ancillary: list[tuple[int, int, bytes]]) -> bytes:
    """DATA with the 802.1Q tag the kernel took out on receive (it hands it over in
    PACKET_AUXDATA, not in the frame) put back where it was."""
    for level, kind, blob in ancillary:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(blob) >= AUXDATA.size:
            status, _, _, _, _, tci, tpid = AUXDATA.unpack_from(blob)
            if status & TP_STATUS_VLAN_VALID:
                return data[:12] + struct.pack("!HH", tpid or 0x8100, tci) + data[12:]
    return data


class Taps:
    """Tap ports of one switch (learn unless mode= says otherwise), each with a raw socket
    on its kernel side."""

    def __init__(self, daemon: Daemon, switch: str, count: int, **switch_args: Any) -> None:
        self.daemon, self.switch = daemon, switch
        tag = os.getpid() % 10000
        self.ifaces = [f"sll{tag}p{i}" for i in range(count)]
        self.ports = [f"p{i}" for i in range(count)]
        mode = switch_args.pop("mode", "learn")
        daemon.call("add-switch", name=switch, mode=mode, **switch_args)
        self.socks: dict[str, socket.socket] = {}
        for port, iface in zip(self.ports, self.ifaces, strict=True):
            daemon.call("add-port", switch=switch, name=port, spec=f"tap:name={iface}")
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{iface}.disable_ipv6=1"],
                           check=False)
            subprocess.run(["ip", "link", "set", iface, "up"], check=True)
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            s.bind((iface, 0))
            s.setblocking(False)
            self.socks[port] = s
        time.sleep(0.2)
        self.received()

    def close(self) -> None:
        for s in self.socks.values():
            s.close()

    def send(self, port: str, frame: bytes | Ether) -> None:
        self.socks[port].send(bytes(frame))

    def received(self, settle: float = 0.0) -> dict[str, list[bytes]]:
        """The marked frames each port's kernel side got from the switch since last asked."""
        time.sleep(settle)
        out: dict[str, list[bytes]] = {}
        for port, s in self.socks.items():
            got = []
            while True:
                try:
                    data, ancillary, _, addr = s.recvmsg(65536, 1024)
                except BlockingIOError:
                    break
                if addr[2] != socket.PACKET_OUTGOING and MARK in data:
                    got.append(with_tag(data, ancillary))
            out[port] = got
        return out

    def fdb(self) -> dict[tuple[str, int], dict[str, Any]]:
        entries = self.daemon.call("fdb-show", switch=self.switch)["entries"]
        return {(e["mac"].lower(), e["vlan"]): e for e in entries}

    def learned(self, mac: str, port: str, vlan: int = 0) -> bool:
        return self.fdb().get((mac, vlan), {}).get("port") == port

    def stats(self) -> dict[str, Any]:
        return self.daemon.call("stats", switch=self.switch)["switches"][0]

    def rx_packets(self, port: str) -> int:
        return int({p["name"]: p for p in self.stats()["ports"]}[port]["rx_packets"])

    def send_and_wait(self, port: str, frame: bytes | Ether) -> None:
        """Sends FRAME into PORT and waits until the switch has taken it in and handled it
        (its worker sends in the same pass), so what it sent is on its way to the taps."""
        before = self.rx_packets(port)
        self.send(port, frame)
        wait_for(lambda: self.rx_packets(port) > before, 10)

    def where(self, port: str, frame: Ether, settle: float = 0.2) -> set[str]:
        """Sends FRAME into PORT and returns the ports it left by (each exactly once)."""
        self.send_and_wait(port, frame)
        got = self.received(settle)
        for p, frames in got.items():
            assert len(frames) <= 1, (p, frames)
        return {p for p, frames in got.items() if frames}


def frame(src: str, dst: str, n: int = 0, vlan: int | None = None) -> Ether:
    eth = Ether(src=src, dst=dst)
    if vlan is not None:
        eth = eth / Dot1Q(vlan=vlan)
    return eth / IP(src="10.8.0.1", dst="10.8.0.2") / UDP(sport=1000 + n, dport=9) / Raw(
        MARK + b"%06d" % n)


A, B, C, D = (f"02:00:00:00:00:0{i}" for i in "abcd")
BCAST = "ff:ff:ff:ff:ff:ff"


@pytest.fixture
def taps(daemon: Daemon) -> Iterator[Taps]:
    t = Taps(daemon, "br0", 4)
    yield t
    t.close()


def test_flood_learn_unicast_hairpin_move(taps: Taps) -> None:
    # Unknown destination: every other port, and only them.
    assert taps.where("p0", frame(A, B)) == {"p1", "p2", "p3"}
    wait_for(lambda: taps.learned(A, "p0"), 5)
    # The reply goes to exactly one port; then B is known too.
    assert taps.where("p1", frame(B, A, 1)) == {"p0"}
    wait_for(lambda: taps.learned(B, "p1"), 5)
    assert taps.where("p0", frame(A, B, 2)) == {"p1"}
    # Broadcast and multicast flood.
    assert taps.where("p2", frame(C, BCAST, 3)) == {"p0", "p1", "p3"}
    assert taps.where("p3", frame(D, "01:00:5e:00:00:01", 4)) == {"p0", "p1", "p2"}
    # A destination behind the input port: dropped and counted.
    before = taps.stats()["drops"]["hairpin"]
    assert taps.where("p0", frame(A, A, 5)) == set()
    assert taps.stats()["drops"]["hairpin"] == before + 1
    # A moves from p0 to p3: re-learned there, counted as a move, followed by unicast.
    taps.where("p3", frame(A, BCAST, 7))
    wait_for(lambda: taps.learned(A, "p3"), 5)
    assert taps.where("p1", frame(B, A, 8)) == {"p3"}
    st = taps.stats()
    assert st["learn"]["moved"] >= 1 and st["learn"]["learned"] >= 4
    ports = {p["name"]: p for p in st["ports"]}
    assert_accounting(ports)


def test_aging_and_static_entries(daemon: Daemon) -> None:
    t = Taps(daemon, "br0", 3, aging=2)
    try:
        daemon.call("fdb-add", switch="br0", mac=C, port="p2")
        t.where("p0", frame(A, BCAST))
        wait_for(lambda: t.learned(A, "p0"), 5)
        # A static entry wins over the wire: C seen on p1 stays on p2.
        t.where("p1", frame(C, BCAST, 1))
        assert t.where("p0", frame(A, C, 2)) == {"p2"}
        assert t.stats()["learn"]["static_kept"] == 1
        # Unseen for longer than --aging: gone; the static entry stays.
        wait_for(lambda: (A, 0) not in t.fdb(), 6)
        assert t.fdb()[(C, 0)]["type"] == "static" and t.learned(C, "p2")
        assert t.stats()["learn"]["aged"] >= 1
        assert t.where("p1", frame(B, A, 3)) == {"p0", "p2"}
        # set-switch changes the aging; fdb-flush keeps static entries; fdb-del removes them.
        daemon.call("set-switch", switch="br0", aging=0)
        wait_for(lambda: t.learned(B, "p1"), 5)
        time.sleep(3)
        assert t.learned(B, "p1")
        assert daemon.call("fdb-flush", switch="br0")["flushed"] >= 1
        assert set(t.fdb()) == {(C, 0)}
        daemon.call("fdb-del", switch="br0", mac=C)
        assert t.fdb() == {}
    finally:
        t.close()


def test_vlan_access_and_trunk_isolation(taps: Taps) -> None:
    d = taps.daemon
    d.call("set-port", switch="br0", name="p0", vlan_mode="access", tag=10)
    d.call("set-port", switch="br0", name="p1", vlan_mode="access", tag=20)
    d.call("set-port", switch="br0", name="p2", vlan_mode="trunk", trunks="10,20")
    d.call("set-port", switch="br0", name="p3", vlan_mode="access", tag=10)
    # Untagged from an access port of VLAN 10: the other access port of 10 untagged, the
    # trunk tagged 10, never VLAN 20's port.
    taps.send_and_wait("p0", frame(A, BCAST))
    got = taps.received(0.2)
    assert {p for p, f in got.items() if f} == {"p2", "p3"}
    assert Dot1Q not in Ether(got["p3"][0])
    assert Ether(got["p2"][0])[Dot1Q].vlan == 10
    # Tagged 20 from the trunk: only VLAN 20's access port, untagged.
    taps.send_and_wait("p2", frame(B, BCAST, 1, vlan=20))
    got = taps.received(0.2)
    assert {p for p, f in got.items() if f} == {"p1"}
    assert Dot1Q not in Ether(got["p1"][0])
    # Unicast both ways between an access port and the trunk: the tag is popped and pushed.
    wait_for(lambda: taps.learned(A, "p0", 10), 5)
    taps.send_and_wait("p2", frame(C, A, 2, vlan=10))
    got = taps.received(0.2)
    assert {p for p, f in got.items() if f} == {"p0"}
    assert Dot1Q not in Ether(got["p0"][0])
    wait_for(lambda: taps.learned(C, "p2", 10), 5)
    taps.send_and_wait("p0", frame(A, C, 3))
    got = taps.received(0.2)
    assert {p for p, f in got.items() if f} == {"p2"}
    assert Ether(got["p2"][0])[Dot1Q].vlan == 10
    # A VLAN the trunk does not carry, a tagged frame into an access port, an untagged one
    # into a trunk without VLAN 0: dropped and counted as vlan.
    before = taps.stats()["drops"]["vlan"]
    assert taps.where("p2", frame(C, BCAST, 4, vlan=30)) == set()
    assert taps.where("p0", frame(A, BCAST, 5, vlan=10)) == set()
    assert taps.where("p2", frame(C, BCAST, 6)) == set()
    assert taps.stats()["drops"]["vlan"] == before + 3
    # The same MAC in two VLANs is two entries.
    taps.send("p1", frame(A, BCAST, 7))
    wait_for(lambda: taps.learned(A, "p1", 20) and taps.learned(A, "p0", 10), 5)
    assert_accounting({p["name"]: p for p in taps.stats()["ports"]})


def test_learn_limit_and_table_size(daemon: Daemon) -> None:
    t = Taps(daemon, "br0", 2, max_entries=16)
    try:
        daemon.call("set-port", switch="br0", name="p0", learn_limit=3)
        for i in range(10):
            t.send_and_wait("p0", frame(f"02:00:00:00:01:{i:02x}", BCAST, i))
        # Not learned beyond the limit, but every frame is still flooded.
        assert len(t.received(0.2)["p1"]) == 10
        wait_for(lambda: t.stats()["learn"]["port_limit"] >= 7, 5)
        assert sum(1 for e in t.fdb().values() if e["port"] == "p0") == 3
        for i in range(40):
            t.send("p1", frame(f"02:00:00:00:02:{i:02x}", BCAST, i))
        wait_for(lambda: t.rx_packets("p1") >= 40, 10)
        assert len(t.received(0.2)["p0"]) == 40
        wait_for(lambda: t.stats()["learn"]["table_full"] >= 1, 5)
        assert len(t.fdb()) <= 16
        show = daemon.call("show")["switches"][0]
        assert show["port_settings"]["p0"]["learn_limit"] == 3
    finally:
        t.close()


def test_malformed_frames_counted(taps: Taps, workdir: Path) -> None:
    before = taps.stats()["drops"]["malformed"]
    taps.send("p0", bytes(frame("01:00:00:00:00:01", BCAST)))    # group source
    taps.send("p0", bytes(frame("00:00:00:00:00:00", BCAST, 1)))  # zero source
    # Frames a kernel interface would not send: shorter than a header, a cut VLAN tag.
    short = [MARK[:10], bytes(frame(A, BCAST, vlan=5))[:16], b"", MARK + bytes(2)]
    wrpcap(str(workdir / "short.pcap"), [Raw(f) for f in short])
    taps.daemon.call("add-port", switch="br0", name="cap", spec=f"pcap:rx={workdir}/short.pcap")
    wait_for(lambda: taps.stats()["drops"]["malformed"] >= before + 2 + len(short) - 1, 5)
    assert not any(taps.received(0.2).values())
    assert_accounting({p["name"]: p for p in taps.stats()["ports"]})


def test_learn_requests_refused_clearly(daemon: Daemon) -> None:
    daemon.call("add-switch", name="pt", mode="patch")
    daemon.call("add-switch", name="br0", mode="learn")
    daemon.call("add-port", switch="br0", name="r0", spec=f"ring:name=slr{os.getpid()}")
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("add-switch", {"name": "x", "mode": "patch", "aging": 5}, "learn and flow modes only"),
        ("add-switch", {"name": "x", "mode": "learn", "max_entries": 1}, "max_entries"),
        ("add-switch", {"name": "x", "mode": "learn", "aging": -1}, "non-negative"),
        ("set-switch", {"switch": "pt", "aging": 5}, "patch mode"),
        ("set-switch", {"switch": "br0"}, "nothing to set"),
        ("set-port", {"switch": "br0", "name": "r0", "vlan_mode": "access"}, "tag"),
        ("set-port", {"switch": "br0", "name": "r0", "vlan_mode": "trunk",
                      "trunks": "10-5"}, "trunks"),
        ("set-port", {"switch": "br0", "name": "r0", "vlan_mode": "hybrid"}, "vlan_mode"),
        ("set-port", {"switch": "br0", "name": "nope", "learn_limit": 1}, "no port"),
        ("fdb-add", {"switch": "br0", "mac": "01:00:5e:00:00:01", "port": "r0"}, "unicast"),
        ("fdb-add", {"switch": "br0", "mac": "02:00:00:00:00:zz", "port": "r0"}, "MAC"),
        ("fdb-add", {"switch": "br0", "mac": A, "port": "r0", "vlan": 4095}, "vlan"),
        ("fdb-del", {"switch": "br0", "mac": A}, "no entry"),
        ("fdb-show", {"switch": "pt"}, "patch mode"),
        ("fdb-flush", {"switch": "br0", "port": "nope"}, "no port"),
    ]
    for method, params, words in bad:
        with pytest.raises(RpcError) as err:
            daemon.call(method, **params)
        assert words in err.value.message, (method, params, err.value.message)
    assert daemon.call("version")["version"]


def pmd_forward_stats(log: Path) -> dict[str, int]:
    """The final forward statistics testpmd printed for its one port."""
    block = log.read_text().rsplit("Forward statistics for port 0", 1)[-1]
    found = {}
    for key in ("RX-packets", "TX-packets"):
        m = re.search(key + r":\s+(\d+)", block)
        assert m, log.read_text()[-3000:]
        found[key] = int(m.group(1))
    return found


def test_testpmd_clients_learned(daemon: Daemon, workdir: Path) -> None:
    """Two dpdk-testpmd VMs over vhost-user: vm1 in mac mode towards vm2's MAC (--eth-peer,
    a first burst with --tx-first), vm2 in macswap. The first frames flood (to vm2 and to
    vm3, which has no VM), then both MACs are learned and the frames circulate as unicast;
    the counts at both ends agree with the daemon's."""
    macs = {"vm1": "02:00:00:00:01:01", "vm2": "02:00:00:00:01:02"}
    daemon.call("add-switch", name="br0", mode="learn")
    for vm in ("vm1", "vm2", "vm3"):
        daemon.call("add-port", switch="br0", name=vm,
                    spec=f"vhost-user:server,path={workdir}/{vm}.sock")
    procs: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        for vm, mode in (("vm2", ["--forward-mode=macswap"]),
                         ("vm1", ["--forward-mode=mac", f"--eth-peer=0,{macs['vm2']}",
                                  "--tx-first"])):
            prefix = f"sllt{os.getpid()}{vm}"
            with open(workdir / f"{vm}.log", "wb") as log:
                procs.append((subprocess.Popen(
                    ["dpdk-testpmd", "--lcores", "0@0,1@0", "--no-pci", "--file-prefix",
                     prefix, "--single-file-segments", "--in-memory", "-m", "256",
                     "--vdev", f"net_virtio_user0,path={workdir}/{vm}.sock,mac={macs[vm]}",
                     "--log-level=*:warning", "--", *mode, "--stats-period", "1",
                     "--nb-cores", "1", "--txd", "512", "--rxd", "512"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), prefix))
            if vm == "vm2":
                wait_for(lambda: {p["name"]: p["link"] for p in
                                  daemon.call("list-ports")}["vm2"] == "up", 30)
        wait_for(lambda: daemon.port_stats("br0")["vm2"]["rx_packets"] > 20_000, 60)
    finally:
        for proc, prefix in procs:
            stop_process(proc, sig=2)
            remove_hugepage_files(prefix)
    time.sleep(0.5)
    vm1, vm2 = pmd_forward_stats(workdir / "vm1.log"), pmd_forward_stats(workdir / "vm2.log")
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    # Everything each VM sent entered the switch; it sent them at most what it forwarded.
    assert stats["vm1"]["rx_packets"] == vm1["TX-packets"]
    assert stats["vm2"]["rx_packets"] == vm2["TX-packets"]
    assert vm1["RX-packets"] <= stats["vm1"]["tx_packets"]
    assert vm2["RX-packets"] <= stats["vm2"]["tx_packets"]
    fdb = {(e["mac"].lower(), e["port"]) for e in
           daemon.call("fdb-show", switch="br0")["entries"]}
    assert fdb == {(macs["vm1"], "vm1"), (macs["vm2"], "vm2")}
    # Only the frames before vm2's MAC was learned were flooded (towards vm3, no VM there).
    assert stats["vm3"]["tx_packets"] == 0
    assert stats["vm3"]["flood_tx_dropped"] < 5_000
    assert stats["vm1"]["forwarded"] > 20_000


def reserved(dst: str, ethertype: int, n: int) -> Ether:
    """A link-local control frame (LLDP, LACP, ...) as a peer would send one, marked."""
    return Ether(src=A, dst=dst, type=ethertype) / Raw(MARK + b"%06d" % n + bytes(40))


def test_reserved_multicast_not_flooded(taps: Taps) -> None:
    """01:80:C2:00:00:00-0F are for the link alone (802.1Q 8.6.3, table 8-1): a bridge that
    does not run the protocol drops them and counts them, unless told to forward them."""
    d = taps.daemon
    before = taps.stats()["drops"]["reserved_multicast"]
    bpdu = Ether(src=A, dst="01:80:c2:00:00:00") / Raw(b"\x42\x42\x03" + MARK + bytes(40))
    assert taps.where("p0", bpdu) == set()                                     # STP
    assert taps.where("p0", reserved("01:80:c2:00:00:02", 0x8809, 1)) == set()  # LACP
    assert taps.where("p1", reserved("01:80:c2:00:00:03", 0x888E, 2)) == set()  # 802.1X
    assert taps.where("p2", reserved("01:80:C2:00:00:0e", 0x88CC, 3)) == set()  # LLDP
    assert taps.where("p2", reserved("01:80:c2:00:00:0f", 0x88CC, 4)) == set()
    assert taps.stats()["drops"]["reserved_multicast"] == before + 5
    # The next group address is not reserved and floods as any multicast.
    assert taps.where("p3", reserved("01:80:c2:00:00:10", 0x88CC, 5)) == {"p0", "p1", "p2"}
    assert d.call("show")["switches"][0]["forward_reserved"] is False
    d.call("set-switch", switch="br0", forward_reserved=True)
    assert d.call("show")["switches"][0]["forward_reserved"] is True
    assert taps.where("p2", reserved("01:80:c2:00:00:0e", 0x88CC, 6)) == {"p0", "p1", "p3"}
    d.call("set-switch", switch="br0", forward_reserved=False)
    assert taps.where("p2", reserved("01:80:c2:00:00:0e", 0x88CC, 7)) == set()
    st = taps.stats()
    assert st["drops"]["reserved_multicast"] == before + 6
    assert_accounting({p["name"]: p for p in st["ports"]})


def port_stats(taps: Taps) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in taps.stats()["ports"]}


def test_storm_control_limits_floods_only(taps: Taps) -> None:
    """storm-pps caps the frames a port may flood; the rest are dropped as 'storm'. Exact:
    every frame the port took in is either forwarded or a storm drop, and each other port
    sent a copy of each forwarded one. Loose: how many passed, bounded by the bucket (a
    tenth of a second's worth to start with) plus the rate times the time the storm took
    as the test saw it, which only grows on a busy machine."""
    d, pps, n = taps.daemon, 100, 400
    d.call("set-port", switch="br0", name="p0", storm_pps=pps)
    assert d.call("show")["switches"][0]["port_settings"]["p0"]["storm_pps"] == pps
    # Unicast to a learned port is not limited at all.
    taps.where("p1", frame(B, BCAST))
    wait_for(lambda: taps.learned(B, "p1"), 5)
    before = port_stats(taps)
    for i in range(n):
        taps.send("p0", frame(A, B, i))
    wait_for(lambda: port_stats(taps)["p0"]["rx_packets"] - before["p0"]["rx_packets"] >= n
             - 50, 10)
    time.sleep(0.3)
    after = port_stats(taps)
    assert after["p0"]["drops"]["storm"] == before["p0"]["drops"]["storm"]
    assert (after["p0"]["forwarded"] - before["p0"]["forwarded"]
            == after["p0"]["rx_packets"] - before["p0"]["rx_packets"])
    # A storm of broadcasts from p0.
    d.call("clear-stats", switch="br0")
    taps.received()
    start = time.monotonic()
    for i in range(n):
        taps.send("p0", frame(A, BCAST, i))
    last, rx, deadline = time.monotonic(), 0, time.monotonic() + 20
    while time.monotonic() < deadline:   # until p0's count stops growing
        time.sleep(0.1)
        now_rx = port_stats(taps)["p0"]["rx_packets"]
        if now_rx == rx and rx > 0:
            break
        rx, last = now_rx, time.monotonic()
    elapsed = last - start
    st = port_stats(taps)
    p0, fwd, storm = st["p0"], st["p0"]["forwarded"], st["p0"]["drops"]["storm"]
    assert_accounting(st)
    assert p0["rx_packets"] > n // 2, p0          # the kernel's tap queue may lose a few
    assert fwd + storm == p0["rx_packets"] and p0["dropped"] == storm
    for other in ("p1", "p2", "p3"):
        assert st[other]["tx_packets"] + st[other]["flood_tx_dropped"] == fwd, st[other]
    assert 1 <= fwd <= pps // 10 + pps * elapsed + 2, (fwd, elapsed)
    assert storm >= p0["rx_packets"] - (pps // 10 + pps * elapsed + 2)
    # Off again: every broadcast floods.
    d.call("set-port", switch="br0", name="p0", storm_pps=0)
    d.call("clear-stats", switch="br0")
    for i in range(50):
        taps.send_and_wait("p0", frame(A, BCAST, i))
    assert port_stats(taps)["p0"]["forwarded"] == 50
