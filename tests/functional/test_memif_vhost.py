"""One copy between a fast memif port (src/memif_fast.c) and a fast vhost-user port
(src/vhost_fast.c), either way: in a patch switch, or a flow switch steering by input port,
each frame is copied once, from the memif client's buffer into the guest's (or back), no
mbuf in between (worker.c, serve_cross). Real peers: dpdk-testpmd over net_memif and over
virtio-user, and a second sluiced whose memif and virtio-user client ports replay and
record pcap files, so that every byte of every frame is compared."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.all import rdpcap, wrpcap  # type: ignore
from test_vhost_fast import replay_frames

from conftest import (
    Daemon,
    PmdPeer,
    assert_accounting,
    links,
    wait_for,
)

# The two directions: (input port, its kind), (output port, its kind).
DIRECTIONS = {
    "m2v": (("m1", "memif"), ("vm2", "vhost")),
    "v2m": (("vm1", "vhost"), ("m2", "memif")),
}


def server_spec(workdir: Path, name: str, kind: str, extra: str = "") -> str:
    if kind == "memif":
        return f"memif:role=server,socket={workdir}/{name}.sock,fast=1{extra}"
    return f"vhost-user:server,path={workdir}/{name}.sock,fast=1{extra}"


class Peer(PmdPeer):
    """A dpdk-testpmd on CPU 0 with one port: a net_memif client or a virtio-user guest."""

    def __init__(self, workdir: Path, name: str, sock: Path, kind: str, mode: str,
                 mac: str | None = None, peer: str | None = None) -> None:
        vdev = (f"net_memif0,role=client,socket={sock},socket-abstract=no"
                if kind == "memif" else f"net_virtio_user0,path={sock}")
        if mac is not None:
            vdev += f",mac={mac}"
        super().__init__(workdir, name, "slmv", vdev, mode)
        if peer is not None:
            self.cmd.append(f"--eth-peer=0,{peer}")



@pytest.fixture
def peers() -> Iterator[list[Peer]]:
    started: list[Peer] = []
    yield started
    for p in started:
        if p.proc is not None:
            p.signal(signal.SIGCONT)
        p.stop()



def cross_ports(d: Daemon, workdir: Path, direction: str, mode: str = "patch",
                in_extra: str = "", out_extra: str = "") -> tuple[str, str]:
    (src, src_kind), (dst, dst_kind) = DIRECTIONS[direction]
    d.call("add-switch", name="br0", mode=mode)
    d.call("add-port", switch="br0", name=src,
           spec=server_spec(workdir, src, src_kind, in_extra))
    d.call("add-port", switch="br0", name=dst,
           spec=server_spec(workdir, dst, dst_kind, out_extra))
    if mode == "patch":
        d.call("patch", switch="br0", port1=src, port2=dst)
    else:
        d.call("add-flow", switch="br0", flow=f"in_port={src},actions=output:{dst}")
    return src, dst


def start_rx(d: Daemon, workdir: Path, peers: list[Peer], direction: str) -> Peer:
    _, (dst, kind) = DIRECTIONS[direction]
    rx = Peer(workdir, "rx", workdir / f"{dst}.sock", kind, "rxonly").start()
    peers.append(rx)
    wait_for(lambda: links(d)[dst] == "up", 30)
    rx.wait_forwarding()
    return rx


def start_tx(workdir: Path, peers: list[Peer], direction: str) -> Peer:
    (src, kind), _ = DIRECTIONS[direction]
    tx = Peer(workdir, "tx", workdir / f"{src}.sock", kind, "txonly").start()
    peers.append(tx)
    return tx


@pytest.mark.parametrize("mode", ["patch", "flow"])
@pytest.mark.parametrize("direction", ["m2v", "v2m"])
def test_testpmd_counts_exact(daemon: Daemon, workdir: Path, peers: list[Peer],
                              direction: str, mode: str) -> None:
    """testpmd txonly on one kind -> sluiced -> testpmd rxonly on the other: both ends and
    the daemon agree frame for frame, and every frame took the one-copy path (one_copy =
    forwarded = the output's tx); the steering rule counts every frame."""
    src, dst = cross_ports(daemon, workdir, direction, mode)
    rx = start_rx(daemon, workdir, peers, direction)
    tx = start_tx(workdir, peers, direction)
    wait_for(lambda: daemon.port_stats("br0")[src]["rx_packets"] > 100_000, 60)
    time.sleep(1)
    assert tx.stop() == 0
    wait_for(lambda: links(daemon)[src] == "down")
    time.sleep(1.5)                          # the receiver drains its ring
    assert rx.stop() == 0
    sent, got = tx.counts()["TX-packets"], rx.counts()["RX-packets"]
    stats = daemon.port_stats("br0")
    s, o = stats[src], stats[dst]
    assert_accounting(stats)
    assert s["rx_packets"] == sent > 0, stats
    assert o["tx_packets"] == got > 0
    assert s["rx_packets"] == o["tx_packets"] + s["dropped"]
    assert {k for k, v in s["drops"].items() if v} <= {"tx_full"}
    assert s["rx_bytes"] == 64 * s["rx_packets"]          # testpmd txonly: 64 B frames
    assert o["tx_bytes"] == 64 * o["tx_packets"]
    assert s["rx_missed"] == 0
    assert s["one_copy"] == s["forwarded"] == o["tx_packets"]
    if mode == "flow":
        steer = next(f for f in daemon.call("dump-flows", switch="br0")["flows"]
                     if "in_port" in f["match"])
        assert steer["packets"] == s["rx_packets"], steer
        assert steer["bytes"] == s["rx_bytes"], steer


@pytest.mark.parametrize("direction", ["m2v", "v2m"])
def test_receiver_full_is_counted(daemon: Daemon, workdir: Path, peers: list[Peer],
                                  direction: str) -> None:
    """A receiver that stops taking frames (SIGSTOP): its ring fills, then every frame is
    dropped as tx_full on the input port; after SIGCONT it gets exactly the frames the
    switch says it delivered."""
    src, dst = cross_ports(daemon, workdir, direction)
    rx = start_rx(daemon, workdir, peers, direction)
    rx.signal(signal.SIGSTOP)
    tx = start_tx(workdir, peers, direction)
    wait_for(lambda: daemon.port_stats("br0")[src]["rx_packets"] > 50_000, 60)
    assert tx.stop() == 0
    wait_for(lambda: links(daemon)[src] == "down")
    stats = daemon.port_stats("br0")
    s, o = stats[src], stats[dst]
    assert_accounting(stats)
    assert s["rx_packets"] == tx.counts()["TX-packets"]
    # One ring of buffers (1024 memif slots, 512 virtio ones) at most went in.
    assert 0 < o["tx_packets"] <= 1024, o
    assert s["drops"]["tx_full"] == s["rx_packets"] - o["tx_packets"] > 0
    assert s["one_copy"] == s["forwarded"] == o["tx_packets"]
    rx.signal(signal.SIGCONT)
    time.sleep(1.5)
    assert rx.stop() == 0
    assert rx.counts()["RX-packets"] == o["tx_packets"]


@pytest.mark.parametrize("direction", ["m2v", "v2m"])
def test_receiver_gone_then_back(daemon: Daemon, workdir: Path, peers: list[Peer],
                                 direction: str) -> None:
    """The receiver dies (SIGKILL) while frames flow, then the sender: the daemon counts the
    sender's frames (link_down) and lives on; a new pair of peers then gets frames through
    the one-copy path again, counted exactly."""
    src, dst = cross_ports(daemon, workdir, direction)
    rx = start_rx(daemon, workdir, peers, direction)
    tx = start_tx(workdir, peers, direction)
    wait_for(lambda: daemon.port_stats("br0")[dst]["tx_packets"] > 20_000, 60)
    rx.kill()
    peers.remove(rx)
    wait_for(lambda: links(daemon)[dst] == "down")
    before = daemon.port_stats("br0")
    wait_for(lambda: daemon.port_stats("br0")[src]["drops"]["link_down"] > 1000)
    assert daemon.port_stats("br0")[dst]["tx_packets"] == before[dst]["tx_packets"]
    tx.kill()
    peers.remove(tx)
    wait_for(lambda: links(daemon)[src] == "down")
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert {k for k, v in stats[src]["drops"].items() if v} <= {"tx_full", "link_down"}

    daemon.call("clear-stats", switch="br0")
    rx = start_rx(daemon, workdir, peers, direction)
    tx = start_tx(workdir, peers, direction)
    wait_for(lambda: daemon.port_stats("br0")[dst]["tx_packets"] > 20_000, 60)
    assert tx.stop() == 0
    wait_for(lambda: links(daemon)[src] == "down")
    time.sleep(1.5)
    assert rx.stop() == 0
    stats = daemon.port_stats("br0")
    s, o = stats[src], stats[dst]
    assert_accounting(stats)
    assert s["rx_packets"] == tx.counts()["TX-packets"]
    assert o["tx_packets"] == rx.counts()["RX-packets"] > 0
    assert s["one_copy"] == s["forwarded"] == o["tx_packets"]
    assert s["rx_missed"] == 0


@pytest.fixture
def peer_daemon(workdir: Path) -> Iterator[Daemon]:
    """A second sluiced, its worker on CPU 0, whose memif client and virtio-user ports are
    the peers."""
    d = Daemon(workdir, "g")
    d.args[d.args.index("--worker-cpus") + 1] = "0"
    d.start()
    yield d
    assert d.stop() == 0, d.log.read_text()


def client_spec(workdir: Path, name: str, kind: str) -> str:
    # mtu=9000 on the peers gives them buffers and chains that take a jumbo frame whole.
    if kind == "memif":
        return f"memif:client,socket={workdir}/{name}.sock,mtu=9000"
    return f"virtio-user:path={workdir}/{name}.sock,queue_size=1024,mtu=9000"


# out_mtu 9000: every frame crosses (jumbo ones as chains of buffers on both sides); 1500:
# the jumbo ones are longer than the output sends, and are counted as mtu_exceeded.
@pytest.mark.parametrize("out_mtu", [9000, 1500])
@pytest.mark.parametrize("direction", ["m2v", "v2m"])
def test_bytes_intact_and_oversize(daemon: Daemon, peer_daemon: Daemon, workdir: Path,
                                   direction: str, out_mtu: int) -> None:
    """Frames of 60 to 1514 bytes and jumbo ones up to 9014 cross the one-copy path byte
    for byte and in order: a pcap file replayed into one peer comes out of the other as
    the same file, less the frames longer than the output's MTU, each counted."""
    (src, src_kind), (dst, dst_kind) = DIRECTIONS[direction]
    cross_ports(daemon, workdir, direction, in_extra=",mtu=9000",
                out_extra=f",mtu={out_mtu}")
    g = peer_daemon
    g.call("add-switch", name="out", mode="patch")
    g.call("add-port", switch="out", name="c2", spec=client_spec(workdir, dst, dst_kind))
    g.call("add-port", switch="out", name="cap", spec=f"pcap:tx={workdir}/out.pcap")
    g.call("patch", switch="out", port1="c2", port2="cap")
    # The replaying side floods (learn mode): the pcap port starts replaying as soon as it
    # is added, before a patch could be made.
    g.call("add-switch", name="in", mode="learn")
    g.call("add-port", switch="in", name="c1", spec=client_spec(workdir, src, src_kind))
    wait_for(lambda: set(links(daemon).values()) == {"up"}, 30)
    wait_for(lambda: links(g)["c1"] == "up" and links(g)["c2"] == "up", 30)
    frames = replay_frames()
    fits = [f for f in frames if len(f) <= out_mtu + 14]
    wrpcap(str(workdir / "in.pcap"), frames)
    g.call("add-port", switch="in", name="src", spec=f"pcap:rx={workdir}/in.pcap")
    wait_for(lambda: daemon.port_stats("br0")[src]["rx_packets"] >= len(frames), 20)
    wait_for(lambda: g.port_stats("out")["cap"]["tx_packets"] >= len(fits), 20)
    time.sleep(0.5)
    stats = daemon.port_stats("br0")
    s, o = stats[src], stats[dst]
    assert_accounting(stats)
    assert s["rx_packets"] == len(frames), stats
    assert s["rx_bytes"] == sum(len(f) for f in frames)
    assert s["one_copy"] == s["forwarded"] == o["tx_packets"] == len(fits)
    assert s["drops"]["mtu_exceeded"] == len(frames) - len(fits)
    assert o["tx_bytes"] == sum(len(f) for f in fits)
    if out_mtu == 1500:
        assert len(fits) < len(frames)
    got = rdpcap(str(workdir / "out.pcap"))
    assert len(got) == len(fits)
    for i, (want, have) in enumerate(zip(fits, got, strict=True)):
        assert bytes(have) == bytes(want), f"frame {i} ({len(want)} B) differs"


MEMIF_MAC = "02:00:00:00:02:02"
NOBODY = "02:00:00:00:0f:0f"          # never sends: an unknown destination


def fdb(d: Daemon) -> dict[str, str]:
    return {e["mac"].lower(): e["port"] for e in d.call("fdb-show", switch="br0")["entries"]}


def test_learn_guest_to_memif_one_copy(daemon: Daemon, workdir: Path,
                                       peers: list[Peer]) -> None:
    """A learn switch of a fast vhost-user port and a fast memif port: once the memif
    client's MAC is learned, the guest's frames to it are copied once, from the guest's
    chains into the client's buffers, frame by frame (fwd_ops.fast_unicast), and counted
    exactly: testpmd TX == vm1 rx == forwarded + drops, one_copy == forwarded == m2 tx ==
    testpmd RX."""
    daemon.call("add-switch", name="br0", mode="learn")
    daemon.call("add-port", switch="br0", name="vm1",
                spec=server_spec(workdir, "vm1", "vhost"))
    daemon.call("add-port", switch="br0", name="m2", spec=server_spec(workdir, "m2", "memif"))
    teach = Peer(workdir, "teach", workdir / "m2.sock", "memif", "txonly", MEMIF_MAC,
                 NOBODY).start()
    peers.append(teach)
    wait_for(lambda: fdb(daemon).get(MEMIF_MAC) == "m2", 30)
    assert teach.stop() == 0
    peers.remove(teach)
    wait_for(lambda: links(daemon)["m2"] == "down")
    daemon.call("clear-stats", switch="br0")
    rx = Peer(workdir, "rx", workdir / "m2.sock", "memif", "rxonly", MEMIF_MAC).start()
    peers.append(rx)
    wait_for(lambda: links(daemon)["m2"] == "up", 30)
    rx.wait_forwarding()
    tx = Peer(workdir, "tx", workdir / "vm1.sock", "vhost", "txonly", None,
              MEMIF_MAC).start()
    peers.append(tx)
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["rx_packets"] > 100_000, 60)
    time.sleep(1)
    assert tx.stop() == 0
    wait_for(lambda: links(daemon)["vm1"] == "down")
    time.sleep(1.5)
    assert rx.stop() == 0
    sent, got = tx.counts()["TX-packets"], rx.counts()["RX-packets"]
    stats = daemon.port_stats("br0")
    vm1, m2 = stats["vm1"], stats["m2"]
    assert_accounting(stats)
    assert vm1["rx_packets"] == sent > 100_000
    assert {k for k, v in vm1["drops"].items() if v} <= {"tx_full"}
    assert vm1["one_copy"] == vm1["forwarded"] == m2["tx_packets"] == got > 0
    assert vm1["rx_bytes"] == 64 * sent and m2["tx_bytes"] == 64 * got
    assert m2["flood_tx_dropped"] == 0
