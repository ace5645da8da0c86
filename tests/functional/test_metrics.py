"""`sluicectl metrics --listen`: the real daemon with a patch switch (pcap ports) and a learn
switch (tap ports, scapy frames), the exporter as its own process, scraped over HTTP with
urllib and read with prometheus_client's parser. Every counter must equal `stats`; a daemon
that is gone gives sluice_up 0."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scapy.all import IP, UDP, Ether, Raw, conf, sendp, wrpcap  # type: ignore

from conftest import REPO, Daemon, assert_accounting, stop_process, wait_for

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
        text = answer.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


@pytest.fixture
def exporter(daemon: Daemon, workdir: Path) -> Iterator[str]:
    """sluicectl metrics --listen on a free port; yields its URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    log = open(workdir / "exporter.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "sluice.ctl", "--socket",
                             str(daemon.socket), "--timeout", "5", "metrics", "--listen",
                             f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}/metrics"

    def answers() -> bool:
        try:
            urllib.request.urlopen(url, timeout=1).close()
        except OSError:
            return False
        return True

    wait_for(answers)
    yield url
    stop_process(proc)
    log.close()


def frames(n: int, src: str, dst: str) -> list[Ether]:
    return [Ether(src=src, dst=dst) / IP(src="10.9.0.1", dst="10.9.0.2")
            / UDP(sport=1000 + i, dport=9) / Raw(b"metrics%05d" % i) for i in range(n)]


def test_metrics_equal_stats(daemon: Daemon, workdir: Path, exporter: str) -> None:
    # A patch switch: 120 frames from a pcap file, half of them before the patch (dropped
    # as unpatched), and a learn switch fed by scapy over a tap.
    daemon.call("add-switch", name="p0")
    daemon.call("add-port", switch="p0", name="out", spec=f"pcap:tx={workdir}/out.pcap")
    wrpcap(str(workdir / "in.pcap"), frames(120, "02:00:00:00:00:01", "02:00:00:00:00:02"))
    daemon.call("add-port", switch="p0", name="in", spec=f"pcap:rx={workdir}/in.pcap")
    wait_for(lambda: daemon.port_stats("p0")["in"]["rx_packets"] == 120)

    tap = f"slmet{os.getpid() % 10000}"
    daemon.call("add-switch", name="l2", mode="learn")
    daemon.call("add-port", switch="l2", name="t", spec=f"tap:name={tap}")
    daemon.call("add-port", switch="l2", name="sink", spec=f"pcap:tx={workdir}/sink.pcap")
    subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{tap}.disable_ipv6=1"], check=False)
    subprocess.run(["ip", "link", "set", tap, "up"], check=True)
    conf.ifaces.reload()
    sendp(frames(30, "02:00:00:00:01:01", "02:00:00:00:01:02"), iface=tap, verbose=False)
    wait_for(lambda: daemon.port_stats("l2")["sink"]["tx_packets"] >= 30)
    time.sleep(0.3)

    got = scrape(exporter)
    stats: dict[str, Any] = daemon.call("stats")
    assert got[("sluice_up", frozenset())] == 1
    compared = 0
    for s in stats["switches"]:
        sw = frozenset({("switch", s["name"]), ("mode", s["mode"])})
        for key, name in (("rx_packets", "rx_packets"), ("tx_packets", "tx_packets"),
                          ("forwarded", "forwarded_packets"),
                          ("flood_tx_dropped", "flood_tx_dropped_packets")):
            assert got[(f"sluice_switch_{name}_total", sw)] == s[key], (s["name"], key)
        for reason, n in s["drops"].items():
            assert got[("sluice_switch_dropped_packets_total", sw | {("reason", reason)})] == n
        for p in s["ports"]:
            ids = frozenset({("switch", s["name"]), ("port", p["name"])})
            for key, name in (("rx_packets", "rx_packets"), ("rx_bytes", "rx_bytes"),
                              ("tx_packets", "tx_packets"), ("tx_bytes", "tx_bytes"),
                              ("forwarded", "forwarded_packets"),
                              ("flood_tx_dropped", "flood_tx_dropped_packets"),
                              ("rx_missed", "rx_missed_packets")):
                assert got[(f"sluice_port_{name}_total", ids)] == p[key], (p["name"], key)
                compared += 1
            assert set(p["drops"]) == set(stats["drop_reasons"])
            for reason, n in p["drops"].items():
                assert got[("sluice_port_dropped_packets_total", ids | {("reason", reason)})] == n
                compared += 1
        assert_accounting({p["name"]: p for p in s["ports"]})
    assert compared >= 4 * (7 + len(stats["drop_reasons"]))

    p0_in = frozenset({("switch", "p0"), ("port", "in")})
    assert got[("sluice_port_rx_packets_total", p0_in)] == 120
    assert got[("sluice_port_dropped_packets_total", p0_in | {("reason", "unpatched")})] == 120

    l2 = [s for s in stats["switches"] if s["name"] == "l2"][0]
    lab = frozenset({("switch", "l2")})
    assert got[("sluice_learn_entries", lab)] == l2["entries"] >= 1
    for event, n in l2["learn"].items():
        assert got[(f"sluice_learn_{event}_total", lab)] == n
    assert got[("sluice_learn_learned_total", lab)] >= 1

    for w in stats["workers"]:
        ids = frozenset({("worker", str(w["id"])), ("lcore", str(w["lcore"])),
                         ("cpu", str(w["cpu"]))})
        # The workers run on: their counters only grow between the two reads.
        assert got[("sluice_worker_packets_total", ids)] == w["packets"] >= 150
        assert 0 < got[("sluice_worker_busy_cycles_total", ids)] <= w["busy_cycles"]
        assert 0 < got[("sluice_worker_idle_cycles_total", ids)] <= w["idle_cycles"]


def test_daemon_down_gives_up_0(daemon: Daemon, exporter: str) -> None:
    assert scrape(exporter)[("sluice_up", frozenset())] == 1
    assert daemon.stop() == 0
    got = scrape(exporter)
    assert got == {("sluice_up", frozenset()): 0}
