"""Flow key extraction and packet modifications (src/flow_key.c, src/flow_mod.c) against scapy.

Scapy builds frames (TCP, UDP, SCTP, ICMP, ICMPv6, ARP, IPv6 extension headers, VLAN tags,
IPv4 and IPv6 fragments); the C driver build/tests/unit/flow_key_tool prints each frame's
flow key, which must say what scapy says the fields are. Then every modification runs on
them and scapy recomputes every checksum of the result, which must equal the one written
incrementally. One driver process answers all requests.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

scapy = pytest.importorskip("scapy.all")
from scapy.all import (  # noqa: E402
    ARP,
    ICMP,
    IP,
    SCTP,
    TCP,
    UDP,
    Dot1Q,
    Ether,
    ICMPv6EchoRequest,
    ICMPv6ND_NS,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    fragment,
    fragment6,
)

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / os.environ.get("BUILD", "build") / "tests/unit/flow_key_tool"

MAC = {"dst": "00:11:22:33:44:55", "src": "66:77:88:99:aa:bb"}


def frames() -> dict[str, bytes]:
    e = Ether(**MAC)
    big = b"p" * 2400
    out = {
        "tcp4": e / IP(src="10.0.0.1", dst="10.0.0.2", tos=0xB9, ttl=63)
        / TCP(sport=1234, dport=80, flags="SAE"),
        "tcp4_opts": e / IP(src="10.0.0.1", dst="10.0.0.2", options=[scapy.IPOption_RR()])
        / TCP(sport=22, dport=4000, flags="PA", options=[("MSS", 1460)]) / b"data",
        "udp4_vlan": e / Dot1Q(vlan=100, prio=5) / IP(src="192.168.1.1", dst="192.168.1.2")
        / UDP(sport=5353, dport=53) / b"hello",
        "udp4_qinq": Ether(type=0x88A8, **MAC) / Dot1Q(vlan=7, prio=2)
        / IP(src="1.2.3.4", dst="5.6.7.8") / UDP(sport=1, dport=2),
        "sctp4": e / IP(src="10.0.0.5", dst="10.0.0.6") / SCTP(sport=3868, dport=3869),
        "icmp4": e / IP(src="10.1.1.1", dst="10.1.1.2") / ICMP(type=3, code=1) / (b"x" * 8),
        "tcp6": e / IPv6(src="2001:db8::1", dst="2001:db8::2", tc=0x2D, fl=0xABCDE, hlim=17)
        / TCP(sport=443, dport=51000, flags="FPUC"),
        "udp6_ext": e / Dot1Q(vlan=4094, prio=7)
        / IPv6(src="fe80::1", dst="ff02::1", hlim=1)
        / IPv6ExtHdrHopByHop() / IPv6ExtHdrRouting(addresses=[], segleft=0)
        / IPv6ExtHdrDestOpt() / UDP(sport=546, dport=547) / b"dhcp",
        "sctp6": e / IPv6(src="2001:db8::1", dst="2001:db8::2") / SCTP(sport=5, dport=6),
        "icmp6_echo": e / IPv6(src="2001:db8::1", dst="2001:db8::2")
        / ICMPv6EchoRequest(id=1, seq=2),
        "icmp6_ns": e / IPv6(src="fe80::1", dst="ff02::1:ff00:2", hlim=255)
        / ICMPv6ND_NS(tgt="fe80::2"),
        "arp": Ether(dst="ff:ff:ff:ff:ff:ff", src=MAC["src"])
        / ARP(op=1, hwsrc=MAC["src"], psrc="10.0.0.1", pdst="10.0.0.9"),
        "arp_vlan": e / Dot1Q(vlan=10) / ARP(op=2, psrc="10.0.0.9", pdst="10.0.0.1"),
    }
    for i, f in enumerate(fragment(e / IP(src="10.0.0.1", dst="10.0.0.3")
                                  / UDP(sport=1000, dport=2000) / big, fragsize=1000)):
        out[f"frag4_{i}"] = f
    for i, f in enumerate(fragment6(e / IPv6(src="2001:db8::1", dst="2001:db8::2")
                                    / IPv6ExtHdrFragment() / TCP(sport=7, dport=9) / big,
                                    1280)):
        out[f"frag6_{i}"] = e / f if not f.haslayer(Ether) else f
    return {k: bytes(v) for k, v in out.items()}


def expected_key(raw: bytes) -> dict[str, object]:
    """What the flow key must hold, by scapy's reading of the frame."""
    p = Ether(raw)
    k: dict[str, object] = {"dl_dst": p.dst, "dl_src": p.src, "dl_type": p.type,
                            "vlan_tci": 0, "nw_proto": 0, "nw_tos": 0, "nw_ttl": 0,
                            "nw_frag": 0, "tp_src": 0, "tp_dst": 0, "tcp_flags": 0,
                            "ipv6_label": 0, "nw_src": "0.0.0.0", "nw_dst": "0.0.0.0",
                            "ipv6_src": "::", "ipv6_dst": "::"}
    if isinstance(p.payload, Dot1Q):
        q = p.payload
        k["vlan_tci"] = q.prio << 13 | 0x1000 | q.vlan
        k["dl_type"] = q.type
    l4 = None
    if p.haslayer(IP):
        ip = p[IP]
        k.update(nw_src=ip.src, nw_dst=ip.dst, nw_tos=ip.tos, nw_ttl=ip.ttl,
                 nw_proto=ip.proto)
        if ip.flags.MF or ip.frag:
            k["nw_frag"] = 1 | (2 if ip.frag else 0)
        if not ip.frag:
            l4 = ip.payload
    elif p.haslayer(IPv6):
        ip = p[IPv6]
        k.update(ipv6_src=ip.src, ipv6_dst=ip.dst, nw_tos=ip.tc, nw_ttl=ip.hlim,
                 ipv6_label=ip.fl)
        layer, nh = ip.payload, ip.nh
        while isinstance(layer, (IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrDestOpt,
                                 IPv6ExtHdrFragment)):
            if isinstance(layer, IPv6ExtHdrFragment):
                k["nw_frag"] = 1 | (2 if layer.offset else 0)
                if layer.offset:
                    nh, layer = layer.nh, None
                    break
            nh, layer = layer.nh, layer.payload
        k["nw_proto"] = nh
        l4 = layer
    elif p.haslayer(ARP):
        a = p[ARP]
        k.update(nw_proto=a.op, nw_src=a.psrc, nw_dst=a.pdst)
    if isinstance(l4, (TCP, UDP, SCTP)):
        k.update(tp_src=l4.sport, tp_dst=l4.dport)
        if isinstance(l4, TCP):
            k["tcp_flags"] = int(l4.flags) & 0xFFF
    elif l4 is not None and (isinstance(l4, ICMP) or l4.name.startswith("ICMPv6")):
        k.update(tp_src=l4.type, tp_dst=l4.code)
    return k


def run_tool(lines: list[str]) -> list[str]:
    if not TOOL.exists():
        pytest.fail(f"{TOOL} is missing: build first (meson setup build && ninja -C build)")
    out = subprocess.run([str(TOOL)], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, timeout=20, check=True).stdout.splitlines()
    assert len(out) == len(lines)
    return out


def parse_key(line: str) -> dict[str, object]:
    k: dict[str, object] = {}
    for item in line.split():
        name, value = item.split("=", 1)
        k[name] = int(value) if value.isdigit() else value
    return k


def test_keys_match_scapy() -> None:
    fs = frames()
    got = run_tool([f"extract {raw.hex()}" for raw in fs.values()])
    assert any(k.startswith("frag6_") for k in fs) and any(k.startswith("frag4_") for k in fs)
    for (name, raw), line in zip(fs.items(), got, strict=True):
        assert parse_key(line) == expected_key(raw), name


def checksums(raw: bytes) -> dict[str, int]:
    """Each checksum in the frame, and what scapy computes it should be."""
    p = Ether(raw)
    q = Ether(raw)
    have, want = {}, {}
    for layer in list(p.iterpayloads()):
        for field in ("chksum", "cksum"):
            if field in layer.fields and not isinstance(layer, (IPv6ExtHdrRouting,)):
                have[f"{layer.name}.{field}"] = layer.getfieldval(field)
    for layer in list(q.iterpayloads()):
        for field in ("chksum", "cksum"):
            if field in layer.fields:
                layer.delfieldval(field)
    r = Ether(bytes(q))
    for layer in list(r.iterpayloads()):
        for field in ("chksum", "cksum"):
            if f"{layer.name}.{field}" in have:
                want[f"{layer.name}.{field}"] = layer.getfieldval(field)
    return {k: (have[k], want[k]) for k in have}


MODS = [
    ("set dl_src", "020000000001"), ("set dl_dst", "ffffffffffff"),
    ("set vlan_vid", "0123"), ("set vlan_pcp", "06"), ("set nw_src", "c0a80063"),
    ("set nw_dst", "08080808"), ("set ip_dscp", "2e"), ("set ip_ecn", "03"),
    ("set nw_ttl", "07"), ("set tp_src", "abcd"), ("set tp_dst", "0050"),
    ("set ipv6_src", "20010db8000000000000000000000099"),
    ("set ipv6_dst", "fe800000000000000000000000000042"), ("set ipv6_label", "00054321"),
]


def test_modifications_keep_checksums_valid() -> None:
    fs = frames()
    lines, cases = [], []
    for name, raw in fs.items():
        for op, value in MODS:
            lines.append(f"{op} {value} {raw.hex()}")
            cases.append((name, op, value, raw))
        for op in ("dec_ttl", "pop", "push 0x8100", "push 0x88a8"):
            lines.append(f"{op} {raw.hex()}")
            cases.append((name, op, "", raw))
    changed = checked = 0
    for (name, op, _value, raw), line in zip(cases, run_tool(lines), strict=True):
        rc, hexframe = line.split()
        out = bytes.fromhex(hexframe)
        if rc != "0":
            assert out == raw, (name, op)
            continue
        changed += 1
        p = Ether(out)
        for field, (have, want) in checksums(out).items():
            if field == "UDP.chksum" and have == 0 and IP in p:
                continue
            # Fragments: the L4 checksum covers data in other fragments.
            fragment_ = (IP in p and (p[IP].flags.MF or p[IP].frag)) or IPv6ExtHdrFragment in p
            if fragment_ and not field.startswith("IP."):
                continue
            assert have == want, (name, op, field, hex(have), hex(want))
            checked += 1
        key = parse_key(run_tool([f"extract {hexframe}"])[0])
        if op == "set nw_src":
            assert p[IP].src == "192.168.0.99" == key["nw_src"]
        elif op == "set tp_dst":
            assert key["tp_dst"] == 80, name
        elif op == "set ip_dscp":
            assert key["nw_tos"] >> 2 == 0x2E
        elif op == "set ipv6_label":
            assert p[IPv6].fl == 0x54321
        elif op == "dec_ttl":
            assert key["nw_ttl"] == expected_key(raw)["nw_ttl"] - 1
        elif op.startswith("push"):
            assert isinstance(p.payload, Dot1Q) or p.type == 0x88A8
            assert out[:12] == raw[:12] and out[16:] == raw[12:]
    assert changed > 150 and checked > 200, (changed, checked)
