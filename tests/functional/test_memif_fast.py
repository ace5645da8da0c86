"""memif ports with fast=1 (src/memif_fast.c): sluiced speaks the memif server side itself
and, between two such ports in a patch switch or a flow switch steering by input port,
copies each frame once, from the sending client's buffer into the receiving client's;
everything else goes through mbufs. Real clients: dpdk-testpmd's net_memif, and a second
sluiced whose memif client ports (DPDK's PMD) replay and record pcap files, so that every
byte of every frame is compared."""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import signal
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.all import Ether, Raw, rdpcap, wrpcap  # type: ignore

from conftest import (
    Daemon,
    PmdPeer,
    RpcError,
    assert_accounting,
    links,
    wait_for,
)

RING = 1024          # DPDK's memif client rings: 2^10 slots unless rsize= says otherwise


class Client(PmdPeer):
    """A dpdk-testpmd on CPU 0 with one net_memif client port."""

    def __init__(self, workdir: Path, name: str, sock: Path, mode: str) -> None:
        super().__init__(workdir, name, "memfast",
                         f"net_memif0,role=client,socket={sock},socket-abstract=no", mode)



@pytest.fixture
def clients() -> Iterator[list[Client]]:
    started: list[Client] = []
    yield started
    for c in started:
        if c.proc is not None:
            c.signal(signal.SIGCONT)
        c.stop()



def fast_spec(workdir: Path, name: str, extra: str = "") -> str:
    return f"memif:role=server,socket={workdir}/{name}.sock,fast=1{extra}"


def two_fast_ports(d: Daemon, workdir: Path, mode: str = "patch", extra: str = "") -> None:
    d.call("add-switch", name="br0", mode=mode)
    for name in ("m1", "m2"):
        d.call("add-port", switch="br0", name=name, spec=fast_spec(workdir, name, extra))
    if mode == "patch":
        d.call("patch", switch="br0", port1="m1", port2="m2")
    if mode == "flow":
        d.call("add-flow", switch="br0", flow="in_port=m1,actions=output:m2")


def start_pair(d: Daemon, workdir: Path, clients: list[Client],
               suffix: str = "") -> tuple[Client, Client]:
    """A receiving client on m2 (up first), then a sending one on m1."""
    rx = Client(workdir, "rx" + suffix, workdir / "m2.sock", "rxonly").start()
    clients.append(rx)
    wait_for(lambda: links(d)["m2"] == "up", 30)
    rx.wait_forwarding()
    tx = Client(workdir, "tx" + suffix, workdir / "m1.sock", "txonly").start()
    clients.append(tx)
    return rx, tx


def drain_and_stop(d: Daemon, rx: Client, tx: Client) -> tuple[int, int]:
    """Stops the sender, lets the receiver drain its ring, stops it: (sent, received).
    A port's link goes down once the worker has taken what its client left queued."""
    assert tx.stop() == 0
    wait_for(lambda: links(d)["m1"] == "down")
    time.sleep(1.5)
    assert rx.stop() == 0
    wait_for(lambda: links(d)["m2"] == "down")
    return tx.counts()["TX-packets"], rx.counts()["RX-packets"]


@pytest.mark.parametrize("mode", ["patch", "flow", "learn"])
def test_testpmd_counts_exact(daemon: Daemon, workdir: Path, clients: list[Client],
                              mode: str) -> None:
    """testpmd txonly (memif client) -> sluiced -> testpmd rxonly (memif client): both ends
    and the daemon agree frame for frame. In a patch switch and a flow switch steering by
    input port, every frame takes the one-copy path (one_copy = forwarded); in a learn
    switch (testpmd's frames go to an unknown MAC: flooded) the mbuf path."""
    two_fast_ports(daemon, workdir, mode)
    rx, tx = start_pair(daemon, workdir, clients)
    wait_for(lambda: daemon.port_stats("br0")["m1"]["rx_packets"] > 100_000, 60)
    time.sleep(1)
    sent, got = drain_and_stop(daemon, rx, tx)
    stats = daemon.port_stats("br0")
    m1, m2 = stats["m1"], stats["m2"]
    assert_accounting(stats)
    assert m1["rx_packets"] == sent > 0
    assert m2["tx_packets"] == got > 0
    assert m1["rx_bytes"] == 64 * m1["rx_packets"]        # testpmd txonly: 64 B frames
    assert m2["tx_bytes"] == 64 * m2["tx_packets"]
    assert m1["rx_missed"] == 0
    if mode == "learn":
        assert m1["rx_packets"] == m1["forwarded"]
        assert m1["rx_packets"] == m2["tx_packets"] + m2["flood_tx_dropped"]
        assert m1["one_copy"] == 0
    else:
        assert m1["rx_packets"] == m2["tx_packets"] + m1["dropped"]
        assert {k for k, v in m1["drops"].items() if v} <= {"tx_full"}
        assert m1["one_copy"] == m1["forwarded"] == m2["tx_packets"]
    if mode == "flow":
        steer = next(f for f in daemon.call("dump-flows", switch="br0")["flows"]
                     if "in_port" in f["match"])
        assert steer["packets"] == m1["rx_packets"], steer


def test_fallback_to_other_kind(daemon: Daemon, workdir: Path, clients: list[Client]) -> None:
    """A fast memif port patched to a pcap port, and a null source patched to a fast one:
    no one-copy path (the other side is no fast memif), frames go through mbufs both ways
    and are counted exactly."""
    daemon.call("add-switch", name="br0", mode="patch")
    daemon.call("add-port", switch="br0", name="m1", spec=fast_spec(workdir, "m1"))
    daemon.call("add-port", switch="br0", name="cap", spec=f"pcap:tx={workdir}/out.pcap")
    daemon.call("patch", switch="br0", port1="m1", port2="cap")
    daemon.call("add-switch", name="br1", mode="patch")
    daemon.call("add-port", switch="br1", name="m2", spec=fast_spec(workdir, "m2"))
    rx = Client(workdir, "rx", workdir / "m2.sock", "rxonly").start()
    clients.append(rx)
    wait_for(lambda: links(daemon)["m2"] == "up", 30)
    rx.wait_forwarding()
    daemon.call("add-port", switch="br1", name="src", spec="null:rx=1")
    daemon.call("patch", switch="br1", port1="src", port2="m2")
    tx = Client(workdir, "tx", workdir / "m1.sock", "txonly").start()
    clients.append(tx)
    wait_for(lambda: daemon.port_stats("br0")["m1"]["rx_packets"] > 20_000, 60)
    wait_for(lambda: daemon.port_stats("br1")["m2"]["tx_packets"] > 20_000, 60)
    daemon.call("del-port", switch="br1", name="src")       # the source ends
    sent, got = drain_and_stop(daemon, rx, tx)
    b0, b1 = daemon.port_stats("br0"), daemon.port_stats("br1")
    assert_accounting(b0)
    assert b0["m1"]["rx_packets"] == sent == b0["m1"]["forwarded"] + b0["m1"]["dropped"]
    assert b0["cap"]["tx_packets"] == b0["m1"]["forwarded"] > 0
    assert b0["m1"]["one_copy"] == 0
    assert b1["m2"]["tx_packets"] == got > 0


def test_receiver_full_is_counted(daemon: Daemon, workdir: Path, clients: list[Client]) -> None:
    """A receiving client that stops taking frames (SIGSTOP): its ring fills, then every
    frame is dropped as tx_full on the input port; after SIGCONT it gets exactly the frames
    the switch says it delivered."""
    two_fast_ports(daemon, workdir)
    rx = Client(workdir, "rx", workdir / "m2.sock", "rxonly").start()
    clients.append(rx)
    wait_for(lambda: links(daemon)["m2"] == "up", 30)
    rx.wait_forwarding()
    rx.signal(signal.SIGSTOP)
    tx = Client(workdir, "tx", workdir / "m1.sock", "txonly").start()
    clients.append(tx)
    wait_for(lambda: daemon.port_stats("br0")["m1"]["rx_packets"] > 50_000, 60)
    assert tx.stop() == 0
    wait_for(lambda: links(daemon)["m1"] == "down")
    stats = daemon.port_stats("br0")
    m1, m2 = stats["m1"], stats["m2"]
    assert_accounting(stats)
    assert m1["rx_packets"] == tx.counts()["TX-packets"]
    # The client posted one ring of buffers; nothing more can have gone in while it slept.
    assert 0 < m2["tx_packets"] <= RING, m2
    assert m1["drops"]["tx_full"] == m1["rx_packets"] - m2["tx_packets"]
    assert m1["one_copy"] == m1["forwarded"] == m2["tx_packets"]
    rx.signal(signal.SIGCONT)
    time.sleep(1.5)
    assert rx.stop() == 0
    assert rx.counts()["RX-packets"] == m2["tx_packets"]


def test_client_killed_mid_traffic(daemon: Daemon, workdir: Path,
                                   clients: list[Client]) -> None:
    """The receiving client dies (SIGKILL) while frames flow, then the sending one. The
    daemon lives on and counts every frame; a new pair of clients then gets frames through
    the one-copy path again, counted exactly."""
    two_fast_ports(daemon, workdir)
    rx, tx = start_pair(daemon, workdir, clients)
    wait_for(lambda: daemon.port_stats("br0")["m2"]["tx_packets"] > 20_000, 60)
    rx.kill()
    clients.remove(rx)
    wait_for(lambda: links(daemon)["m2"] == "down")
    before = daemon.port_stats("br0")
    wait_for(lambda: daemon.port_stats("br0")["m1"]["dropped"] > before["m1"]["dropped"])
    tx.kill()
    clients.remove(tx)
    wait_for(lambda: links(daemon)["m1"] == "down")
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["m2"]["tx_packets"] == before["m2"]["tx_packets"]     # nobody to send to
    assert {k for k, v in stats["m1"]["drops"].items() if v} <= {"tx_full", "link_down"}
    assert stats["m1"]["drops"]["link_down"] > 0

    daemon.call("clear-stats", switch="br0")
    rx, tx = start_pair(daemon, workdir, clients, "2")
    wait_for(lambda: daemon.port_stats("br0")["m2"]["tx_packets"] > 20_000, 60)
    sent, got = drain_and_stop(daemon, rx, tx)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["m1"]["rx_packets"] == sent
    assert stats["m2"]["tx_packets"] == got
    assert stats["m1"]["one_copy"] == stats["m1"]["forwarded"] == stats["m2"]["tx_packets"]
    assert stats["m1"]["rx_missed"] == 0


def test_port_deleted_with_client(daemon: Daemon, workdir: Path,
                                  clients: list[Client]) -> None:
    """Deleting the receiving port while its client is connected and frames flow: the
    client is withdrawn behind a grace period, the sender's frames are then counted
    (unpatched), and a port made again on the same socket takes a new client."""
    two_fast_ports(daemon, workdir)
    rx, tx = start_pair(daemon, workdir, clients)
    wait_for(lambda: daemon.port_stats("br0")["m2"]["tx_packets"] > 20_000, 60)
    daemon.call("del-port", switch="br0", name="m2")
    wait_for(lambda: daemon.port_stats("br0")["m1"]["drops"]["unpatched"] > 1000)
    assert_accounting(daemon.port_stats("br0"))
    rx.kill()
    clients.remove(rx)
    daemon.call("add-port", switch="br0", name="m2", spec=fast_spec(workdir, "m2"))
    daemon.call("patch", switch="br0", port1="m1", port2="m2")
    rx = Client(workdir, "rx3", workdir / "m2.sock", "rxonly").start()
    clients.append(rx)
    wait_for(lambda: daemon.port_stats("br0")["m2"]["tx_packets"] > 20_000, 60)
    sent, _ = drain_and_stop(daemon, rx, tx)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["m1"]["rx_packets"] == sent


def replay_frames(jumbo: bool) -> list[Ether]:
    """Frames of every length from 60 to 1514 bytes (without FCS), and jumbo ones, each
    with a payload that differs from every other frame's."""
    sizes = [*range(60, 1515, 7), 1514]
    if jumbo:
        sizes += [2000, 2048, 4097, 9014, 9014]
    frames = []
    for i, size in enumerate(sizes):
        head = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x88B5)
        body = bytes((i * 7 + j) & 0xFF for j in range(size - len(head)))
        frames.append(head / Raw(body))
    return frames


@pytest.fixture
def client_daemon(workdir: Path) -> Iterator[Daemon]:
    """A second sluiced, its worker on CPU 0, whose memif client ports (DPDK's PMD) are the
    peers."""
    d = Daemon(workdir, "g")
    d.args[d.args.index("--worker-cpus") + 1] = "0"
    d.start()
    yield d
    assert d.stop() == 0, d.log.read_text()


# mtu=9000 on the clients gives them buffers that hold a jumbo frame whole; without it a
# 1514-byte frame fits one 2 KB buffer and nothing is chained.
@pytest.mark.parametrize("jumbo", [False, True])
def test_bytes_intact(daemon: Daemon, client_daemon: Daemon, workdir: Path,
                      jumbo: bool) -> None:
    """Frames of 60 to 1514 bytes (and jumbo ones up to 9014) cross the one-copy path byte
    for byte and in order: a pcap file replayed into one client comes out of the other as
    the same file."""
    mtu = ",mtu=9000" if jumbo else ""
    two_fast_ports(daemon, workdir, extra=mtu)
    g = client_daemon
    spec = "memif:client,socket={}" + mtu
    g.call("add-switch", name="out", mode="patch")
    g.call("add-port", switch="out", name="c2", spec=spec.format(workdir / "m2.sock"))
    g.call("add-port", switch="out", name="cap", spec=f"pcap:tx={workdir}/out.pcap")
    g.call("patch", switch="out", port1="c2", port2="cap")
    # The replaying side floods (learn mode): the pcap port starts replaying as soon as it
    # is added, before a patch could be made.
    g.call("add-switch", name="in", mode="learn")
    g.call("add-port", switch="in", name="c1", spec=spec.format(workdir / "m1.sock"))
    wait_for(lambda: set(links(daemon).values()) == {"up"}, 30)
    wait_for(lambda: set(links(g).values()) >= {"up"} and links(g)["c1"] == "up", 30)
    frames = replay_frames(jumbo)
    wrpcap(str(workdir / "in.pcap"), frames)
    g.call("add-port", switch="in", name="src", spec=f"pcap:rx={workdir}/in.pcap")
    wait_for(lambda: g.port_stats("out")["cap"]["tx_packets"] >= len(frames), 20)
    time.sleep(0.5)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["m1"]["rx_packets"] == stats["m1"]["one_copy"] == len(frames), stats
    assert stats["m1"]["rx_bytes"] == sum(len(f) for f in frames)
    got = rdpcap(str(workdir / "out.pcap"))
    assert len(got) == len(frames)
    for i, (want, have) in enumerate(zip(frames, got, strict=True)):
        assert bytes(have) == bytes(want), f"frame {i} ({len(want)} B) differs"


def test_client_role_refused(daemon: Daemon, workdir: Path) -> None:
    """fast=1 is the server side's: a client spec says so and makes no port."""
    daemon.call("add-switch", name="br0")
    with pytest.raises(Exception, match="fast=1 is for role=server only"):
        daemon.call("add-port", switch="br0", name="m",
                    spec=f"memif:client,socket={workdir}/m.sock,fast=1")
    assert [p["name"] for p in daemon.call("list-ports")] == []


class PyClient:
    """A memif client written here, over the protocol alone (no DPDK): it makes its region
    (a memfd) and rings, and writes their descriptors by hand, including wrong ones."""

    SLOTS = 64
    BUF = 2048

    def __init__(self, path: Path, region_size: int | None = None,
                 sealing: bool = True) -> None:
        self.size = 2 * self.ring_bytes() + 2 * self.SLOTS * self.BUF
        # As DPDK's and libmemif's clients make theirs: a memfd that can be sealed.
        self.fd = os.memfd_create("pyclient", os.MFD_CLOEXEC |
                                  (os.MFD_ALLOW_SEALING if sealing else 0))
        os.ftruncate(self.fd, self.size)
        self.mm = mmap.mmap(self.fd, self.size)
        self.claimed = region_size or self.size
        for r in (0, 1):                      # 0: client to server, 1: server to client
            struct.pack_into("<IHH", self.mm, self.ring(r), 0x3E31F20, 0, 0)
            for j in range(self.SLOTS):
                self.set_desc(r, j, 0, 0, self.BUF, self.buf(r, j))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(5)
        self.sock.connect(str(path))
        self.events = [os.eventfd(0), os.eventfd(0)]

    @classmethod
    def ring_bytes(cls) -> int:
        return 128 + 16 * cls.SLOTS

    def ring(self, r: int) -> int:
        return r * self.ring_bytes()

    def buf(self, r: int, j: int) -> int:
        return 2 * self.ring_bytes() + (r * self.SLOTS + j) * self.BUF

    def set_desc(self, r: int, j: int, flags: int, region: int, length: int,
                 offset: int) -> None:
        struct.pack_into("<HHIII", self.mm, self.ring(r) + 128 + 16 * (j % self.SLOTS),
                         flags, region, length, offset, 0)

    def desc(self, r: int, j: int) -> tuple[int, int, int, int]:
        flags, region, length, offset, _ = struct.unpack_from(
            "<HHIII", self.mm, self.ring(r) + 128 + 16 * (j % self.SLOTS))
        return flags, region, length, offset

    def head(self, r: int) -> int:
        return struct.unpack_from("<H", self.mm, self.ring(r) + 6)[0]

    def tail(self, r: int) -> int:
        return struct.unpack_from("<H", self.mm, self.ring(r) + 64)[0]

    def set_head(self, r: int, value: int) -> None:
        struct.pack_into("<H", self.mm, self.ring(r) + 6, value & 0xFFFF)

    def msg(self, kind: int, body: bytes = b"", fd: int | None = None) -> None:
        data = struct.pack("<H", kind) + body
        data += bytes(128 - len(data))
        if fd is None:
            self.sock.send(data)
        else:
            socket.send_fds(self.sock, [data], [fd])

    def answer(self) -> tuple[int, bytes]:
        data = self.sock.recv(128)
        assert len(data) == 128, data
        return struct.unpack_from("<H", data)[0], data[2:]

    def connect(self) -> tuple[int, bytes]:
        """The handshake; the server's last answer (7: connected, 8: disconnect + why)."""
        kind, _ = self.answer()
        assert kind == 2                                            # hello
        steps = [(3, struct.pack("<HIB24s32s", 0x0200, 0, 0, b"", b"pyclient"), None),
                 (4, struct.pack("<HQ", 0, self.claimed), self.fd),
                 (5, struct.pack("<HHHIBH", 1, 0, 0, self.ring(0), 6, 0), self.events[0]),
                 (5, struct.pack("<HHHIBH", 0, 0, 0, self.ring(1), 6, 0), self.events[1])]
        for kind, body, fd in steps:
            self.msg(kind, body, fd)
            got, rest = self.answer()
            if got != 1:                                            # not an ack
                return got, rest
        self.msg(6, struct.pack("<32s", b"pyclient"))               # connect
        return self.answer()

    def close(self) -> None:
        self.sock.close()
        self.mm.close()
        for fd in (self.fd, *self.events):
            os.close(fd)


def frame(i: int, size: int) -> bytes:
    head = bytes.fromhex("020000000002020000000001") + b"\x88\xb5"
    return head + bytes((i * 13 + j) & 0xFF for j in range(size - len(head)))


def test_nonsense_from_a_client(daemon: Daemon, workdir: Path) -> None:
    """A client of our own writes descriptors that point outside its region, name a region
    it never sent, or are absurdly long, among good frames (one of them chained over two
    buffers): sluiced drops the bad ones (rx_missed), copies the good ones byte for byte
    into the other client's posted buffers, never touches memory it was not given, and
    takes both clients again after they leave, one with a goodbye, one without. A client
    that claims a region larger than its file is refused."""
    two_fast_ports(daemon, workdir)
    sender, receiver = PyClient(workdir / "m1.sock"), PyClient(workdir / "m2.sock")
    try:
        assert receiver.connect()[0] == 7
        assert sender.connect()[0] == 7
        wait_for(lambda: set(links(daemon).values()) == {"up"})
        receiver.set_head(1, PyClient.SLOTS)                        # all buffers posted
        good = [frame(0, 60), frame(1, 1514), frame(2, 3000), frame(3, 64)]
        slot = 0
        plan: list[tuple[int, int, int, int, bytes]] = []           # flags, region, len, off
        for i, f in enumerate(good):
            if len(f) > PyClient.BUF:                               # a chain of two buffers
                plan.append((1, 0, PyClient.BUF, sender.buf(0, slot), f[:PyClient.BUF]))
                plan.append((0, 0, len(f) - PyClient.BUF, sender.buf(0, slot + 1),
                             f[PyClient.BUF:]))
                slot += 2
            else:
                plan.append((0, 0, len(f), sender.buf(0, slot), f))
                slot += 1
            if i == 0:      # after the first good frame, three bad ones
                plan.append((0, 0, 100, sender.size - 50, b""))     # past the region's end
                plan.append((0, 3, 100, 0, b""))                    # a region never sent
                plan.append((0, 0, 0xFFFFFFF0, 0, b""))            # absurdly long
                slot += 3
        for j, (flags, region, length, offset, data) in enumerate(plan):
            if data:
                sender.mm[offset:offset + len(data)] = data
            sender.set_desc(0, j, flags, region, length, offset)
        sender.set_head(0, len(plan))
        wait_for(lambda: sender.tail(0) == len(plan))
        wait_for(lambda: receiver.tail(1) >= len(good) + 1)
        stats = daemon.port_stats("br0")
        assert_accounting(stats)
        assert stats["m1"]["rx_packets"] == len(good) == stats["m1"]["one_copy"]
        assert stats["m1"]["rx_missed"] == 3
        assert stats["m2"]["tx_packets"] == len(good)
        got, j = [], 0
        while j < receiver.tail(1):
            data = b""
            while True:
                flags, _, length, offset = receiver.desc(1, j)
                data += bytes(receiver.mm[offset:offset + length])
                j += 1
                if not flags & 1:
                    break
            got.append(data)
        assert got == good
        # The receiver's ring asks for interrupts (flags 0): woken once a burst at least;
        # the sender's ring was marked for polling by the server (MASK_INT).
        os.set_blocking(receiver.events[1], False)
        assert os.eventfd_read(receiver.events[1]) >= 1
        assert struct.unpack_from("<H", sender.mm, sender.ring(0) + 4)[0] == 1
        sender.msg(8, struct.pack("<I96s", 0, b"bye"))              # a goodbye
        wait_for(lambda: links(daemon)["m1"] == "down")
        receiver.close()                                            # no goodbye
        wait_for(lambda: links(daemon)["m2"] == "down")
    finally:
        sender.close()
        with contextlib.suppress(OSError, ValueError):
            receiver.close()
    again = PyClient(workdir / "m2.sock")
    try:
        assert again.connect()[0] == 7
        wait_for(lambda: links(daemon)["m2"] == "up")
    finally:
        again.close()
    liar = PyClient(workdir / "m1.sock", region_size=1 << 30)
    try:
        kind, why = liar.connect()
        assert kind == 8 and b"larger than its file" in why, why
    finally:
        liar.close()
    assert daemon.proc is not None and daemon.proc.poll() is None


def test_a_client_cannot_shrink_its_region(daemon: Daemon, workdir: Path) -> None:
    """A client that shrinks its region under the workers would make them fault (SIGBUS)
    and take the daemon down: sluiced seals a sealable memfd against shrinking before it
    maps it (the client's ftruncate then fails, EPERM), and refuses a region it cannot
    seal, with the reason; the port takes a proper client after either."""
    two_fast_ports(daemon, workdir)
    client = PyClient(workdir / "m1.sock")
    try:
        assert client.connect()[0] == 7
        wait_for(lambda: links(daemon)["m1"] == "up")
        seals = fcntl.fcntl(client.fd, fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_SHRINK, seals
        with pytest.raises(PermissionError):
            os.ftruncate(client.fd, 4096)
        assert os.fstat(client.fd).st_size == client.size
    finally:
        client.close()
    wait_for(lambda: links(daemon)["m1"] == "down")
    unsealable = PyClient(workdir / "m1.sock", sealing=False)
    try:
        kind, why = unsealable.connect()
        assert kind == 8 and b"can shrink" in why, why
    finally:
        unsealable.close()
    again = PyClient(workdir / "m1.sock")
    try:
        assert again.connect()[0] == 7
        wait_for(lambda: links(daemon)["m1"] == "up")
    finally:
        again.close()
    assert daemon.proc is not None and daemon.proc.poll() is None
    assert "can shrink" in daemon.log.read_text()


def test_capture_refused_with_the_way_out(daemon: Daemon, workdir: Path) -> None:
    """sluiced's own capture serves fast vhost-user ports only: capturing a fast memif port
    is refused, with what to do instead, and the port keeps working."""
    daemon.call("add-switch", name="br0", mode="patch")
    daemon.call("add-port", switch="br0", name="m1", spec=fast_spec(workdir, "m1"))
    with pytest.raises(RpcError) as e:
        daemon.call("capture-start", switch="br0", port="m1", direction="both", snaplen=128)
    assert "without fast=1" in str(e.value), e.value
    assert [p["name"] for p in daemon.call("list-ports")] == ["m1"]
