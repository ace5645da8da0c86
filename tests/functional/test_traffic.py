"""Packets through a patch switch, with real clients: scapy over tap ports, pcap files, and
dpdk-testpmd over vhost-user. Counters on both ends and in the daemon must agree."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from scapy.all import IP, UDP, AsyncSniffer, Ether, Raw, rdpcap, sendp, wrpcap  # type: ignore

from conftest import (
    TESTPMD,
    Daemon,
    assert_accounting,
    remove_hugepage_files,
    stop_process,
    wait_for,
)


def quiet_interface(name: str) -> None:
    """Brings a tap up without IPv6, so the kernel sends no traffic of its own on it."""
    subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], check=False)
    subprocess.run(["ip", "link", "set", name, "up"], check=True)


def frames(n: int, tag: bytes) -> list[Ether]:
    return [Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.9.0.1",
            dst="10.9.0.2") / UDP(sport=1000 + i, dport=9) / Raw(tag + b"%05d" % i)
            for i in range(n)]


def test_tap_patch_with_scapy(daemon: Daemon) -> None:
    a, b = f"sltapA{os.getpid() % 1000}", f"sltapB{os.getpid() % 1000}"
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="ta", spec=f"tap:name={a}")
    daemon.call("add-port", switch="br0", name="tb", spec=f"tap:name={b}")
    quiet_interface(a)
    quiet_interface(b)
    tag = b"sluice-tap"
    sent = frames(50, tag)

    # Not patched yet: what enters is dropped, and counted as unpatched.
    sendp(sent[:5], iface=a, verbose=False)
    wait_for(lambda: daemon.port_stats("br0")["ta"]["drops"]["unpatched"] >= 5)

    daemon.call("patch", switch="br0", port1="ta", port2="tb")
    for src, dst in ((a, b), (b, a)):
        sniffer = AsyncSniffer(iface=dst, lfilter=lambda p: tag in bytes(p))
        sniffer.start()
        time.sleep(0.3)
        sendp(sent, iface=src, verbose=False)
        time.sleep(1.0)
        got = sniffer.stop()
        assert [bytes(p) for p in got] == [bytes(p) for p in sent], (src, dst)

    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["ta"]["forwarded"] >= 50 and stats["tb"]["forwarded"] >= 50
    assert stats["tb"]["tx_packets"] >= 50 and stats["ta"]["tx_packets"] >= 50


def test_tap_to_pcap_exact_frames(daemon: Daemon, workdir: Path) -> None:
    tap = f"sltapP{os.getpid() % 1000}"
    sent = frames(200, b"sluice-pcap")
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="in", spec=f"tap:name={tap}")
    daemon.call("add-port", switch="br0", name="out", spec=f"pcap:tx={workdir}/out.pcap")
    daemon.call("patch", switch="br0", port1="in", port2="out")
    quiet_interface(tap)
    sendp(sent, iface=tap, verbose=False)
    wait_for(lambda: daemon.port_stats("br0")["out"]["tx_packets"] >= 200)
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    daemon.call("del-port", switch="br0", name="out")   # flushes and closes the file
    got = [bytes(p) for p in rdpcap(str(workdir / "out.pcap")) if b"sluice-pcap" in bytes(p)]
    assert got == [bytes(p) for p in sent]


def test_unpatched_pcap_input_all_counted(daemon: Daemon, workdir: Path) -> None:
    wrpcap(str(workdir / "in.pcap"), frames(300, b"x"))
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="in", spec=f"pcap:rx={workdir}/in.pcap")
    wait_for(lambda: daemon.port_stats("br0")["in"]["rx_packets"] >= 300)
    time.sleep(0.2)
    stats = daemon.port_stats("br0")
    assert stats["in"]["rx_packets"] == 300
    assert stats["in"]["drops"]["unpatched"] == 300
    assert stats["in"]["rx_bytes"] == sum(len(f) for f in frames(300, b"x"))
    assert_accounting(stats)


def pmd_command(prefix: str, sock: Path, mode: str, cpu: int) -> list[str]:
    return [TESTPMD, "--lcores", f"0@{cpu},1@{cpu}", "--no-pci", "--file-prefix", prefix,
            "--single-file-segments", "--in-memory", "-m", "256",
            "--vdev", f"net_virtio_user0,path={sock}", "--log-level=*:warning", "--",
            f"--forward-mode={mode}", "--stats-period", "1", "--nb-cores", "1",
            "--txd", "512", "--rxd", "512"]


def forward_stats(output: str) -> dict[str, int]:
    """The final 'Forward statistics for port 0' block of testpmd's output."""
    block = output.rsplit("Forward statistics for port 0", 1)[-1]
    found = {}
    for key in ("RX-packets", "RX-dropped", "TX-packets", "TX-dropped"):
        m = re.search(key + r":\s+(\d+)", block)
        assert m, output[-3000:]
        found[key] = int(m.group(1))
    return found


@pytest.fixture
def testpmd_logs(workdir: Path):  # type: ignore[no-untyped-def]
    started: list[tuple[subprocess.Popen[bytes], str]] = []

    def start(name: str, sock: Path, mode: str) -> subprocess.Popen[bytes]:
        prefix = f"sltp{name}{id(started) % 10000}"
        log = open(workdir / f"testpmd-{name}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(pmd_command(prefix, sock, mode, 0), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        started.append((proc, prefix))
        return proc

    yield start
    for proc, prefix in started:
        stop_process(proc, sig=2)
        remove_hugepage_files(prefix)


def test_vhost_user_with_testpmd(daemon: Daemon, workdir: Path, testpmd_logs) -> None:  # type: ignore[no-untyped-def]
    daemon.call("add-switch", name="br0")
    for vm in ("vm1", "vm2"):
        daemon.call("add-port", switch="br0", name=vm,
                    spec=f"vhost-user:server,path={workdir}/{vm}.sock")
    daemon.call("patch", switch="br0", port1="vm1", port2="vm2")
    rx = testpmd_logs("rx", workdir / "vm2.sock", "rxonly")
    wait_for(lambda: {p["name"]: p["link"] for p in daemon.call("list-ports")}["vm2"] == "up",
             30)
    tx = testpmd_logs("tx", workdir / "vm1.sock", "txonly")
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["rx_packets"] > 100_000, 60)
    time.sleep(1)
    assert stop_process(tx, sig=2) == 0
    # Let the receiver drain what the switch already put in its ring, then stop it.
    time.sleep(1.5)
    assert stop_process(rx, sig=2) == 0
    sent = forward_stats((workdir / "testpmd-tx.log").read_text())
    got = forward_stats((workdir / "testpmd-rx.log").read_text())
    stats = daemon.port_stats("br0")
    vm1, vm2 = stats["vm1"], stats["vm2"]
    assert_accounting(stats)
    assert vm1["rx_packets"] == sent["TX-packets"]
    assert vm2["tx_packets"] == got["RX-packets"]
    assert vm1["rx_packets"] == vm2["tx_packets"] + vm1["dropped"]
    assert {k for k, v in vm1["drops"].items() if v} <= {"tx_full"}
    assert vm2["tx_packets"] > 0
    assert vm1["rx_bytes"] == 64 * vm1["rx_packets"]    # testpmd txonly: 64 B frames
