"""Flow mode with the real daemon and real frames (issue 14's tests): groups, meters,
timeouts, replace-flows under traffic, rule management (del-flows, mod-flows, add-flows),
trace on every kind of switch, restart with the state file, and sluicectl's flow verbs.
Match fields and actions one by one are in test_flow_match.py and test_flow_actions.py.
Every test ends by checking the counters: rx = forwarded + dropped on each port, the drop
reasons adding up."""

from __future__ import annotations

import collections
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from conftest import REPO, Daemon, RpcError, wait_for
from flow_helpers import MARK, FlowTaps

A, B, C = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:0c"
SLUICECTL = REPO / "bin" / "sluicectl"


def udp(n: int = 0, src: str = A, dst: str = B, sport: int | None = None,
        nw_src: str = "10.0.0.1") -> Packet:
    return Ether(src=src, dst=dst) / IP(src=nw_src, dst="10.0.0.2") / UDP(
        sport=1000 + n if sport is None else sport, dport=2000) / Raw(MARK + b"%06d" % n)


@pytest.fixture
def taps(daemon: Daemon) -> Iterator[FlowTaps]:
    t = FlowTaps(daemon, "br0", 4)
    yield t
    t.close()
    t.check_accounting()


def flows_of(d: Daemon, switch: str = "br0", **kw: Any) -> list[dict[str, Any]]:
    return d.call("dump-flows", switch=switch, **kw)["flows"]


def link_of(taps: FlowTaps, port: str) -> str:
    return next(p["link"] for p in taps.show()["ports"] if p["name"] == port)


def set_kernel_link(taps: FlowTaps, port: str, state: str) -> None:
    iface = taps.ifaces[taps.ports.index(port)]
    subprocess.run(["ip", "link", "set", iface, state], check=True)


# ---- groups ----

def test_group_all_replicates_each_bucket_its_own_changes(taps: FlowTaps) -> None:
    d = taps.daemon
    d.call("add-group", switch="br0", group="group_id=1,type=all,bucket=output:p1,"
           f"bucket=mod_dl_dst:{C},output:p2,bucket=output:p3")
    taps.flows("in_port=p0,actions=group:1")
    f = udp()
    got = taps.out("p0", f)
    assert set(got) == {"p1", "p2", "p3"} and all(len(v) == 1 for v in got.values()), got
    assert bytes(got["p1"][0]) == bytes(f) == bytes(got["p3"][0])   # the change stays in
    assert got["p2"][0].dst == C                                    # its bucket
    g = d.call("dump-groups", switch="br0")["groups"]
    assert [(x["group_id"], x["packets"]) for x in g] == [(1, 1)], g


def test_group_select_spreads_flows_by_weight_and_keeps_them(taps: FlowTaps) -> None:
    d, n = taps.daemon, 300
    d.call("add-group", switch="br0", group="group_id=7,type=select,"
           "bucket=weight:3,output:p1,bucket=weight:1,output:p2,bucket=weight:0,output:p3")
    taps.flows("in_port=p0,actions=group:7")
    where: dict[int, str] = {}
    for i in range(n):
        taps.send("p0", udp(i, sport=5000 + i, nw_src=f"10.1.{i // 250}.{i % 250 + 1}"))
    wait_for(lambda: taps.port_stats()["p0"]["rx_packets"] >= n, 10)
    got = taps.received(0.2)
    assert not got["p0"] and not got["p3"], got              # weight 0: never chosen
    for port in ("p1", "p2"):
        for f in got[port]:
            where[Ether(f)[UDP].sport - 5000] = port
    assert len(where) == n, len(where)
    share = collections.Counter(where.values())
    assert 0.6 * n <= share["p1"] <= 0.88 * n, share         # 3:1 is 75 % / 25 %
    # Each flow stays on its bucket: the same flows again, in another order.
    for i in reversed(range(n)):
        taps.send("p0", udp(i, sport=5000 + i, nw_src=f"10.1.{i // 250}.{i % 250 + 1}"))
    wait_for(lambda: taps.port_stats()["p0"]["rx_packets"] >= 2 * n, 10)
    got = taps.received(0.2)
    again = {Ether(f)[UDP].sport - 5000: port for port in ("p1", "p2") for f in got[port]}
    assert again == where


def test_group_indirect_and_groups_chained(taps: FlowTaps) -> None:
    d = taps.daemon
    d.call("add-group", switch="br0", group="group_id=2,type=indirect,bucket=output:p3")
    d.call("add-group", switch="br0", group="group_id=3,type=all,bucket=group:2,"
           "bucket=output:p1")
    taps.flows("in_port=p0,actions=group:2", "in_port=p1,actions=group:3")
    taps.one("p0", udp(), "p3")
    got = taps.out("p1", udp(1))       # group 3's bucket output:p1 is the input: skipped
    assert set(got) == {"p3"}, got
    d.call("mod-group", switch="br0", group="group_id=2,type=indirect,bucket=output:p2")
    taps.one("p0", udp(2), "p2")


def test_group_fast_failover_follows_links(taps: FlowTaps) -> None:
    d = taps.daemon
    d.call("add-group", switch="br0", group="group_id=5,type=fast_failover,"
           "bucket=watch_port:p1,output:p1,bucket=watch_port:p2,output:p2")
    taps.flows("in_port=p0,actions=group:5")
    taps.one("p0", udp(0), "p1")
    try:
        set_kernel_link(taps, "p1", "down")
        wait_for(lambda: link_of(taps, "p1") == "down", 10)
        taps.one("p0", udp(1), "p2")
        set_kernel_link(taps, "p2", "down")
        wait_for(lambda: link_of(taps, "p2") == "down", 10)
        taps.dropped_as("p0", udp(2), "group_no_live_bucket")
        trace = d.call("trace", switch="br0", packet="in_port=p0")
        assert trace["drop"] == "group_no_live_bucket", trace
    finally:
        set_kernel_link(taps, "p1", "up")
        set_kernel_link(taps, "p2", "up")
    wait_for(lambda: link_of(taps, "p1") == "up" and link_of(taps, "p2") == "up", 10)
    taps.received(0.1)
    taps.one("p0", udp(3), "p1")


def test_deleting_a_group_deletes_its_rules(taps: FlowTaps) -> None:
    d = taps.daemon
    d.call("add-group", switch="br0", group="group_id=1,type=all,bucket=output:p1")
    d.call("add-group", switch="br0", group="group_id=2,type=all,bucket=output:p2")
    taps.flows("priority=10,in_port=p0,actions=group:1",
               "priority=10,in_port=p1,actions=write_actions(group:1)",
               "priority=10,in_port=p2,actions=group:2",
               "priority=5,actions=output:p3")
    d.call("del-groups", switch="br0", group="group_id=1")
    assert [f["match"] for f in flows_of(d)] == ["in_port=p2", ""]
    assert [g["group_id"] for g in d.call("dump-groups", switch="br0")["groups"]] == [2]
    taps.one("p0", udp(), "p3")                 # the rule went with the group
    with pytest.raises(RpcError, match="group 1 does not exist"):
        d.call("add-flow", switch="br0", flow="in_port=p0,actions=group:1")
    d.call("del-groups", switch="br0")
    assert [f["match"] for f in flows_of(d)] == [""]
    assert d.call("dump-groups", switch="br0")["groups"] == []


# ---- meters ----

def blast(taps: FlowTaps, port: str, frame: bytes, seconds: float) -> tuple[int, float]:
    """Sends FRAME into PORT as fast as a raw socket in a tight loop can for SECONDS;
    returns how many were sent and the time it took."""
    s, sent = taps.socks[port], 0
    start = time.monotonic()
    end = start + seconds
    while True:
        for _ in range(64):
            try:
                s.send(frame)
                sent += 1
            except BlockingIOError:
                pass
        if time.monotonic() >= end:
            return sent, time.monotonic() - start


def settled(taps: FlowTaps) -> dict[str, dict[str, Any]]:
    """The port counters once they stop moving (what the kernel queued has been taken)."""
    last: dict[str, dict[str, Any]] = {}
    for _ in range(100):
        st = taps.port_stats()
        if st == last:
            return st
        last = st
        time.sleep(0.1)
    raise AssertionError("the counters keep moving")


@pytest.mark.parametrize("unit", ["pktps", "kbps"])
def test_meter_holds_its_rate(taps: FlowTaps, unit: str) -> None:
    """2000 packets/s with a burst of 200 (or as kbps, 2000 kbit/s and 200 kbit with frames
    of 1000 bits), offered (far) more for 2 s: what passes is the burst plus the rate times
    the time, within 10 %; the rest is dropped as `meter`, and dump-meters says the same."""
    d, rate, burst = taps.daemon, 2000, 200
    d.call("add-meter", switch="br0",
           meter=f"meter=1,{unit},burst,bands=type=drop,rate={rate},burst_size={burst}")
    taps.flows("in_port=p0,actions=meter:1,output:p1")
    frame = bytes(udp())
    frame += bytes(125 - len(frame))        # 1000 bits: as many kbit as packets
    sent, took = blast(taps, "p0", frame, 2.0)
    st = settled(taps)
    rx, fwd = st["p0"]["rx_packets"], st["p0"]["forwarded"]
    print(f"offered {sent / took:.0f} pps for {took:.2f} s, {rx} received, {fwd} passed")
    assert rx / took > 2.5 * rate, (sent, took, rx)   # well above the rate
    expected = burst + rate * took
    assert abs(fwd - expected) <= 0.1 * expected, (fwd, expected)
    assert st["p0"]["drops"]["meter"] == rx - fwd and st["p1"]["tx_packets"] == fwd, st
    m = d.call("dump-meters", switch="br0")["meters"]
    assert [(x["meter_id"], x["packets"], x["dropped_packets"]) for x in m] == [
        (1, rx, rx - fwd)], m
    assert len(taps.received()["p1"]) == fwd
    # Deleting the meter deletes the rule that uses it.
    d.call("del-meters", switch="br0", meter="meter=1")
    assert flows_of(d) == [] and d.call("dump-meters", switch="br0")["meters"] == []
