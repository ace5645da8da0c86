"""OpenFlow 1.3 matches, actions and instructions <-> flow mode's rule text (docs/flow.md).

sluiced and the agent share one rule model, flow mode's: a controller's flow-mod becomes
the same ovs-ofctl text a user would type, so `sluicectl dump-flows` shows what the
controller installed. What flow mode lacks is refused with the OpenFlow error the
specification names for it (OFPET_BAD_MATCH, OFPET_BAD_ACTION, OFPET_BAD_INSTRUCTION).
"""

from __future__ import annotations

import contextlib
import ipaddress
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from sluice.ofagent.wire import OFError

# OXM field -> flow mode's name for it. Prerequisites are given by the controller as
# eth_type / ip_proto fields, which map to dl_type / nw_proto like any other field.
MATCH_FIELDS = {
    "in_port": "in_port", "eth_dst": "dl_dst", "eth_src": "dl_src", "eth_type": "dl_type",
    "vlan_pcp": "dl_vlan_pcp", "ip_dscp": "ip_dscp", "ip_ecn": "nw_ecn", "ip_proto": "nw_proto",
    "ipv4_src": "nw_src", "ipv4_dst": "nw_dst", "tcp_src": "tcp_src", "tcp_dst": "tcp_dst",
    "udp_src": "udp_src", "udp_dst": "udp_dst", "sctp_src": "sctp_src", "sctp_dst": "sctp_dst",
    "icmpv4_type": "icmp_type", "icmpv4_code": "icmp_code", "arp_op": "arp_op",
    "arp_spa": "arp_spa", "arp_tpa": "arp_tpa", "ipv6_src": "ipv6_src", "ipv6_dst": "ipv6_dst",
    "ipv6_flabel": "ipv6_label", "icmpv6_type": "icmpv6_type", "icmpv6_code": "icmpv6_code",
    "metadata": "metadata", "tunnel_id": "tun_id", "tcp_flags": "tcp_flags",
}
# Fields flow mode has no match for: arp_sha/arp_tha, MPLS, PBB, IPv6 ND and extension
# headers, the physical input port.
UNSUPPORTED_FIELDS = {"in_phy_port", "arp_sha", "arp_tha", "ipv6_nd_target", "ipv6_nd_sll",
                      "ipv6_nd_tll", "mpls_label", "mpls_tc", "mpls_bos", "pbb_isid",
                      "ipv6_exthdr", "pbb_uca", "actset_output", "packet_type"}

SET_FIELDS = {
    "eth_src": "eth_src", "eth_dst": "eth_dst", "vlan_vid": "vlan_vid", "vlan_pcp": "vlan_pcp",
    "ipv4_src": "nw_src", "ipv4_dst": "nw_dst", "ip_dscp": "ip_dscp", "ip_ecn": "ip_ecn",
    "tcp_src": "tcp_src", "tcp_dst": "tcp_dst", "udp_src": "udp_src", "udp_dst": "udp_dst",
    "sctp_src": "sctp_src", "sctp_dst": "sctp_dst", "ipv6_src": "ipv6_src",
    "ipv6_dst": "ipv6_dst", "ipv6_flabel": "ipv6_label", "tunnel_id": "tun_id",
}

RESERVED_PORTS = {ofp.OFPP_IN_PORT: "in_port", ofp.OFPP_NORMAL: "normal",
                  ofp.OFPP_FLOOD: "flood", ofp.OFPP_ALL: "all"}


def _value(v: Any) -> str:
    if isinstance(v, int):
        return hex(v) if v > 9 else str(v)
    return str(v)


def _field(name: str, value: Any) -> str:
    if isinstance(value, tuple):
        v, m = value
        return f"{name}={_value(v)}/{_value(m)}"
    return f"{name}={_value(value)}"


def _vlan(value: Any) -> str:
    """OF 1.3's vlan_vid (OFPVID_PRESENT | VID; 0: no tag) as flow mode's dl_vlan/vlan_tci."""
    if isinstance(value, tuple):
        v, m = value
        if v == ofp.OFPVID_PRESENT and m == ofp.OFPVID_PRESENT:
            return "vlan_tci=0x1000/0x1000"
        return f"vlan_tci={hex(v & 0x1fff)}/{hex(m & 0x1fff)}"
    if value == ofp.OFPVID_NONE:
        return "dl_vlan=0xffff"
    if not value & ofp.OFPVID_PRESENT:
        raise OFError(ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_VALUE, "vlan_vid without PRESENT")
    return f"dl_vlan={value & 0xfff}"


def match_text(match: parser.OFPMatch) -> str:
    parts = []
    for name, value in match.items():
        if name == "vlan_vid":
            parts.append(_vlan(value))
        elif name in MATCH_FIELDS:
            if name == "in_port" and (value > ofp.OFPP_MAX or value == 0):
                raise OFError(ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_VALUE, "in_port")
            parts.append(_field(MATCH_FIELDS[name], value))
        else:
            raise OFError(ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_FIELD, f"{name} is not supported")
    return ",".join(parts)


def _output(port: int, max_len: int) -> str:
    if port in RESERVED_PORTS:
        return RESERVED_PORTS[port]
    if port == ofp.OFPP_CONTROLLER:
        return f"controller:{max_len}" if max_len != ofp.OFPCML_NO_BUFFER else "controller"
    if port == 0 or port > ofp.OFPP_MAX:   # TABLE, LOCAL, ANY: not in a rule
        raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_PORT, f"output to {port:#x}")
    return f"output:{port}"


def action_text(a: Any) -> str:
    if isinstance(a, parser.OFPActionOutput):
        return _output(a.port, a.max_len)
    if isinstance(a, parser.OFPActionGroup):
        return f"group:{a.group_id}"
    if isinstance(a, parser.OFPActionSetField):
        name, value = a.key, a.value
        if name not in SET_FIELDS:
            raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_SET_TYPE, f"set_field {name}")
        if isinstance(value, tuple):
            raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_SET_ARGUMENT, "masked set_field")
        if name == "vlan_vid":
            value = value & 0xfff
        return f"set_field:{_value(value)}->{SET_FIELDS[name]}"
    if isinstance(a, parser.OFPActionPushVlan):
        if a.ethertype not in (0x8100, 0x88a8):
            raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_ARGUMENT, "push_vlan ethertype")
        return f"push_vlan:{a.ethertype:#x}"
    if isinstance(a, parser.OFPActionPopVlan):
        return "pop_vlan"
    if isinstance(a, parser.OFPActionDecNwTtl):
        return "dec_ttl"
    if isinstance(a, parser.OFPActionSetQueue):
        return f"set_queue:{a.queue_id}"
    if isinstance(a, parser.OFPActionExperimenter):
        raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_EXPERIMENTER, "experimenter action")
    raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_TYPE, f"{type(a).__name__} not supported")


def actions_text(actions: list[Any]) -> str:
    return ",".join(action_text(a) for a in actions)


def instructions_text(instructions: list[Any]) -> str:
    meter = apply = clear = write = metadata = goto = ""
    for inst in instructions:
        if isinstance(inst, parser.OFPInstructionMeter):
            meter = f"meter:{inst.meter_id}"
        elif isinstance(inst, parser.OFPInstructionActions):
            if inst.type == ofp.OFPIT_APPLY_ACTIONS:
                apply = actions_text(inst.actions)
            elif inst.type == ofp.OFPIT_WRITE_ACTIONS:
                write = f"write_actions({actions_text(inst.actions)})"
            else:
                clear = "clear_actions"
        elif isinstance(inst, parser.OFPInstructionWriteMetadata):
            metadata = f"write_metadata:{inst.metadata:#x}/{inst.metadata_mask:#x}"
        elif isinstance(inst, parser.OFPInstructionGotoTable):
            goto = f"goto_table:{inst.table_id}"
        else:
            raise OFError(ofp.OFPET_BAD_INSTRUCTION, ofp.OFPBIC_UNKNOWN_INST,
                          type(inst).__name__)
    parts = [p for p in (meter, apply, clear, write, metadata, goto) if p]
    return ",".join(parts) if parts else "drop"


def flow_mod_text(fm: Any, strict_filter: bool = False) -> str:
    """The rule text of a flow-mod: settings, match and (for add/modify) instructions."""
    head = []
    if fm.table_id != ofp.OFPTT_ALL:
        head.append(f"table={fm.table_id}")
    cmd = fm.command
    if cmd in (ofp.OFPFC_ADD, ofp.OFPFC_MODIFY_STRICT, ofp.OFPFC_DELETE_STRICT) or strict_filter:
        head.append(f"priority={fm.priority}")
    if cmd == ofp.OFPFC_ADD:
        head.append(f"cookie={fm.cookie:#x}")
        if fm.idle_timeout:
            head.append(f"idle_timeout={fm.idle_timeout}")
        if fm.hard_timeout:
            head.append(f"hard_timeout={fm.hard_timeout}")
        if fm.flags & ofp.OFPFF_SEND_FLOW_REM:
            head.append("send_flow_rem")
        if fm.flags & ofp.OFPFF_CHECK_OVERLAP:
            head.append("check_overlap")
        if fm.flags & ofp.OFPFF_RESET_COUNTS:
            head.append("reset_counts")
    elif fm.cookie_mask:
        head.append(f"cookie={fm.cookie:#x}/{fm.cookie_mask:#x}")
    if cmd in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT):
        if fm.out_port != ofp.OFPP_ANY:
            head.append(f"out_port={fm.out_port}")
        if fm.out_group != ofp.OFPG_ANY:
            head.append(f"out_group={fm.out_group}")
    m = match_text(fm.match)
    text = ",".join(head + ([m] if m else []))
    if cmd in (ofp.OFPFC_ADD, ofp.OFPFC_MODIFY, ofp.OFPFC_MODIFY_STRICT):
        text += ("," if text else "") + "actions=" + instructions_text(fm.instructions)
    return text


GROUP_TYPES = {ofp.OFPGT_ALL: "all", ofp.OFPGT_SELECT: "select",
               ofp.OFPGT_INDIRECT: "indirect", ofp.OFPGT_FF: "ff"}


def group_text(group_id: int, type_: int, buckets: list[Any]) -> str:
    if type_ not in GROUP_TYPES:
        raise OFError(ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_BAD_TYPE, f"type {type_}")
    parts = [f"group_id={group_id}", f"type={GROUP_TYPES[type_]}"]
    for b in buckets:
        bp = []
        if type_ == ofp.OFPGT_SELECT:
            bp.append(f"weight:{b.weight}")
        if type_ == ofp.OFPGT_FF:
            if b.watch_port not in (ofp.OFPP_ANY, 0):
                bp.append(f"watch_port:{b.watch_port}")
            if b.watch_group != ofp.OFPG_ANY:
                bp.append(f"watch_group:{b.watch_group}")
        acts = actions_text(b.actions)
        bp.append(acts if acts else "drop")
        parts.append("bucket=" + ",".join(bp))
    return ",".join(parts)


def meter_text(meter_id: int, flags: int, bands: list[Any]) -> str:
    if len(bands) > 1:
        raise OFError(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_OUT_OF_BANDS, "one band at most")
    unit = "pktps" if flags & ofp.OFPMF_PKTPS else "kbps"
    parts = [f"meter={meter_id}", unit]
    if flags & ofp.OFPMF_BURST:
        parts.append("burst")
    if flags & ofp.OFPMF_STATS:
        parts.append("stats")
    for b in bands:
        if not isinstance(b, parser.OFPMeterBandDrop):
            raise OFError(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_BAD_BAND, "only drop bands")
        band = f"bands=type=drop,rate={b.rate}"
        if flags & ofp.OFPMF_BURST:
            band += f",burst_size={b.burst_size}"
        parts.append(band)
    return ",".join(parts)


# ---- back: flow mode's dump text -> OpenFlow (flow stats) ----

_BACK_FIELDS = {v: k for k, v in MATCH_FIELDS.items()}
_BACK_FIELDS.update({"eth_dst": "eth_dst", "eth_src": "eth_src", "eth_type": "eth_type",
                     "tp_src": "", "tp_dst": "", "ip_src": "ipv4_src",
                     "ip_dst": "ipv4_dst", "ip_proto": "ip_proto", "tun_id": "tunnel_id",
                     "nw_ttl": ""})
_SHORTHANDS = {"ip": (0x0800, None), "tcp": (0x0800, 6), "udp": (0x0800, 17),
               "sctp": (0x0800, 132), "icmp": (0x0800, 1), "arp": (0x0806, None),
               "ipv6": (0x86dd, None), "tcp6": (0x86dd, 6), "udp6": (0x86dd, 17),
               "sctp6": (0x86dd, 132), "icmp6": (0x86dd, 58)}


def _num(s: str) -> int:
    return int(s, 0)


def _back_value(name: str, s: str, ports: dict[str, int]) -> Any:
    if "/" in s:
        v, m = s.split("/", 1)
        if name in ("ipv4_src", "ipv4_dst", "arp_spa", "arp_tpa") and "." not in m:
            net = ipaddress.ip_network(s, strict=False)
            return (str(net.network_address), str(net.netmask))
        if name in ("ipv6_src", "ipv6_dst") and ":" not in m:
            net = ipaddress.ip_network(s, strict=False)
            return (str(net.network_address), str(net.netmask))
        return (_back_value(name, v, ports), _back_value(name, m, ports))
    if name in ("eth_src", "eth_dst"):
        return s.lower()
    if name in ("ipv4_src", "ipv4_dst", "arp_spa", "arp_tpa", "ipv6_src", "ipv6_dst"):
        return s
    if name == "in_port":
        return ports.get(s) or _num(s)
    return _num(s)


def match_from_text(text: str, ports: dict[str, int]) -> parser.OFPMatch:
    """A dump's match (flow mode's canonical text) as an OFPMatch; unknown parts skipped."""
    fields: dict[str, Any] = {}
    if not text:
        return parser.OFPMatch()
    for tok in text.split(","):
        if "=" not in tok:
            if tok in _SHORTHANDS:
                et, proto = _SHORTHANDS[tok]
                fields["eth_type"] = et
                if proto is not None:
                    fields["ip_proto"] = proto
            continue
        k, v = tok.split("=", 1)
        if k == "dl_vlan":
            n = _num(v)
            fields["vlan_vid"] = ofp.OFPVID_NONE if n == 0xffff else n | ofp.OFPVID_PRESENT
            continue
        if k == "vlan_tci":
            val, _, mask = v.partition("/")
            fields["vlan_vid"] = ((_num(val) & 0x1fff, _num(mask) & 0x1fff) if mask
                                  else _num(val) & 0x1fff)
            continue
        if k == "nw_tos":       # the dump's TOS byte, DSCP in its upper six bits
            with contextlib.suppress(ValueError):
                fields["ip_dscp"] = _num(v) >> 2
            continue
        if k in ("tp_src", "tp_dst"):
            proto = {6: "tcp", 17: "udp", 132: "sctp"}.get(fields.get("ip_proto", 6), "tcp")
            k = f"{proto}_{k[3:]}"
        name = _BACK_FIELDS.get(k, k if k in MATCH_FIELDS else "")
        if not name:
            continue
        try:
            fields[name] = _back_value(name, v, ports)
        except ValueError:
            continue
    if "vlan_pcp" in fields and "vlan_vid" not in fields:
        # vlan_pcp's prerequisite, a tag, which the dump leaves implicit.
        fields["vlan_vid"] = (ofp.OFPVID_PRESENT, ofp.OFPVID_PRESENT)
    return parser.OFPMatch(**fields)
