"""Kernel-path peers end to end: sluice-sockets over a Linux bridge, `sluice-bench sockets`,
OVS's userspace datapath without DPDK (ovs-netdev) on veths, linux-bridge in v2v.

Every test makes its own namespaces (named after its PID) and deletes them; the harness
runs clean up theirs, which the tests check.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_bench import assert_cleaned_up, bench, rows

from conftest import REPO
from sluice.bench.schema import validate
from sluice.bench.switches.ovs_netdev import OvsNetdev

TOOL = REPO / "build" / "tools" / "sockets" / "sluice-sockets"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


class Pair:
    """Two namespaces ('containers') with a veth each, joined by a bridge in a third."""

    def __init__(self) -> None:
        tag = f"kt{os.getpid() % 100000}"
        self.tx, self.rx, self.br = f"{tag}-tx", f"{tag}-rx", f"{tag}-br"
        self.made: list[str] = []
        for ns in (self.br, self.tx, self.rx):
            ip("netns", "add", ns)
            self.made.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", self.br, "link", "add", "name", "kbr", "type", "bridge", "stp_state", "0")
        ip("-n", self.br, "link", "set", "kbr", "up")
        for ns, dev, addr in ((self.tx, "ct", "10.77.0.1"), (self.rx, "cr", "10.77.0.2")):
            ip("-n", self.br, "link", "add", f"b{dev}", "type", "veth", "peer", "name", dev,
               "netns", ns)
            ip("-n", self.br, "link", "set", f"b{dev}", "master", "kbr", "up")
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")

    def delete(self) -> None:
        while self.made:
            subprocess.run(["ip", "netns", "del", self.made.pop()], capture_output=True,
                           timeout=20, check=False)


@pytest.fixture
def pair() -> Iterator[Pair]:
    p = Pair()
    yield p
    p.delete()


def summary_of(out: str) -> dict:
    return json.loads([line for line in out.splitlines() if '"tool"' in line][-1])


@pytest.mark.parametrize("api,batch", [("udp", 1), ("udp", 32), ("raw", 1), ("raw", 32)])
def test_sockets_tool_forwards_over_a_bridge(pair: Pair, api: str, batch: int) -> None:
    """Sender and receiver threads in two namespaces: frames arrive, never more than sent."""
    r = subprocess.run([str(TOOL), "--api", api, "--batch", str(batch), "--size", "64",
                        "--duration", "1.5", "--tx-netns", pair.tx, "--rx-netns", pair.rx,
                        "--tx-iface", "ct", "--rx-iface", "cr", "--tx-cpu", "0", "--rx-cpu",
                        "1", "--json"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    s = summary_of(r.stdout)
    assert s["api"] == api and s["batch"] == batch and s["size"] == 64
    assert s["calls"] == ("send/recv" if batch == 1 else "sendmmsg/recvmmsg")
    assert s["rx_packets"] > 0, s
    assert s["rx_packets"] <= s["tx_packets"], s
    assert 0 <= s["loss"] < 1
    assert abs(s["rx_gbps_l2"] - s["rx_pps"] * 64 * 8 / 1e9) < 1e-3
    assert abs(s["rx_gbps_l1"] - s["rx_pps"] * 84 * 8 / 1e9) < 1e-3
    seconds = [json.loads(x) for x in r.stdout.splitlines() if '"monotonic_s"' in x]
    assert len(seconds) == 2                   # 1 s and the last half second


def test_sockets_tool_as_two_processes(pair: Pair, tmp_path: Path) -> None:
    """Roles rx and tx as two processes, each run inside its namespace."""
    out = tmp_path / "rx.json"
    rx = subprocess.Popen(["ip", "netns", "exec", pair.rx, str(TOOL), "--api", "udp",
                           "--role", "rx", "--duration", "3", "--out", str(out)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        tx = subprocess.run(["ip", "netns", "exec", pair.tx, str(TOOL), "--api", "udp",
                             "--role", "tx", "--batch", "8", "--duration", "1"],
                            capture_output=True, text=True, timeout=20)
    finally:
        rx.wait(20)
    assert tx.returncode == 0 and rx.returncode == 0, tx.stderr
    sent, got = summary_of(tx.stdout), json.loads(out.read_text())
    assert sent["role"] == "tx" and got["role"] == "rx"
    assert 0 < got["rx_packets"] <= sent["tx_packets"]


def test_sockets_tool_refuses_raw_without_devices() -> None:
    r = subprocess.run([str(TOOL), "--api", "raw"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and "--tx-iface" in r.stderr


def test_bench_sockets_writes_kernel_path_rows(tmp_path: Path) -> None:
    """`sluice-bench sockets`: one row per api and batch, schema-valid, namespaces gone."""
    out = tmp_path / "sockets"
    r = bench("sockets", "--api", "udp,raw", "--batch", "32", "--sizes", "64",
              "--duration", "2", "--warmup", "0", "--trials", "1", "--out", str(out),
              timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert {x["key"] for x in got} == {"sockets:udp-b32", "sockets:raw-b32"}
    for x in got:
        validate(x)
        assert x["kernel_path"] and x["scenario"] == "v2v" and x["phy"] == "veth"
        assert 0 < x["rx_pps"] <= x["tx_pps"] * 1.01, x
        assert "batch 32" in x["api"] and set(x["cpu_busy_s"]) >= {"cpu0", "cpu1"}
    assert "sockets:udp-b32" in (out / "report.md").read_text()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "-tx" not in left and "-rx" not in left and "-br" not in left, left


def test_ovs_netdev_forwards_p2p_veth(tmp_path: Path) -> None:
    """OVS's userspace datapath without DPDK, with afxdp ports (a PMD thread) and with
    system ports (the main thread), forwards the generator's frames between two veths."""
    why = OvsNetdev.available(REPO)
    if why is not None:
        pytest.skip(why)
    out = tmp_path / "ovs"
    # Interleaved: each switch's trial alone; 2 s show it forwards.
    r = bench("run", "--scenario", "p2p", "--phy", "veth", "--switch",
              "ovs-netdev:flows,ovs-netdev:normal-system", "--sizes", "64", "--duration", "2",
              "--trials", "1", "--warmup", "0", "--no-report", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert {x["key"] for x in got} == {"ovs-netdev:flows", "ovs-netdev:normal-system"}
    kinds = {x["key"]: x["port_kind"] for x in got}
    assert kinds["ovs-netdev:normal-system"] == "veth, OVS system port"
    assert kinds["ovs-netdev:flows"] in ("veth, OVS afxdp port", "veth, OVS system port")
    for x in got:
        assert x["kernel_path"] and x["method"] == "interleaved"
        assert 0 < x["rx_pps"] <= x["tx_pps"] * 1.01, x
    assert_cleaned_up(out)


def test_linux_bridge_v2v_over_the_containers_veths(tmp_path: Path) -> None:
    """linux-bridge in v2v: run apart as v2v/veth (kernel_path), while sluice keeps its
    vhost-user v2v in the same command."""
    out = tmp_path / "lb"
    # Each switch's trial alone (the kernel path is run apart); 2 s show it forwards.
    r = bench("run", "--scenario", "v2v", "--switch", "linux-bridge,sluice:patch", "--sizes",
              "64", "--duration", "2", "--trials", "1", "--warmup", "0", "--no-report",
              "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    got = {x["key"]: x for x in rows(out)}
    lb, sl = got["linux-bridge:learn"], got["sluice:patch"]
    assert (lb["scenario"], lb["phy"], lb["kernel_path"]) == ("v2v", "veth", True)
    assert (sl["scenario"], sl["phy"], sl["kernel_path"]) == ("v2v", "", False)
    assert 0 < lb["rx_pps"] <= lb["tx_pps"] * 1.01, lb
    assert "containers' veth pairs" in lb["steering"]
    assert_cleaned_up(out)


def test_linux_bridge_loopback_chains_veth_vnfs_through_one_bridge_per_segment(
        tmp_path: Path) -> None:
    """loopback-2 over veth: VNFs with two veth ports each, three bridges, frames through."""
    out = tmp_path / "lbloop"
    # One switch, one trial: 2 s show frames come through.
    r = bench("run", "--scenario", "loopback-2", "--phy", "veth", "--switch", "linux-bridge",
              "--sizes", "64", "--duration", "2", "--trials", "1", "--warmup", "0",
              "--no-report", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    # One trial gives a row per placement label it saw (two when the vCPUs moved mid-trial).
    got = rows(out)
    assert 1 <= len(got) <= 3 and len({x["trial"] for x in got}) == 1, got
    for x in got:
        assert x["vnf"] == "inline" and x["kernel_path"]
        assert x["port_kind"] == "veth (kernel), VNFs on veths"
        assert 0 < x["rx_pps"] <= x["tx_pps"] * 1.01, x
    assert_cleaned_up(out)
