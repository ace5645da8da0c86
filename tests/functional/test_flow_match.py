"""Flow mode, every match field and shorthand, with real frames: for each, a rule that sends
what it matches to p1; a frame it matches leaves by p1 alone, a near miss (one field off)
leaves by no port and is counted as no_match. One flow switch of four tap ports serves the
whole file; each case replaces its rules and the counters are checked after each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from flow_helpers import MARK, FlowTaps
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.layers.sctp import SCTP
from scapy.packet import Packet, Raw

from conftest import Daemon

A, B, C = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:0c"


def eth(src: str = A, dst: str = B, vlan: int | None = None, pcp: int = 0) -> Packet:
    e = Ether(src=src, dst=dst)
    return e / Dot1Q(vlan=vlan, prio=pcp) if vlan is not None else e


def ip4(src: str = "10.0.0.1", dst: str = "10.0.0.2", **kw: object) -> Packet:
    return eth() / IP(src=src, dst=dst, **kw)


def udp(sport: int = 1000, dport: int = 2000, **kw: object) -> Packet:
    return ip4(**kw) / UDP(sport=sport, dport=dport) / Raw(MARK)


def tcp(sport: int = 1000, dport: int = 80, flags: str = "S") -> Packet:
    return ip4() / TCP(sport=sport, dport=dport, flags=flags) / Raw(MARK)


def sctp(sport: int = 1000, dport: int = 9) -> Packet:
    return ip4() / SCTP(sport=sport, dport=dport) / Raw(MARK)


def arp(op: int = 1, psrc: str = "10.0.0.1", pdst: str = "10.0.0.2") -> Packet:
    return Ether(src=A, dst="ff:ff:ff:ff:ff:ff") / ARP(op=op, hwsrc=A, psrc=psrc,
                                                       pdst=pdst) / Raw(MARK)


def ip6(src: str = "2001:db8::1", dst: str = "2001:db8::2", fl: int = 0) -> Packet:
    return eth() / IPv6(src=src, dst=dst, fl=fl)


def plain(src: str = A, dst: str = B, vlan: int | None = None, pcp: int = 0) -> Packet:
    return eth(src, dst, vlan, pcp) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP() / Raw(MARK)


# (id, match, a frame it matches, a near miss, the near miss's input port)
CASES: list[tuple[str, str, Packet, Packet, str]] = [
    ("in_port", "in_port=p0", plain(), plain(), "p2"),
    ("in_port_number", "in_port=1", plain(), plain(), "p3"),
    ("dl_src", f"dl_src={A}", plain(src=A), plain(src=C), "p0"),
    ("dl_src_mask", "dl_src=02:00:00:00:00:00/ff:ff:ff:ff:ff:00",
     plain(src="02:00:00:00:00:77"), plain(src="02:00:00:00:01:0a"), "p0"),
    ("dl_dst", f"dl_dst={B}", plain(dst=B), plain(dst=C), "p0"),
    ("dl_dst_mask_multicast", "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
     plain(dst="01:00:5e:00:00:07"), plain(dst=B), "p0"),
    ("dl_type", "dl_type=0x0806", arp(), plain(), "p0"),
    ("dl_vlan", "dl_vlan=10", plain(vlan=10), plain(vlan=11), "p0"),
    ("dl_vlan_none", "dl_vlan=0xffff", plain(), plain(vlan=10), "p0"),
    ("vlan_any_tag", "vlan_tci=0x1000/0x1000", plain(vlan=4), plain(), "p0"),
    ("dl_vlan_pcp", "dl_vlan_pcp=5", plain(vlan=3, pcp=5), plain(vlan=3, pcp=4), "p0"),
    ("ip", "ip", udp(), arp(), "p0"),
    ("nw_src_cidr", "ip,nw_src=10.1.0.0/16", udp(src="10.1.200.3"), udp(src="10.2.0.3"),
     "p0"),
    ("nw_dst", "ip,nw_dst=10.0.0.5", udp(dst="10.0.0.5"), udp(dst="10.0.0.6"), "p0"),
    ("nw_proto", "ip,nw_proto=17", udp(), tcp(), "p0"),
    ("udp", "udp", udp(), tcp(), "p0"),
    ("tcp", "tcp", tcp(), udp(), "p0"),
    ("nw_tos", "ip,nw_tos=32", udp(tos=33), udp(tos=36), "p0"),
    ("ip_dscp", "ip,ip_dscp=46", udp(tos=46 << 2), udp(tos=45 << 2), "p0"),
    ("ip_ecn", "ip,ip_ecn=3", udp(tos=3), udp(tos=2), "p0"),
    ("nw_ttl", "ip,nw_ttl=5", udp(ttl=5), udp(ttl=6), "p0"),
    ("tcp_src", "tcp,tp_src=1234", tcp(sport=1234), tcp(sport=1235), "p0"),
    ("tcp_dst", "tcp,tp_dst=80", tcp(dport=80), tcp(dport=81), "p0"),
    ("tcp_dst_not_udp", "tcp,tp_dst=80", tcp(dport=80), udp(dport=80), "p0"),
    ("udp_src", "udp,tp_src=53", udp(sport=53), udp(sport=54), "p0"),
    ("udp_dst", "udp,tp_dst=53", udp(dport=53), udp(dport=52), "p0"),
    ("udp_dst_mask", "udp,tp_dst=0x1000/0xf000", udp(dport=0x1abc), udp(dport=0x2abc),
     "p0"),
    ("sctp_src", "sctp,tp_src=7", sctp(sport=7), sctp(sport=8), "p0"),
    ("sctp_dst", "sctp,tp_dst=9", sctp(dport=9), sctp(dport=10), "p0"),
    ("tcp_flags", "tcp,tcp_flags=+syn-ack", tcp(flags="S"), tcp(flags="SA"), "p0"),
    ("tcp_flags_mask", "tcp,tcp_flags=0x001/0x001", tcp(flags="FA"), tcp(flags="A"), "p0"),
    ("icmp_type", "icmp,icmp_type=8", ip4() / ICMP(type=8) / Raw(MARK),
     ip4() / ICMP(type=0) / Raw(MARK), "p0"),
    ("icmp_code", "icmp,icmp_type=3,icmp_code=3", ip4() / ICMP(type=3, code=3) / Raw(MARK),
     ip4() / ICMP(type=3, code=1) / Raw(MARK), "p0"),
    ("arp", "arp", arp(), plain(), "p0"),
    ("arp_op", "arp,arp_op=2", arp(op=2), arp(op=1), "p0"),
    ("arp_spa", "arp,arp_spa=10.0.0.1", arp(psrc="10.0.0.1"), arp(psrc="10.0.0.9"), "p0"),
    ("arp_tpa_cidr", "arp,arp_tpa=10.9.0.0/16", arp(pdst="10.9.7.7"), arp(pdst="10.8.7.7"),
     "p0"),
    ("ipv6", "ipv6", ip6() / UDP() / Raw(MARK), udp(), "p0"),
    ("ipv6_src", "ipv6,ipv6_src=2001:db8::1", ip6(src="2001:db8::1") / UDP() / Raw(MARK),
     ip6(src="2001:db8::3") / UDP() / Raw(MARK), "p0"),
    ("ipv6_dst_cidr", "ipv6,ipv6_dst=2001:db8:1::/48",
     ip6(dst="2001:db8:1:2::9") / UDP() / Raw(MARK),
     ip6(dst="2001:db8:2::9") / UDP() / Raw(MARK), "p0"),
    ("ipv6_label", "ipv6,ipv6_label=0x12345", ip6(fl=0x12345) / UDP() / Raw(MARK),
     ip6(fl=0x12346) / UDP() / Raw(MARK), "p0"),
    ("icmpv6_type", "icmp6,icmpv6_type=135",
     ip6() / ICMPv6ND_NS(tgt="2001:db8::2") / Raw(MARK),
     ip6() / ICMPv6ND_NA(tgt="2001:db8::2") / Raw(MARK), "p0"),
    ("icmp6_echo", "icmp6,icmpv6_type=128", ip6() / ICMPv6EchoRequest() / Raw(MARK),
     ip6() / UDP() / Raw(MARK), "p0"),
    ("tcp6", "tcp6,tp_dst=443", ip6() / TCP(dport=443) / Raw(MARK),
     ip6() / UDP(dport=443) / Raw(MARK), "p0"),
    ("udp6", "udp6,tp_src=53", ip6() / UDP(sport=53) / Raw(MARK),
     ip6() / UDP(sport=54) / Raw(MARK), "p0"),
]


@pytest.fixture(scope="module")
def mtaps() -> Iterator[FlowTaps]:
    wd = Path(f"/tmp/sluice-fm-{os.getpid()}")
    wd.mkdir(exist_ok=True)
    d = Daemon(wd, "fm").start()
    t = FlowTaps(d, "fm", 4, prefix="slm")
    try:
        yield t
    finally:
        t.close()
        rc = d.stop()
        for f in wd.iterdir():
            f.unlink()
        wd.rmdir()
        assert rc == 0


@pytest.fixture
def taps(mtaps: FlowTaps) -> Iterator[FlowTaps]:
    mtaps.daemon.call("del-flows", switch="fm")
    mtaps.daemon.call("clear-stats", switch="fm")
    mtaps.received()
    yield mtaps
    mtaps.check_accounting()


@pytest.mark.parametrize("name,match,hit,miss,miss_port", CASES, ids=[c[0] for c in CASES])
def test_match_field(taps: FlowTaps, name: str, match: str, hit: Packet, miss: Packet,
                     miss_port: str) -> None:
    taps.flows(f"priority=100,{match},actions=output:p1")
    got = taps.one("p0", hit, "p1")
    assert bytes(got) == bytes(hit)          # unchanged on the way
    taps.dropped_as(miss_port, miss, "no_match")
    flows = taps.daemon.call("dump-flows", switch="fm")["flows"]
    assert [f["packets"] for f in flows] == [1], flows


def test_metadata_written_and_matched(taps: FlowTaps) -> None:
    """write_metadata in table 0, goto_table:1, metadata matched (with a mask) in table 1."""
    taps.flows("table=0,priority=10,in_port=p0,actions=write_metadata:0x5a05/0xff0f,"
               "goto_table:1",
               "table=0,priority=10,in_port=p2,actions=write_metadata:0x5a06/0xff0f,"
               "goto_table:1",
               "table=0,priority=10,in_port=p3,actions=goto_table:1",
               "table=1,priority=10,metadata=0x5a05/0xff0f,actions=output:p1",
               "table=1,priority=5,metadata=0,actions=output:p2")
    taps.one("p0", plain(), "p1")
    taps.dropped_as("p2", plain(), "no_match")
    taps.one("p3", plain(), "p2")             # a packet starts with metadata 0
    trace = taps.daemon.call("trace", switch="fm", packet="in_port=p0")
    assert trace["outputs"] == ["p1"], trace


def test_priorities_and_table_miss_rule(taps: FlowTaps) -> None:
    """The highest priority wins whatever the order of adding; a priority-0 rule with no
    match is the table-miss entry; without it a miss is no_match."""
    d = taps.daemon
    d.call("add-flow", switch="fm", flow="priority=10,udp,actions=output:p1")
    d.call("add-flow", switch="fm", flow="priority=20,udp,tp_dst=53,actions=output:p2")
    d.call("add-flow", switch="fm", flow="priority=5,ip,actions=output:p3")
    taps.one("p0", udp(dport=53), "p2")
    taps.one("p0", udp(dport=54), "p1")
    taps.one("p0", tcp(), "p3")
    taps.dropped_as("p0", arp(), "no_match")
    d.call("add-flow", switch="fm", flow="priority=0,actions=drop")
    taps.dropped_as("p0", arp(), "action_drop")
