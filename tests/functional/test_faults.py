"""The fault suite (issue 15): each defect found in review, driven with real clients.

Every test asserts that the daemon still answers and that every packet is counted.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import (
    TESTPMD,
    Daemon,
    RpcError,
    assert_accounting,
    remove_hugepage_files,
    stop_process,
    wait_for,
)

JUMBO = 4000   # bytes in the mbuf (no FCS): a two-segment chain in sluiced's 2 KB mbufs

Start = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def testpmd(workdir: Path) -> Iterator[Start]:
    """Starts dpdk-testpmd VMs over virtio-user on CPU 0; ends them (SIGINT) at teardown."""
    started: list[tuple[subprocess.Popen[bytes], str]] = []

    def start(name: str, mac: str, *mode: str) -> subprocess.Popen[bytes]:
        prefix = f"slft{os.getpid()}{name}{len(started)}"
        with open(workdir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [TESTPMD, "--lcores", "0@0,1@0", "--no-pci", "--file-prefix", prefix,
                 "--single-file-segments", "--in-memory", "-m", "256",
                 "--vdev", f"net_virtio_user0,path={workdir}/{name}.sock,mac={mac}",
                 "--log-level=*:warning", "--", "--stats-period", "1", "--nb-cores", "1",
                 "--txd", "512", "--rxd", "512", "--mbuf-size=5000",
                 "--total-num-mbufs=8192", *mode],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        started.append((proc, prefix))
        return proc

    yield start
    for proc, prefix in started:
        stop_process(proc, sig=2)
        remove_hugepage_files(prefix)


def link_up(daemon: Daemon, port: str) -> bool:
    return {p["name"]: p["link"] for p in daemon.call("list-ports")}[port] == "up"


def test_flood_of_multisegment_frames(daemon: Daemon, workdir: Path, testpmd: Start) -> None:
    """A learn switch floods 4 KB broadcasts from vm1 to vm2 and vm3 (vhost-user, testpmd on
    the other side). vhost receives each frame as a two-mbuf chain and the flood shares the
    chain between both outputs: every segment needs a reference per copy, or the first
    output to free its copy returns the second segment while the other still sends it, and
    the pool hands it out twice (seen: frames counted with 3x their size, 'malformed' drops,
    then a data path that moved nothing ever again)."""
    daemon.call("add-switch", name="br0", mode="learn")
    for vm in ("vm1", "vm2", "vm3"):
        daemon.call("add-port", switch="br0", name=vm,
                    spec=f"vhost-user:server,path={workdir}/{vm}.sock")
    for i, vm in ((2, "vm2"), (3, "vm3")):
        testpmd(vm, f"02:00:00:00:00:0{i}", "--forward-mode=rxonly")
        wait_for(lambda vm=vm: link_up(daemon, vm), 30)
    sender = testpmd("vm1", "02:00:00:00:00:01", "--forward-mode=txonly",
                     f"--txpkts={JUMBO}", "--eth-peer=0,ff:ff:ff:ff:ff:ff")
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["rx_packets"] > 200_000, 60)
    stop_process(sender, sig=2)

    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    vm1 = stats["vm1"]
    assert vm1["dropped"] == 0, vm1
    assert vm1["rx_bytes"] == vm1["rx_packets"] * JUMBO, vm1
    for out in ("vm2", "vm3"):
        o = stats[out]
        assert o["tx_packets"] + o["flood_tx_dropped"] == vm1["forwarded"], (out, o, vm1)
        assert o["tx_bytes"] == o["tx_packets"] * JUMBO, (out, o)

    # The data path still moves frames: a second sender's broadcasts reach both outputs.
    before = daemon.port_stats("br0")
    testpmd("vm1", "02:00:00:00:00:01", "--forward-mode=txonly", f"--txpkts={JUMBO}",
            "--eth-peer=0,ff:ff:ff:ff:ff:ff")
    wait_for(lambda: all(daemon.port_stats("br0")[o]["tx_packets"]
                         > before[o]["tx_packets"] + 10_000 for o in ("vm2", "vm3")), 30)
    assert daemon.call("version")["version"]


def test_counters_consistent_under_traffic(daemon: Daemon, workdir: Path,
                                           testpmd: Start) -> None:
    """stats and clear-stats read each worker's counters between its bursts: with traffic
    flowing, every reading has rx = forwarded + dropped on every port (a reading in the
    middle of a burst used to see its rx but not yet its forwarded packets)."""
    daemon.call("add-switch", name="br0", mode="patch")
    for vm in ("vm1", "vm2"):
        daemon.call("add-port", switch="br0", name=vm,
                    spec=f"vhost-user:server,path={workdir}/{vm}.sock")
    daemon.call("patch", switch="br0", port1="vm1", port2="vm2")
    testpmd("vm2", "02:00:00:00:00:02", "--forward-mode=rxonly")
    wait_for(lambda: link_up(daemon, "vm2"), 30)
    testpmd("vm1", "02:00:00:00:00:01", "--forward-mode=txonly")
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["rx_packets"] > 100_000, 60)
    uneven, moving = [], 0
    for i in range(300):
        if i % 10 == 0:
            daemon.call("clear-stats", switch="br0")
        time.sleep(0.003)
        stats = daemon.port_stats("br0")
        moving += stats["vm1"]["rx_packets"] > 0
        uneven += [(name, p["rx_packets"] - p["forwarded"] - p["dropped"])
                   for name, p in stats.items()
                   if p["rx_packets"] != p["forwarded"] + p["dropped"]]
    assert moving > 100, "traffic did not flow while the counters were read"
    assert not uneven, uneven[:10]


def test_buffers_grow_with_ports_and_come_back(workdir: Path) -> None:
    """Each tap port fills its receive ring at start (1,023 mbufs) and may hold a transmit
    ring's worth: with pools of 4,096, six taps used to run the one pool dry. Now each port
    reserves what it can hold and pools are added to cover it; flooding works on all of
    them, nothing fails to allocate, and once the ports are gone every buffer is back."""
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    from scapy.sendrecv import sendp

    daemon = Daemon(workdir, "pools", ["--mbufs", "4096"]).start()
    taps = [f"slpl{os.getpid() % 10000}x{i}" for i in range(6)]
    try:
        # The workers reserve room of their own (segments of kernel super-frames).
        idle = sum(p["reserved"] for p in daemon.call("show")["pools"])
        daemon.call("add-switch", name="br0", mode="learn")
        for i, tap in enumerate(taps):
            daemon.call("add-port", switch="br0", name=f"t{i}", spec=f"tap:name={tap}")
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{tap}.disable_ipv6=1"],
                           check=False)
            subprocess.run(["ip", "link", "set", tap, "up"], check=True)
        pools = daemon.call("show")["pools"]
        assert len(pools) >= 2, pools
        assert all(p["in_use"] <= p["size"] and p["alloc_failures"] == 0 for p in pools)
        assert sum(p["in_use"] for p in pools) >= 6 * 1000   # the receive rings
        daemon.call("clear-stats")
        frame = Ether(src="02:00:00:00:aa:01", dst="ff:ff:ff:ff:ff:ff") / Raw(b"x" * 60)
        sendp([frame] * 20, iface=taps[0], verbose=False)
        wait_for(lambda: all(daemon.port_stats("br0")[f"t{i}"]["tx_packets"] >= 20
                             for i in range(1, 6)), 10)
        assert_accounting(daemon.port_stats("br0"))
        assert all(p["alloc_failures"] == 0 for p in daemon.call("show")["pools"])
        for i in range(6):
            daemon.call("del-port", switch="br0", name=f"t{i}")
        pools = daemon.call("show")["pools"]
        assert [p["in_use"] for p in pools] == [0] * len(pools)
        assert sum(p["reserved"] for p in pools) == idle
    finally:
        assert daemon.stop() == 0, daemon.log.read_text()


def test_hugepages_exhausted(workdir: Path) -> None:
    """With DPDK's memory capped (--socket-limit), ports are added until no pool can be made
    for the next: that add-port gets a clear error and the daemon goes on; deleting a port
    gives its room back, and a port fits again."""
    d = Daemon(workdir, "mem", ["--mbufs", "8192", "--", "--socket-limit", "48"]).start()
    try:
        d.call("add-switch", name="br0", mode="patch")
        added, error = 0, None
        for i in range(16):
            try:
                d.call("add-port", switch="br0", name=f"r{i}",
                       spec=f"ring:name=slmem{os.getpid()}r{i}")
                added += 1
            except RpcError as e:
                error = e
                break
        assert error is not None and added >= 2, (added, error)
        assert "no memory for" in error.message and "packet buffers" in error.message
        assert d.call("version")["version"]
        d.call("del-port", switch="br0", name="r0")
        d.call("add-port", switch="br0", name="again", spec=f"ring:name=slmem{os.getpid()}a")
        assert [p["alloc_failures"] for p in d.call("show")["pools"]] == \
            [0] * len(d.call("show")["pools"])
    finally:
        assert d.stop() == 0, d.log.read_text()


def test_vnf_killed_and_restarted_under_traffic(daemon: Daemon, workdir: Path,
                                                testpmd: Start) -> None:
    """The receiving VNF is killed (SIGKILL) under traffic and started again: the daemon
    answers throughout, what could not be sent is counted, and traffic reaches the new VNF."""
    daemon.call("add-switch", name="br0", mode="patch")
    for vm in ("vm1", "vm2"):
        daemon.call("add-port", switch="br0", name=vm,
                    spec=f"vhost-user:server,path={workdir}/{vm}.sock")
    daemon.call("patch", switch="br0", port1="vm1", port2="vm2")
    receiver = testpmd("vm2", "02:00:00:00:00:02", "--forward-mode=rxonly")
    wait_for(lambda: link_up(daemon, "vm2"), 30)
    sender = testpmd("vm1", "02:00:00:00:00:01", "--forward-mode=txonly")
    wait_for(lambda: daemon.port_stats("br0")["vm2"]["tx_packets"] > 100_000, 60)
    receiver.kill()
    receiver.wait()
    wait_for(lambda: not link_up(daemon, "vm2"), 10)
    lost = daemon.port_stats("br0")["vm1"]["dropped"]
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["dropped"] > lost + 10_000, 20)
    assert daemon.call("version")["version"]
    testpmd("vm2", "02:00:00:00:00:02", "--forward-mode=rxonly")
    wait_for(lambda: link_up(daemon, "vm2"), 30)
    sent = daemon.port_stats("br0")["vm2"]["tx_packets"]
    wait_for(lambda: daemon.port_stats("br0")["vm2"]["tx_packets"] > sent + 100_000, 30)
    stop_process(sender, sig=2)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["vm1"]["drops"]["link_down"] + stats["vm1"]["drops"]["tx_full"] > 0


def test_flood_of_a_million_macs(daemon: Daemon, workdir: Path) -> None:
    """sluice-gen sends from 1,000,000 distinct source MACs into a learn switch: the table
    fills to its limit and says so (table_full), the control socket keeps answering, and
    every frame is counted."""
    from gen_helpers import GEN

    daemon.call("add-switch", name="br0", mode="learn", max_entries=65536)
    for m in ("m1", "m2"):
        daemon.call("add-port", switch="br0", name=m,
                    spec=f"memif:role=server,socket={workdir}/{m}.sock")
    gen = subprocess.Popen(
        [str(GEN), "--cpu", "0",
         "--port", f"memif:role=client,socket={workdir}/m1.sock",
         "--port", f"memif:role=client,socket={workdir}/m2.sock",
         "--flows", "1000000", "--vary", "mac", "--rate", "1Mpps", "--duration", "4",
         "--out", str(workdir / "gen.json")],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    slowest = 0.0
    try:
        while gen.poll() is None:
            t = time.monotonic()
            assert daemon.call("version")["version"]
            slowest = max(slowest, time.monotonic() - t)
            time.sleep(0.05)
    finally:
        stop_process(gen)
    assert gen.returncode == 0
    assert slowest < 1.0, slowest
    stats = daemon.call("stats", switch="br0")["switches"][0]
    ports = {p["name"]: p for p in stats["ports"]}
    assert_accounting(ports)
    assert sum(p["rx_packets"] for p in ports.values()) > 1_000_000
    assert stats["entries"] <= 65536
    assert stats["learn"]["table_full"] > 0, stats["learn"]
