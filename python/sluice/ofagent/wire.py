"""OpenFlow 1.3 on the wire, switch side, on os-ken's structures.

os-ken is a controller library: it parses what a switch sends and serialises what a
controller sends. A switch needs the other two directions. Parsing uses os-ken's own
parsers where it has them (flow-mod, and the match, instruction, action, bucket and meter
band structures inside every message); the message bodies it only builds are read here
with its pack strings. Replies are written with its pack strings and the structures'
serialize() methods, so every layout comes from os-ken, none is hand-copied.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

HEADER = struct.Struct(ofp.OFP_HEADER_PACK_STR)   # version, type, length, xid


class OFError(Exception):
    """A request to refuse with an OpenFlow error of TYPE and CODE."""

    def __init__(self, type_: int, code: int, text: str = "") -> None:
        super().__init__(f"type {type_} code {code}: {text}")
        self.type = type_
        self.code = code
        self.text = text


class _Datapath:
    """What os-ken's parsers ask of a datapath: its protocol modules."""

    ofproto = ofp
    ofproto_parser = parser


DP = _Datapath()


def header(msg_type: int, xid: int, body: bytes) -> bytes:
    return HEADER.pack(ofp.OFP_VERSION, msg_type, HEADER.size + len(body), xid) + body


def pad8(n: int) -> int:
    return (n + 7) // 8 * 8


def match_bytes(match: parser.OFPMatch) -> bytes:
    buf = bytearray()
    match.serialize(buf, 0)
    return bytes(buf)


def actions_from(buf: bytes, offset: int, length: int) -> list[Any]:
    """Actions of LENGTH bytes at OFFSET (os-ken's action parsers)."""
    out = []
    end = offset + length
    while offset < end:
        type_, len_ = struct.unpack_from("!HH", buf, offset)
        if len_ < 8 or offset + len_ > end:
            raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_LEN, "action length")
        try:
            out.append(parser.OFPAction.parser(buf, offset))
        except (KeyError, struct.error) as exc:
            raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_TYPE,
                          f"action type {type_}") from exc
        offset += len_
    return out


# ---- controller -> switch ----

@dataclass
class PacketOut:
    buffer_id: int
    in_port: int
    actions: list[Any]
    data: bytes


def parse_packet_out(buf: bytes) -> PacketOut:
    off = HEADER.size
    buffer_id, in_port, actions_len = struct.unpack_from(ofp.OFP_PACKET_OUT_PACK_STR, buf, off)
    off += ofp.OFP_PACKET_OUT_SIZE - HEADER.size
    if off + actions_len > len(buf):
        raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN, "actions_len")
    actions = actions_from(buf, off, actions_len)
    return PacketOut(buffer_id, in_port, actions, bytes(buf[off + actions_len:]))


@dataclass
class GroupMod:
    command: int
    type: int
    group_id: int
    buckets: list[Any] = field(default_factory=list)


def parse_group_mod(buf: bytes) -> GroupMod:
    off = HEADER.size
    command, type_, group_id = struct.unpack_from(ofp.OFP_GROUP_MOD_PACK_STR, buf, off)
    off = ofp.OFP_GROUP_MOD_SIZE
    buckets = []
    while off < len(buf):
        (blen,) = struct.unpack_from("!H", buf, off)
        if blen < ofp.OFP_BUCKET_SIZE or off + blen > len(buf):
            raise OFError(ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_BAD_BUCKET, "bucket length")
        try:
            buckets.append(parser.OFPBucket.parser(buf, off))
        except (KeyError, struct.error) as exc:
            raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_TYPE, "bucket action") from exc
        off += blen
    return GroupMod(command, type_, group_id, buckets)


@dataclass
class MeterMod:
    command: int
    flags: int
    meter_id: int
    bands: list[Any] = field(default_factory=list)


def parse_meter_mod(buf: bytes) -> MeterMod:
    off = HEADER.size
    command, flags, meter_id = struct.unpack_from(ofp.OFP_METER_MOD_PACK_STR, buf, off)
    off = ofp.OFP_METER_MOD_SIZE
    bands = []
    while off < len(buf):
        type_, blen = struct.unpack_from("!HH", buf, off)
        if blen < 12 or off + blen > len(buf):
            raise OFError(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_INVALID_METER, "band length")
        try:
            bands.append(parser.OFPMeterBandHeader.parser(buf, off))
        except (KeyError, struct.error) as exc:
            raise OFError(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_BAD_BAND,
                          f"band type {type_}") from exc
        off += blen
    return MeterMod(command, flags, meter_id, bands)


def parse_port_mod(buf: bytes) -> tuple[int, bytes, int, int, int]:
    """port_no, hw_addr, config, mask, advertise."""
    return struct.unpack_from(ofp.OFP_PORT_MOD_PACK_STR, buf, HEADER.size)


def parse_flow_mod(buf: bytes, xid: int) -> Any:
    version, msg_type, msg_len, _ = HEADER.unpack_from(buf)
    try:
        return parser.OFPFlowMod.parser(DP, version, msg_type, msg_len, xid, buf)
    except KeyError as exc:
        raise OFError(ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_FIELD, "unknown field") from exc
    except struct.error as exc:
        raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN, "flow-mod length") from exc


def parse_match(buf: bytes, off: int) -> parser.OFPMatch:
    try:
        return parser.OFPMatch.parser(buf, off)
    except (KeyError, struct.error) as exc:
        raise OFError(ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_FIELD, "match") from exc


# ---- switch -> controller ----

def error(xid: int, type_: int, code: int, request: bytes) -> bytes:
    return header(ofp.OFPT_ERROR, xid, struct.pack("!HH", type_, code) + bytes(request[:64]))


def features_reply(xid: int, dpid: int, n_tables: int, capabilities: int) -> bytes:
    return header(ofp.OFPT_FEATURES_REPLY, xid,
                  struct.pack(ofp.OFP_SWITCH_FEATURES_PACK_STR, dpid, 0, n_tables, 0,
                              capabilities, 0))


def packet_in(reason: int, table_id: int, cookie: int, in_port: int, total_len: int,
              data: bytes) -> bytes:
    m = match_bytes(parser.OFPMatch(in_port=in_port))
    body = (struct.pack(ofp.OFP_PACKET_IN_PACK_STR, ofp.OFP_NO_BUFFER, total_len, reason,
                        table_id, cookie) + m + b"\0\0" + data)
    return header(ofp.OFPT_PACKET_IN, 0, body)


def flow_removed(cookie: int, priority: int, reason: int, table_id: int, duration: float,
                 idle: int, hard: int, packets: int, nbytes: int,
                 match: parser.OFPMatch) -> bytes:
    sec = int(duration)
    body = struct.pack("!QHBBIIHHQQ", cookie, priority, reason, table_id, sec,
                       int((duration - sec) * 1e9), idle, hard, packets, nbytes)
    return header(ofp.OFPT_FLOW_REMOVED, 0, body + match_bytes(match))


def port_struct(no: int, mac: bytes, name: str, config: int, state: int, curr: int,
                speed_kbps: int) -> bytes:
    return struct.pack(ofp.OFP_PORT_PACK_STR, no, mac, name.encode()[:15], config, state,
                       curr, curr, curr, curr, speed_kbps, speed_kbps)


def port_status(reason: int, port: bytes) -> bytes:
    return header(ofp.OFPT_PORT_STATUS, 0, struct.pack("!B7x", reason) + port)


def multipart_reply(xid: int, type_: int, body: bytes, more: bool = False) -> bytes:
    flags = ofp.OFPMPF_REPLY_MORE if more else 0
    return header(ofp.OFPT_MULTIPART_REPLY, xid,
                  struct.pack(ofp.OFP_MULTIPART_REPLY_PACK_STR, type_, flags) + body)


def instructions_bytes(instructions: list[Any]) -> bytes:
    buf = bytearray()
    for inst in instructions:
        inst.serialize(buf, len(buf))
    return bytes(buf)


def flow_stats(table_id: int, duration: float, priority: int, idle: int, hard: int,
               flags: int, cookie: int, packets: int, nbytes: int, match: parser.OFPMatch,
               instructions: list[Any]) -> bytes:
    m = match_bytes(match)
    ins = instructions_bytes(instructions)
    sec = int(duration)
    length = ofp.OFP_FLOW_STATS_0_SIZE + len(m) + len(ins)
    return struct.pack(ofp.OFP_FLOW_STATS_0_PACK_STR, length, table_id, sec,
                       int((duration - sec) * 1e9), priority, idle, hard, flags, cookie,
                       packets, nbytes) + m + ins


def bucket_bytes(bucket: Any) -> bytes:
    buf = bytearray()
    bucket.serialize(buf, 0)
    return bytes(buf)
