"""vhost-user ports with fast=1 (src/vhost_fast.c): frames between two of them in a patch
switch, a flow switch steering by input port, or a learn switch (to a learned MAC) are copied
once, guest to guest; everything else goes through mbufs. Real guests:
dpdk-testpmd over virtio-user, and a second sluiced whose virtio-user ports replay and record
pcap files, so that every byte of every frame is compared."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.all import Ether, Raw, rdpcap, wrpcap  # type: ignore
from scapy.layers.inet import UDP as UDP_LAYER

from conftest import (
    Daemon,
    PmdPeer,
    assert_accounting,
    links,
    wait_for,
)


class Guest(PmdPeer):
    """A dpdk-testpmd on CPU 0 over virtio-user: a container's virtio-net."""

    def __init__(self, workdir: Path, name: str, sock: Path, mode: str) -> None:
        super().__init__(workdir, name, "slvf", f"net_virtio_user0,path={sock}", mode)


@pytest.fixture
def guests() -> Iterator[list[Guest]]:
    started: list[Guest] = []
    yield started
    for g in started:
        g.signal(signal.SIGCONT) if g.proc is not None else None
        g.stop()



def two_fast_ports(d: Daemon, workdir: Path, mode: str = "patch", extra: str = "") -> None:
    d.call("add-switch", name="br0", mode=mode)
    for vm in ("vm1", "vm2"):
        d.call("add-port", switch="br0", name=vm,
               spec=f"vhost-user:server,path={workdir}/{vm}.sock,fast=1{extra}")
    if mode == "patch":
        d.call("patch", switch="br0", port1="vm1", port2="vm2")
    if mode == "flow":
        d.call("add-flow", switch="br0", flow="in_port=vm1,actions=output:vm2")


def start_pair(d: Daemon, workdir: Path, guests: list[Guest]) -> tuple[Guest, Guest]:
    """A receiving guest on vm2 (up first), then a sending one on vm1."""
    rx = Guest(workdir, "rx", workdir / "vm2.sock", "rxonly").start()
    guests.append(rx)
    wait_for(lambda: links(d)["vm2"] == "up", 30)
    tx = Guest(workdir, "tx", workdir / "vm1.sock", "txonly").start()
    guests.append(tx)
    return rx, tx


# flow: in_port=vm1,actions=output:vm2 looks at the input port alone (one copy, the burst
# decided at once); flow+udp adds a rule above it on UDP's destination port, which
# testpmd's frames do not match, but whose miss depends on the frame: decided frame by
# frame from the headers in the guest's buffer, still one copy; flow+mod steers with a
# header change: the mbuf path.
@pytest.mark.parametrize("mode", ["patch", "learn", "flow", "flow+udp", "flow+mod"])
def test_testpmd_counts_exact(daemon: Daemon, workdir: Path, guests: list[Guest],
                              mode: str) -> None:
    """testpmd txonly -> sluiced -> testpmd rxonly: both ends and the daemon agree frame for
    frame. In a patch switch, and a flow switch whose rules send the frames unchanged to one
    port, the frames take the one-copy path (one_copy = forwarded), and the rule counts every
    frame; in a learn switch (testpmd's frames go to an unknown MAC: flooded) and a flow
    switch whose rule changes a header, the mbuf path."""
    two_fast_ports(daemon, workdir, mode.split("+")[0])
    if mode == "flow+udp":
        daemon.call("add-flow", switch="br0",
                    flow="priority=40000,udp,tp_dst=4789,actions=drop")
    if mode == "flow+mod":
        daemon.call("add-flow", switch="br0",
                    flow="in_port=vm1,actions=mod_dl_src:02:00:00:00:00:99,output:vm2")
    rx, tx = start_pair(daemon, workdir, guests)
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["rx_packets"] > 100_000, 60)
    time.sleep(1)
    assert tx.stop() == 0
    time.sleep(1.5)                          # the receiver drains its ring
    assert rx.stop() == 0
    sent, got = tx.counts()["TX-packets"], rx.counts()["RX-packets"]
    stats = daemon.port_stats("br0")
    vm1, vm2 = stats["vm1"], stats["vm2"]
    assert_accounting(stats)
    assert vm1["rx_packets"] == sent
    assert vm2["tx_packets"] == got > 0
    if mode != "learn":
        assert vm1["rx_packets"] == vm2["tx_packets"] + vm1["dropped"]
        assert {k for k, v in vm1["drops"].items() if v} <= {"tx_full"}
    else:       # flood copies the output could not take count on the output
        assert vm1["rx_packets"] == vm1["forwarded"]
        assert vm1["rx_packets"] == vm2["tx_packets"] + vm2["flood_tx_dropped"]
    assert vm1["rx_bytes"] == 64 * vm1["rx_packets"]       # testpmd txonly: 64 B frames
    assert vm2["tx_bytes"] == 64 * vm2["tx_packets"]
    assert vm1["rx_missed"] == 0
    if mode in ("patch", "flow", "flow+udp"):
        assert vm1["one_copy"] == vm1["forwarded"]
    else:
        assert vm1["one_copy"] == 0
    if mode.startswith("flow"):
        steer = next(f for f in daemon.call("dump-flows", switch="br0")["flows"]
                     if "in_port" in f["match"])
        assert steer["packets"] == vm1["rx_packets"], steer
        assert steer["bytes"] == vm1["rx_bytes"], steer


def test_receiver_full_is_counted(daemon: Daemon, workdir: Path, guests: list[Guest]) -> None:
    """A receiving guest that stops taking frames (SIGSTOP): its ring fills, then every
    frame is dropped as tx_full on the input port; after SIGCONT it gets exactly the frames
    the switch says it delivered."""
    two_fast_ports(daemon, workdir)
    rx = Guest(workdir, "rx", workdir / "vm2.sock", "rxonly").start()
    guests.append(rx)
    wait_for(lambda: links(daemon)["vm2"] == "up", 30)
    time.sleep(1)
    rx.signal(signal.SIGSTOP)
    tx = Guest(workdir, "tx", workdir / "vm1.sock", "txonly").start()
    guests.append(tx)
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["rx_packets"] > 50_000, 60)
    assert tx.stop() == 0
    stats = daemon.port_stats("br0")
    vm1, vm2 = stats["vm1"], stats["vm2"]
    assert_accounting(stats)
    assert vm1["rx_packets"] == tx.counts()["TX-packets"]
    # The ring has 512 slots; nothing more can have gone in while the guest slept.
    assert 0 < vm2["tx_packets"] <= 512, vm2
    assert vm1["drops"]["tx_full"] == vm1["rx_packets"] - vm2["tx_packets"]
    assert vm1["one_copy"] == vm1["forwarded"] == vm2["tx_packets"]
    rx.signal(signal.SIGCONT)
    time.sleep(1.5)
    assert rx.stop() == 0
    assert rx.counts()["RX-packets"] == vm2["tx_packets"]


def test_guest_disconnect_mid_traffic(daemon: Daemon, workdir: Path,
                                      guests: list[Guest]) -> None:
    """The receiving guest dies (SIGKILL) while frames flow, then the sending one. The
    daemon keeps serving and counts every frame; a new pair of guests then gets frames
    through the one-copy path again, counted exactly."""
    two_fast_ports(daemon, workdir)
    rx, tx = start_pair(daemon, workdir, guests)
    wait_for(lambda: daemon.port_stats("br0")["vm2"]["tx_packets"] > 20_000, 60)
    rx.kill()
    guests.remove(rx)
    wait_for(lambda: links(daemon)["vm2"] == "down")
    before = daemon.port_stats("br0")
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["dropped"] > before["vm1"]["dropped"])
    tx.kill()
    guests.remove(tx)
    wait_for(lambda: links(daemon)["vm1"] == "down")
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["vm2"]["tx_packets"] == before["vm2"]["tx_packets"]   # nobody to send to
    assert {k for k, v in stats["vm1"]["drops"].items() if v} <= {"tx_full", "link_down"}
    assert stats["vm1"]["drops"]["link_down"] > 0

    daemon.call("clear-stats", switch="br0")
    rx, tx = start_pair(daemon, workdir, guests)
    wait_for(lambda: daemon.port_stats("br0")["vm2"]["tx_packets"] > 20_000, 60)
    assert tx.stop() == 0
    time.sleep(1.5)
    assert rx.stop() == 0
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["vm1"]["rx_packets"] == tx.counts()["TX-packets"]
    assert stats["vm2"]["tx_packets"] == rx.counts()["RX-packets"]
    assert stats["vm1"]["one_copy"] == stats["vm1"]["forwarded"] == stats["vm2"]["tx_packets"]
    assert stats["vm1"]["rx_missed"] == 0


def replay_frames() -> list[Ether]:
    """Frames of every length from 60 to 1514 bytes (without FCS) and jumbo ones, each
    with a payload that differs from every other frame's."""
    sizes = [*range(60, 1515, 7), 1514, 2000, 2048, 4097, 9014, 9014]
    frames = []
    for i, size in enumerate(sizes):
        head = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x88B5)
        body = bytes((i * 7 + j) & 0xFF for j in range(size - len(head)))
        frames.append(head / Raw(body))
    return frames


@pytest.fixture
def guest_daemon(workdir: Path) -> Iterator[Daemon]:
    """A second sluiced, its worker on CPU 0, whose virtio-user ports are the guests."""
    d = Daemon(workdir, "g")
    d.args[d.args.index("--worker-cpus") + 1] = "0"
    d.start()
    yield d
    assert d.stop() == 0, d.log.read_text()


def test_bytes_intact_all_sizes_and_jumbo(daemon: Daemon, guest_daemon: Daemon,
                                          workdir: Path) -> None:
    """Frames of 60 to 1514 bytes and jumbo ones up to 9014 (chains of descriptors on the
    sending side, several mergeable buffers on the receiving side) cross the one-copy path
    byte for byte and in order: a pcap file replayed into one guest comes out of the other
    as the same file."""
    two_fast_ports(daemon, workdir, extra=",mtu=9000")
    g = guest_daemon
    spec = "virtio-user:path={},queue_size=1024,mtu=9000"
    g.call("add-switch", name="out", mode="patch")
    g.call("add-port", switch="out", name="c2", spec=spec.format(workdir / "vm2.sock"))
    g.call("add-port", switch="out", name="cap", spec=f"pcap:tx={workdir}/out.pcap")
    g.call("patch", switch="out", port1="c2", port2="cap")
    # The replaying side floods (learn mode): the pcap port starts replaying as soon as it
    # is added, before a patch could be made.
    g.call("add-switch", name="in", mode="learn")
    g.call("add-port", switch="in", name="c1", spec=spec.format(workdir / "vm1.sock"))
    wait_for(lambda: set(links(daemon).values()) == {"up"}, 30)
    frames = replay_frames()
    wrpcap(str(workdir / "in.pcap"), frames)
    g.call("add-port", switch="in", name="src", spec=f"pcap:rx={workdir}/in.pcap")
    wait_for(lambda: g.port_stats("out")["cap"]["tx_packets"] >= len(frames), 20)
    time.sleep(0.5)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["vm1"]["rx_packets"] == stats["vm1"]["one_copy"] == len(frames), stats
    assert stats["vm1"]["rx_bytes"] == sum(len(f) for f in frames)
    got = rdpcap(str(workdir / "out.pcap"))
    assert len(got) == len(frames)
    for i, (want, have) in enumerate(zip(frames, got, strict=True)):
        assert bytes(have) == bytes(want), f"frame {i} ({len(want)} B) differs"


def test_port_deleted_under_traffic(daemon: Daemon, workdir: Path,
                                    guests: list[Guest]) -> None:
    """Deleting the receiving port while its guest is connected and frames flow: the guest
    is withdrawn behind a grace period, the daemon keeps serving, the sender's frames are
    then counted (unpatched), and a port made again on the same socket works."""
    two_fast_ports(daemon, workdir)
    rx, tx = start_pair(daemon, workdir, guests)
    wait_for(lambda: daemon.port_stats("br0")["vm2"]["tx_packets"] > 20_000, 60)
    daemon.call("del-port", switch="br0", name="vm2")
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["drops"]["unpatched"] > 1000)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert "vm2" not in stats
    daemon.call("add-port", switch="br0", name="vm2",
                spec=f"vhost-user:server,path={workdir}/vm2.sock,fast=1")
    daemon.call("patch", switch="br0", port1="vm1", port2="vm2")
    rx.kill()
    guests.remove(rx)
    rx = Guest(workdir, "rx3", workdir / "vm2.sock", "rxonly").start()
    guests.append(rx)
    wait_for(lambda: daemon.port_stats("br0")["vm2"]["tx_packets"] > 20_000, 60)
    assert_accounting(daemon.port_stats("br0"))


def test_client_role_reconnects(daemon: Daemon, workdir: Path, guests: list[Guest]) -> None:
    """fast=1 as vhost-user client of a guest that is the server (virtio-user server=1):
    frames flow, the guest restarts, sluiced reconnects and frames flow again."""
    sock = workdir / "vm.sock"
    vm = Guest(workdir, "srv", sock, "txonly")
    vm.cmd[vm.cmd.index(f"net_virtio_user0,path={sock}")] += ",server=1"
    guests.append(vm.start())
    wait_for(sock.exists)
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="vm", spec=f"vhost-user:client,path={sock},fast=1")
    daemon.call("add-port", switch="br0", name="sink", spec="null")
    daemon.call("patch", switch="br0", port1="vm", port2="sink")
    wait_for(lambda: daemon.port_stats("br0")["vm"]["rx_packets"] > 10_000, 30)
    assert vm.stop() == 0
    wait_for(lambda: links(daemon)["vm"] == "down")
    before = daemon.port_stats("br0")["vm"]["rx_packets"]
    vm.start()
    wait_for(lambda: daemon.port_stats("br0")["vm"]["rx_packets"] > before + 10_000, 30)
    assert vm.stop() == 0
    wait_for(lambda: links(daemon)["vm"] == "down")
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["sink"]["tx_packets"] == stats["vm"]["forwarded"]
    assert stats["vm"]["one_copy"] == 0          # to a null port: the packet-buffer path


# ---- learn mode: known unicast between fast ports on the one-copy path ----

MACS = {"vm1": "02:00:00:00:01:01", "vm2": "02:00:00:00:01:02", "vm3": "02:00:00:00:01:03"}
NOBODY = "02:00:00:00:0f:0f"          # never sends: an unknown destination
BCAST = "ff:ff:ff:ff:ff:ff"


def learn_fast_ports(d: Daemon, workdir: Path, names: list[str]) -> None:
    d.call("add-switch", name="br0", mode="learn")
    for vm in names:
        d.call("add-port", switch="br0", name=vm,
               spec=f"vhost-user:server,path={workdir}/{vm}.sock,fast=1")


def mac_guest(workdir: Path, vm: str, mode: str, peer: str | None = None) -> Guest:
    """A testpmd guest on VM's socket whose port has VM's MAC (MACS), sending to PEER."""
    g = Guest(workdir, f"{vm}{mode}", workdir / f"{vm}.sock", mode)
    vdev = f"net_virtio_user0,path={workdir}/{vm}.sock"
    g.cmd[g.cmd.index(vdev)] = f"{vdev},mac={MACS[vm]}"
    if peer is not None:
        g.cmd.append(f"--eth-peer=0,{peer}")
    return g


def fdb(d: Daemon) -> dict[str, str]:
    return {e["mac"].lower(): e["port"] for e in d.call("fdb-show", switch="br0")["entries"]}


def teach(d: Daemon, workdir: Path, guests: list[Guest], vms: list[str]) -> None:
    """Each guest of VMS sends for a moment (to an unknown MAC), so that the switch learns
    its MAC on its port; then it goes away and the counters are cleared."""
    for vm in vms:
        g = mac_guest(workdir, vm, "txonly", NOBODY).start()
        guests.append(g)
        wait_for(lambda vm=vm: fdb(d).get(MACS[vm]) == vm, 30)  # type: ignore[misc]
        assert g.stop() == 0
        guests.remove(g)
        wait_for(lambda vm=vm: links(d)[vm] == "down")  # type: ignore[misc]
    d.call("clear-stats", switch="br0")


def run_stream(d: Daemon, workdir: Path, guests: list[Guest], peer: str,
               receivers: list[str]) -> tuple[int, dict[str, int]]:
    """Receivers (rxonly) on RECEIVERS, then vm1 sending 64 B frames to PEER until the
    switch has 100,000 of them; the frames vm1 sent and what each receiver got."""
    rxs = {}
    for vm in receivers:
        rxs[vm] = mac_guest(workdir, vm, "rxonly").start()
        guests.append(rxs[vm])
        wait_for(lambda vm=vm: links(d)[vm] == "up", 30)  # type: ignore[misc]
    tx = mac_guest(workdir, "vm1", "txonly", peer).start()
    guests.append(tx)
    wait_for(lambda: d.port_stats("br0")["vm1"]["rx_packets"] > 100_000, 60)
    assert tx.stop() == 0
    time.sleep(1.5)                          # the receivers drain their rings
    got = {}
    for vm, g in rxs.items():
        assert g.stop() == 0
        got[vm] = g.counts()["RX-packets"]
    return tx.counts()["TX-packets"], got


@pytest.mark.parametrize("n_ports", [2, 3])
def test_learn_unicast_one_copy(daemon: Daemon, workdir: Path, guests: list[Guest],
                                n_ports: int) -> None:
    """A learn switch of fast ports: once vm2's MAC is learned, vm1's frames to it are
    copied guest to guest (one_copy == forwarded), not flooded to vm3, and counted exactly:
    testpmd TX == vm1 rx == forwarded + drops, forwarded == vm2 tx == testpmd RX. vm1's own
    MAC is learned from frames that took the one-copy path."""
    names = ["vm1", "vm2", "vm3"][:n_ports]
    learn_fast_ports(daemon, workdir, names)
    teach(daemon, workdir, guests, names[1:])
    learned_before = daemon.call("stats", switch="br0")["switches"][0]["learn"]["learned"]
    sent, got = run_stream(daemon, workdir, guests, MACS["vm2"], names[1:])
    stats = daemon.port_stats("br0")
    vm1, vm2 = stats["vm1"], stats["vm2"]
    assert_accounting(stats)
    assert vm1["rx_packets"] == sent > 100_000
    assert {k for k, v in vm1["drops"].items() if v} <= {"tx_full"}
    assert vm1["one_copy"] == vm1["forwarded"] == vm2["tx_packets"] == got["vm2"] > 0
    assert vm1["rx_bytes"] == 64 * sent and vm2["tx_bytes"] == 64 * got["vm2"]
    assert vm1["rx_missed"] == 0
    if n_ports == 3:
        assert stats["vm3"]["tx_packets"] == stats["vm3"]["flood_tx_dropped"] == 0
        assert got["vm3"] == 0
    assert fdb(daemon)[MACS["vm1"]] == "vm1"
    learn = daemon.call("stats", switch="br0")["switches"][0]["learn"]
    assert learn["learned"] == learned_before + 1, learn


@pytest.mark.parametrize("dst", ["broadcast", "unknown", "own"])
def test_learn_fast_mbuf_cases(daemon: Daemon, workdir: Path, guests: list[Guest],
                               dst: str) -> None:
    """Three fast ports in a learn switch, vm1 sending to a broadcast address, to a MAC
    nobody has, or to its own MAC (learned on vm1): the first two are flooded through the
    mbuf path to both others, counted as flood copies; the last is dropped as hairpin, as
    learn mode does for any port. Nothing takes the one-copy path, nothing is lost."""
    learn_fast_ports(daemon, workdir, ["vm1", "vm2", "vm3"])
    teach(daemon, workdir, guests, ["vm1", "vm2", "vm3"])
    peer = {"broadcast": BCAST, "unknown": NOBODY, "own": MACS["vm1"]}[dst]
    sent, got = run_stream(daemon, workdir, guests, peer, ["vm2", "vm3"])
    stats = daemon.port_stats("br0")
    vm1 = stats["vm1"]
    assert_accounting(stats)
    assert vm1["rx_packets"] == sent > 100_000
    assert vm1["one_copy"] == 0 and vm1["rx_missed"] == 0
    if dst == "own":
        assert vm1["drops"]["hairpin"] == vm1["rx_packets"] == vm1["dropped"]
        for vm in ("vm2", "vm3"):
            assert stats[vm]["tx_packets"] == got[vm] == 0
        return
    assert vm1["forwarded"] == vm1["rx_packets"]
    for vm in ("vm2", "vm3"):
        assert stats[vm]["tx_packets"] + stats[vm]["flood_tx_dropped"] == sent
        assert stats[vm]["tx_packets"] == got[vm] > 0


def replay_from_guest(daemon: Daemon, g: Daemon, workdir: Path, frames: list[Ether]) -> None:
    """The guests of the mixed replays, in a second sluiced G: vm2's and vm3's virtio-user
    ports each patched to a capture (WORKDIR/vm2.pcap, vm3.pcap); vm1's sending FRAMES from
    a pcap through a learn switch (which floods them to vm1). Returns once the daemon's vm1
    has received them all."""
    spec = "virtio-user:path={},queue_size=1024"
    for vm in ("vm2", "vm3"):
        g.call("add-switch", name=f"out{vm}", mode="patch")
        g.call("add-port", switch=f"out{vm}", name=f"c{vm}",
               spec=spec.format(workdir / f"{vm}.sock"))
        g.call("add-port", switch=f"out{vm}", name=f"cap{vm}",
               spec=f"pcap:tx={workdir}/{vm}.pcap")
        g.call("patch", switch=f"out{vm}", port1=f"c{vm}", port2=f"cap{vm}")
    g.call("add-switch", name="in", mode="learn")
    g.call("add-port", switch="in", name="c1", spec=spec.format(workdir / "vm1.sock"))
    wait_for(lambda: set(links(daemon).values()) == {"up"}, 30)
    wrpcap(str(workdir / "in.pcap"), frames)
    g.call("add-port", switch="in", name="src", spec=f"pcap:rx={workdir}/in.pcap")
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["rx_packets"] >= len(frames), 20)


def mixed_frames(macs: dict[str, str]) -> list[Ether]:
    """300 frames from M1 in runs and mixes: to fast ports' learned MACs, a pcap port's,
    an unknown one, broadcast and a MAC on vm1 itself; lengths 60 to 1514, every payload
    different."""
    pattern = ["M2", "M2", "U", "M3", "B", "M2", "M4", "M5", "M3", "U", "M2", "M3", "M3"]
    frames = []
    for i in range(300):
        dst = pattern[i % len(pattern)] if i < 260 else "M2"    # a run of one flow last
        size = 60 + (i * 37) % 1455
        head = Ether(src=macs["M1"], dst=macs[dst], type=0x88B5)
        body = bytes((i * 13 + j) & 0xFF for j in range(size - len(head)))
        frames.append(head / Raw(i.to_bytes(2, "big") + body[2:]))
    return frames


def test_learn_mixed_burst_loses_nothing(daemon: Daemon, guest_daemon: Daemon,
                                         workdir: Path) -> None:
    """Bursts mixing destinations on a learn switch of three fast ports and a pcap port:
    frames to MACs on vm2 and vm3 take the one-copy path, frames to the pcap port's MAC (not
    a fast port), to an unknown MAC and to broadcast the mbuf path, frames to a MAC on vm1
    are dropped as hairpin. Every frame is accounted for, and each output gets exactly its
    frames, byte for byte, in order for each destination."""
    macs = {"M1": "02:00:00:00:02:01", "M2": "02:00:00:00:02:02", "M3": "02:00:00:00:02:03",
            "M4": "02:00:00:00:02:04", "M5": "02:00:00:00:02:05", "U": NOBODY, "B": BCAST}
    learn_fast_ports(daemon, workdir, ["vm1", "vm2", "vm3"])
    daemon.call("add-port", switch="br0", name="cap", spec=f"pcap:tx={workdir}/cap.pcap")
    for mac, port in (("M2", "vm2"), ("M3", "vm3"), ("M4", "cap"), ("M5", "vm1")):
        daemon.call("fdb-add", switch="br0", mac=macs[mac], port=port)
    frames = mixed_frames(macs)
    replay_from_guest(daemon, guest_daemon, workdir, frames)
    time.sleep(1)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    vm1 = stats["vm1"]
    to = {k: [f for f in frames if f.dst == macs[k]] for k in macs if k != "M1"}
    flooded = len(to["U"]) + len(to["B"])
    assert vm1["rx_packets"] == len(frames) and vm1["rx_missed"] == 0
    assert vm1["rx_bytes"] == sum(len(f) for f in frames)
    assert vm1["drops"]["hairpin"] == vm1["dropped"] == len(to["M5"])
    assert vm1["forwarded"] == len(frames) - len(to["M5"])
    assert vm1["one_copy"] == len(to["M2"]) + len(to["M3"])
    want = {"vm2": ("M2", "U", "B"), "vm3": ("M3", "U", "B"), "cap": ("M4", "U", "B")}
    for port, dsts in want.items():
        assert stats[port]["tx_packets"] == len(to[dsts[0]]) + flooded, (port, stats[port])
        path = workdir / f"{port}.pcap"
        wait_for(lambda path=path, dsts=dsts: len(rdpcap(str(path))) ==  # type: ignore[misc]
                 len(to[dsts[0]]) + flooded, 10)
        got = rdpcap(str(path))
        for k in dsts:
            have = [bytes(f) for f in got if f.dst == macs[k]]
            assert have == [bytes(f) for f in to[k]], f"{port}: frames to {k} differ"


# UDP destination port -> what the flow switch's rule does with the frame, and where to.
FLOW_MIX_RULES = {
    1: ("output:vm2", "vm2"),                                   # one copy
    2: ("output:vm3", "vm3"),                                   # one copy
    3: ("output:cap", "cap"),                                   # not a fast port: mbuf
    4: ("mod_dl_src:02:00:00:00:03:99,output:vm2", "vm2"),      # a changed header: mbuf
    5: ("drop", None),                                          # action_drop
}


def flow_mixed_frames(interleaved: bool = False) -> list[Ether]:
    """300 UDP frames whose destination ports pick the rules above (6: no rule, a table
    miss), in runs and mixes; lengths 60 to 1514, every payload different. INTERLEAVED:
    before the last run, every frame has a source port of its own (a flow of its own, no
    frame like the one before), which turns the switch to keying whole bursts in passes
    (fwd_flow.c, fast_unicast_keyed)."""
    from scapy.layers.inet import IP
    pattern = [1, 1, 2, 3, 1, 4, 5, 6, 2, 2, 1, 3, 4]
    frames = []
    for i in range(300):
        dport = pattern[i % len(pattern)] if i < 260 else 1     # a run of one flow last
        size = 60 + (i * 37) % 1455
        sport = 5000 + i if interleaved and i < 260 else 5000
        head = Ether(src="02:00:00:00:03:01", dst="02:00:00:00:03:02") / IP(
            src="10.3.0.1", dst="10.3.0.2") / UDP_LAYER(sport=sport, dport=dport)
        body = bytes((i * 13 + j) & 0xFF for j in range(size - len(head)))
        frames.append(head / Raw(i.to_bytes(2, "big") + body[2:]))
    return frames


@pytest.mark.parametrize("interleaved", [False, True], ids=["runs", "interleaved"])
def test_flow_mixed_burst_loses_nothing(daemon: Daemon, guest_daemon: Daemon,
                                        workdir: Path, interleaved: bool) -> None:
    """Bursts mixing flows on a flow switch of three fast ports and a pcap port, the rules on
    UDP ports: frames whose rule sends them unchanged to vm2 or vm3 are decided from their
    headers in the guest's buffer and copied guest to guest; frames to the pcap port, with a
    header change, dropped by a rule or missing every rule take the mbuf path. Every frame is
    counted once, on its port and on its rule, and each output gets exactly its frames, in
    order. Interleaved, the same with every frame a flow of its own."""
    daemon.call("add-switch", name="br0", mode="flow")
    for vm in ("vm1", "vm2", "vm3"):
        daemon.call("add-port", switch="br0", name=vm,
                    spec=f"vhost-user:server,path={workdir}/{vm}.sock,fast=1")
    daemon.call("add-port", switch="br0", name="cap", spec=f"pcap:tx={workdir}/cap.pcap")
    daemon.call("add-flows", switch="br0", flows=[
        f"priority=10,udp,in_port=vm1,tp_dst={p},actions={a}"
        for p, (a, _) in FLOW_MIX_RULES.items()])
    frames = flow_mixed_frames(interleaved)
    replay_from_guest(daemon, guest_daemon, workdir, frames)
    time.sleep(1)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    vm1 = stats["vm1"]
    by = {p: [f for f in frames if f[UDP_LAYER].dport == p] for p in range(1, 7)}
    assert vm1["rx_packets"] == len(frames) and vm1["rx_missed"] == 0
    assert vm1["rx_bytes"] == sum(len(f) for f in frames)
    assert vm1["one_copy"] == len(by[1]) + len(by[2])
    assert vm1["drops"]["action_drop"] == len(by[5])
    assert vm1["drops"]["no_match"] == len(by[6])
    assert vm1["forwarded"] == len(frames) - len(by[5]) - len(by[6])
    rules = {int(f["match"].split("tp_dst=")[1]): f
             for f in daemon.call("dump-flows", switch="br0")["flows"]}
    for p in FLOW_MIX_RULES:
        assert rules[p]["packets"] == len(by[p]), (p, rules[p])
        assert rules[p]["bytes"] == sum(len(f) for f in by[p]), (p, rules[p])
    want = {"vm2": (1, 4), "vm3": (2,), "cap": (3,)}
    for port, dports in want.items():
        n = sum(len(by[p]) for p in dports)
        assert stats[port]["tx_packets"] == n, (port, stats[port])
        path = workdir / f"{port}.pcap"
        wait_for(lambda path=path, n=n: len(rdpcap(str(path))) == n, 10)  # type: ignore[misc]
        got = rdpcap(str(path))
        for p in dports:
            have = [bytes(f) for f in got if f[UDP_LAYER].dport == p]
            sent = [f.copy() for f in by[p]]
            if p == 4:
                for f in sent:
                    f.src = "02:00:00:00:03:99"
            assert have == [bytes(f) for f in sent], f"{port}: frames to port {p} differ"



def two_mask_frames() -> list[Ether]:
    """400 frames, every one a flow of its own: two in three UDP (a source port each, to
    destination port 1 or 2), one in three of EtherType 0x88B5 (a source MAC each); lengths
    60 to 1514, every payload different."""
    from scapy.layers.inet import IP
    frames = []
    for i in range(400):
        size = 60 + (i * 37) % 1455
        if i % 3 == 0:
            head = Ether(src=f"02:00:00:04:{i >> 8:02x}:{i & 0xFF:02x}",
                         dst="02:00:00:00:03:02", type=0x88B5)
        else:
            head = Ether(src="02:00:00:00:03:01", dst="02:00:00:00:03:02") / IP(
                src="10.3.0.1", dst="10.3.0.2") / UDP_LAYER(sport=5000 + i, dport=1 + i % 2)
        body = bytes((i * 11 + j) & 0xFF for j in range(size - len(head)))
        frames.append(head / Raw(i.to_bytes(2, "big") + body[2:]))
    return frames


def test_flow_interleaved_flows_over_two_masks(daemon: Daemon, guest_daemon: Daemon,
                                               workdir: Path) -> None:
    """Interleaved flows whose megaflows have two masks (UDP frames decided on their
    destination port, frames of another EtherType on the EtherType alone): the keyed bursts
    then hash every key and fetch its exact-match set before the lookups
    (fwd_flow.c, fast_unicast_keyed with several masks), where one mask takes one megaflow
    lookup for the burst. Every frame is copied once to the port its rule names, counted on
    that rule, and each output gets exactly its frames, in order."""
    daemon.call("add-switch", name="br0", mode="flow")
    for vm in ("vm1", "vm2", "vm3"):
        daemon.call("add-port", switch="br0", name=vm,
                    spec=f"vhost-user:server,path={workdir}/{vm}.sock,fast=1")
    daemon.call("add-flows", switch="br0", flows=[
        "priority=10,udp,in_port=vm1,tp_dst=1,actions=output:vm2",
        "priority=10,udp,in_port=vm1,tp_dst=2,actions=output:vm3",
        "priority=10,in_port=vm1,dl_type=0x88b5,actions=output:vm3"])
    frames = two_mask_frames()
    replay_from_guest(daemon, guest_daemon, workdir, frames)
    time.sleep(1)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    want = {"vm2": [f for f in frames if UDP_LAYER in f and f[UDP_LAYER].dport == 1],
            "vm3": [f for f in frames if UDP_LAYER not in f or f[UDP_LAYER].dport == 2]}
    vm1 = stats["vm1"]
    assert vm1["rx_packets"] == vm1["forwarded"] == vm1["one_copy"] == len(frames), vm1
    show = next(s for s in daemon.call("show")["switches"] if s["name"] == "br0")
    # The test means something only if the megaflows had two masks.
    assert show["megaflows"]["masks"] >= 2, show["megaflows"]
    other = [f for f in frames if UDP_LAYER not in f]
    counts = sorted(f["packets"] for f in daemon.call("dump-flows", switch="br0")["flows"])
    assert counts == sorted([len(want["vm2"]), len(want["vm3"]) - len(other), len(other)])
    for port, sent in want.items():
        assert stats[port]["tx_packets"] == len(sent), (port, stats[port])
        path, n = workdir / f"{port}.pcap", len(sent)
        wait_for(lambda path=path, n=n: len(rdpcap(str(path))) == n, 10)  # type: ignore[misc]
        assert [bytes(f) for f in rdpcap(str(path))] == [bytes(f) for f in sent], port
