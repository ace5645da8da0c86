"""Each OpenFlow 1.3 message the agent handles, and each error it answers, against the
real sluiced and sluice-ofagent (issue 16, "The agent").

The test is the controller: it listens, the agent connects to it, and messages are built
and parsed with os-ken's own classes (the controller-side library Faucet uses), so the
agent's wire format is checked by an independent implementation. Frames cross real
af_packet ports (veth pairs), read and written with raw sockets.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from of_helpers import Proc, agent_daemon, run, start_agent
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as p

from conftest import Daemon, RpcError, wait_for

ETH_TEST = 0x88B5           # IEEE local experimental: nothing else on the veths sends it


class DP:
    ofproto = ofp
    ofproto_parser = p


class Controller:
    """One accepted connection from the agent; messages are os-ken objects."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.xid = 1000
        self.buf = b""
        self.async_msgs: list[Any] = []

    def send(self, msg: Any) -> int:
        self.xid += 1
        msg.set_xid(self.xid)
        msg.serialize()
        self.sock.sendall(bytes(msg.buf))
        return self.xid

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = 5.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 8:
                version, msg_type, length, xid = struct.unpack_from("!BBHI", self.buf)
                if len(self.buf) >= length:
                    data, self.buf = self.buf[:length], self.buf[length:]
                    return ofproto_parser.msg(DP, version, msg_type, length, xid, data)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no message from the agent")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the agent closed the connection")
            self.buf += chunk

    def expect(self, cls: type, xid: int | None = None, timeout: float = 5.0) -> Any:
        """The next message of CLS (and XID), keeping others (port-status, ...) aside."""
        deadline = time.monotonic() + timeout
        for i, m in enumerate(self.async_msgs):
            if isinstance(m, cls) and (xid is None or m.xid == xid):
                return self.async_msgs.pop(i)
        while True:
            m = self.recv(max(0.05, deadline - time.monotonic()))
            if isinstance(m, cls) and (xid is None or m.xid == xid):
                return m
            if isinstance(m, p.OFPErrorMsg) and m.xid == xid:
                raise AssertionError(f"error type {m.type} code {m.code}")
            if isinstance(m, p.OFPEchoRequest):      # a controller answers keep-alives
                reply = p.OFPEchoReply(DP, data=m.data)
                reply.set_xid(m.xid)
                reply.serialize()
                self.sock.sendall(bytes(reply.buf))
                continue
            self.async_msgs.append(m)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {cls.__name__}")

    def error_for(self, msg: Any) -> tuple[int, int]:
        xid = self.send(msg)
        e = self.expect(p.OFPErrorMsg, xid)
        return e.type, e.code

    def barrier(self) -> None:
        self.expect(p.OFPBarrierReply, self.send(p.OFPBarrierRequest(DP)))


class Ports:
    """Two veth pairs: p1 and p2 of the switch on one end, raw sockets on the other."""

    def __init__(self) -> None:
        tag = f"om{os.getpid() % 100000}"
        self.sw = [f"{tag}a", f"{tag}b"]
        self.peer = [f"{tag}A", f"{tag}B"]
        self.socks: list[socket.socket] = []
        for a, b in zip(self.sw, self.peer, strict=True):
            run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            for i in (a, b):
                with contextlib.suppress(OSError), \
                        open(f"/proc/sys/net/ipv6/conf/{i}/disable_ipv6", "w") as f:
                    f.write("1")
                run("ip", "link", "set", i, "up")
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_TEST))
            s.bind((b, 0))
            self.socks.append(s)

    def send(self, i: int, frame: bytes) -> None:
        self.socks[i].send(frame)

    def recv(self, i: int, timeout: float = 2.0) -> bytes | None:
        self.socks[i].settimeout(timeout)
        try:
            return self.socks[i].recv(9000)
        except TimeoutError:
            return None

    def delete(self) -> None:
        for s in self.socks:
            s.close()
        for a in self.sw:
            run("ip", "link", "del", a, check=False)


def frame(dst: str = "02:00:00:00:00:02", src: str = "02:00:00:00:00:01",
          payload: bytes = b"sluice") -> bytes:
    mac = bytes.fromhex
    body = payload + bytes(max(0, 46 - len(payload)))
    return (mac(dst.replace(":", "")) + mac(src.replace(":", "")) +
            struct.pack("!H", ETH_TEST) + body)


@pytest.fixture
def daemon(workdir: Path) -> Iterator[Daemon]:
    """sluiced without an agent of its own."""
    d = agent_daemon(workdir, "d", spawn=False).start()
    yield d
    assert d.stop() == 0, d.log.read_text()


@pytest.fixture
def ports() -> Iterator[Ports]:
    pp = Ports()
    yield pp
    pp.delete()


@pytest.fixture
def ctl(daemon: Daemon, ports: Ports) -> Iterator[Controller]:
    daemon.call("add-switch", name="br0", mode="flow")
    for i, iface in enumerate(ports.sw):
        daemon.call("add-port", switch="br0", name=f"p{i + 1}", spec=f"af_packet:iface={iface}")
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    lsock.settimeout(20)
    agent = start_agent(daemon, "br0", "--echo-interval", "1")
    try:
        daemon.call("set-datapath-id", switch="br0", datapath_id="0xbeef")
        daemon.call("set-controller", switch="br0",
                    targets=[f"tcp:127.0.0.1:{lsock.getsockname()[1]}"])
        conn, _ = lsock.accept()
        c = Controller(conn)
        hello = c.recv()
        assert isinstance(hello, p.OFPHello) and hello.version == ofp.OFP_VERSION
        c.send(p.OFPHello(DP))
        c.agent = agent     # type: ignore[attr-defined]
        yield c
        conn.close()
    finally:
        lsock.close()
        agent.stop()
        print(agent.text())      # shown when the test fails


def flow_mod(**kw: Any) -> Any:
    kw.setdefault("match", p.OFPMatch())
    return p.OFPFlowMod(DP, **kw)


def apply(*actions: Any) -> list[Any]:
    return [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, list(actions))]


def rules(daemon: Daemon) -> list[dict[str, Any]]:
    return daemon.call("dump-flows", switch="br0")["flows"]


def test_handshake_features_config_echo_barrier(ctl: Controller) -> None:
    f = ctl.expect(p.OFPSwitchFeatures, ctl.send(p.OFPFeaturesRequest(DP)))
    assert f.datapath_id == 0xBEEF and f.n_tables == 64 and f.n_buffers == 0
    assert f.capabilities & ofp.OFPC_FLOW_STATS
    ctl.send(p.OFPSetConfig(DP, 0, 256))
    cfg = ctl.expect(p.OFPGetConfigReply, ctl.send(p.OFPGetConfigRequest(DP)))
    assert cfg.miss_send_len == 256
    echo = ctl.expect(p.OFPEchoReply, ctl.send(p.OFPEchoRequest(DP, data=b"ping")))
    assert echo.data == b"ping"
    ctl.barrier()
    # a silent controller is probed (--echo-interval 1)
    req = ctl.expect(p.OFPEchoRequest, timeout=5)
    assert req is not None
    desc = ctl.expect(p.OFPDescStatsReply, ctl.send(p.OFPDescStatsRequest(DP, 0)))
    assert desc.body.mfr_desc.rstrip(b"\0") == b"sluice"


def test_flow_mods(ctl: Controller, daemon: Daemon) -> None:
    ctl.send(flow_mod(table_id=0, priority=10, cookie=0x11,
                      match=p.OFPMatch(in_port=1, eth_type=0x0800, ip_proto=6, tcp_dst=80),
                      instructions=apply(p.OFPActionOutput(2))))
    ctl.send(flow_mod(table_id=0, priority=5, cookie=0x22, match=p.OFPMatch(in_port=2),
                      instructions=[p.OFPInstructionGotoTable(1)]))
    ctl.send(flow_mod(table_id=1, priority=7, cookie=0x23,
                      match=p.OFPMatch(vlan_vid=(0x1000, 0x1000)),
                      instructions=apply(p.OFPActionPopVlan(), p.OFPActionOutput(1))))
    ctl.barrier()
    got = {(f["table"], f["priority"]): f for f in rules(daemon)}
    assert got[(0, 10)]["actions"] == "output:p2" and "tp_dst=80" in got[(0, 10)]["match"]
    assert got[(0, 5)]["actions"] == "goto_table:1"
    assert got[(1, 7)]["cookie"] == "0x23"

    # flow stats and aggregate come back as the controller wrote them
    st = ctl.expect(p.OFPFlowStatsReply, ctl.send(p.OFPFlowStatsRequest(DP, 0, ofp.OFPTT_ALL,
                    ofp.OFPP_ANY, ofp.OFPG_ANY, 0, 0, p.OFPMatch())))
    by_prio = {s.priority: s for s in st.body}
    assert by_prio[10].match["tcp_dst"] == 80 and by_prio[10].cookie == 0x11
    assert by_prio[10].instructions[0].actions[0].port == 2
    agg = ctl.expect(p.OFPAggregateStatsReply, ctl.send(p.OFPAggregateStatsRequest(
        DP, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, 0, 0, p.OFPMatch())))
    assert agg.body.flow_count == 3

    # modify (non-strict) by cookie, then modify_strict
    ctl.send(flow_mod(command=ofp.OFPFC_MODIFY, table_id=0, cookie=0x11, cookie_mask=0xff,
                      instructions=apply(p.OFPActionOutput(ofp.OFPP_FLOOD))))
    ctl.send(flow_mod(command=ofp.OFPFC_MODIFY_STRICT, table_id=0, priority=5,
                      match=p.OFPMatch(in_port=2), instructions=apply(p.OFPActionOutput(1))))
    ctl.barrier()
    got = {(f["table"], f["priority"]): f for f in rules(daemon)}
    assert got[(0, 10)]["actions"].lower() == "flood"
    assert got[(0, 5)]["actions"] == "output:p1"
    st = ctl.expect(p.OFPFlowStatsReply, ctl.send(p.OFPFlowStatsRequest(DP, 0, 0,
                    ofp.OFPP_ANY, ofp.OFPG_ANY, 0, 0, p.OFPMatch(in_port=2))))
    assert [s.instructions[0].actions[0].port for s in st.body] == [1]

    # delete by out_port, delete_strict, delete by cookie in every table
    ctl.send(flow_mod(command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL, out_port=1,
                      out_group=ofp.OFPG_ANY))
    ctl.barrier()
    assert {(f["table"], f["priority"]) for f in rules(daemon)} == {(0, 10)}
    ctl.send(flow_mod(command=ofp.OFPFC_DELETE_STRICT, table_id=0, priority=9,
                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                      match=p.OFPMatch(in_port=1, eth_type=0x0800, ip_proto=6, tcp_dst=80)))
    ctl.barrier()
    assert len(rules(daemon)) == 1           # priority 9 is not the rule's: kept
    ctl.send(flow_mod(command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL, cookie=0x11,
                      cookie_mask=0xffffffffffffffff, out_port=ofp.OFPP_ANY,
                      out_group=ofp.OFPG_ANY))
    ctl.barrier()
    assert rules(daemon) == []


def test_flow_mod_errors(ctl: Controller) -> None:
    ctl.send(flow_mod(priority=3, match=p.OFPMatch(in_port=1), flags=ofp.OFPFF_CHECK_OVERLAP,
                      instructions=apply(p.OFPActionOutput(2))))
    ctl.barrier()
    cases = [
        (flow_mod(priority=3, match=p.OFPMatch(in_port=1, eth_type=0x0800),
                  flags=ofp.OFPFF_CHECK_OVERLAP, instructions=apply(p.OFPActionOutput(2))),
         (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP)),
        (flow_mod(match=p.OFPMatch(eth_type=0x0806, arp_sha="02:00:00:00:00:01")),
         (ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_FIELD)),
        (flow_mod(match=p.OFPMatch(tcp_dst=22)),
         (ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_PREREQ)),
        (flow_mod(instructions=apply(p.OFPActionOutput(ofp.OFPP_LOCAL))),
         (ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_PORT)),
        (flow_mod(instructions=apply(p.OFPActionGroup(77))),
         (ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_GROUP)),
        (flow_mod(instructions=apply(p.OFPActionPushMpls(0x8847))),
         (ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_TYPE)),
        (flow_mod(instructions=apply(p.OFPActionSetField(arp_op=2))),
         (ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_SET_TYPE)),
        (flow_mod(table_id=70), (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_TABLE_ID)),
        (flow_mod(command=9), (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_COMMAND)),
        (flow_mod(table_id=2, instructions=[p.OFPInstructionGotoTable(1)]),
         (ofp.OFPET_BAD_INSTRUCTION, ofp.OFPBIC_BAD_TABLE_ID)),
        (p.OFPQueueGetConfigRequest(DP, 1), (ofp.OFPET_QUEUE_OP_FAILED, ofp.OFPQOFC_BAD_QUEUE)),
        (p.OFPPortMod(DP, 9, "02:00:00:00:00:09", 0, 0, 0),
         (ofp.OFPET_PORT_MOD_FAILED, ofp.OFPPMFC_BAD_PORT)),
        (p.OFPPacketOut(DP, buffer_id=7, in_port=1, actions=[p.OFPActionOutput(2)]),
         (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BUFFER_UNKNOWN)),
        (p.OFPExperimenter(DP, 0x1234, 1, b""), (ofp.OFPET_BAD_REQUEST,
                                                  ofp.OFPBRC_BAD_EXPERIMENTER)),
        (p.OFPPortStatsRequest(DP, 0, 9), (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_PORT)),
    ]
    for msg, want in cases:
        assert ctl.error_for(msg) == want, type(msg).__name__
    # a message type the agent does not take, and another OpenFlow version
    ctl.send_raw(struct.pack("!BBHI", ofp.OFP_VERSION, 99, 8, 4242))
    assert (ctl.expect(p.OFPErrorMsg).type, ctl.async_msgs or 0) is not None
    ctl.send_raw(struct.pack("!BBHI", 0x01, ofp.OFPT_BARRIER_REQUEST, 8, 4343))
    e = ctl.expect(p.OFPErrorMsg)
    assert (e.type, e.code) == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VERSION)
    ctl.barrier()              # the connection survived every refusal


def test_groups_and_meters(ctl: Controller, daemon: Daemon) -> None:
    buckets = [p.OFPBucket(weight=1, actions=[p.OFPActionOutput(1)]),
               p.OFPBucket(weight=2, actions=[p.OFPActionOutput(2)])]
    ctl.send(p.OFPGroupMod(DP, ofp.OFPGC_ADD, ofp.OFPGT_SELECT, 5, buckets))
    ctl.barrier()
    assert ctl.error_for(p.OFPGroupMod(DP, ofp.OFPGC_ADD, ofp.OFPGT_SELECT, 5, buckets)) == \
        (ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_GROUP_EXISTS)
    assert ctl.error_for(p.OFPGroupMod(DP, ofp.OFPGC_MODIFY, ofp.OFPGT_ALL, 6, buckets)) == \
        (ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_UNKNOWN_GROUP)
    desc = ctl.expect(p.OFPGroupDescStatsReply, ctl.send(p.OFPGroupDescStatsRequest(DP, 0)))
    assert [(g.group_id, g.type) for g in desc.body] == [(5, ofp.OFPGT_SELECT)]
    stats = ctl.expect(p.OFPGroupStatsReply, ctl.send(p.OFPGroupStatsRequest(DP, 0)))
    assert stats.body[0].group_id == 5
    feat = ctl.expect(p.OFPGroupFeaturesStatsReply,
                      ctl.send(p.OFPGroupFeaturesStatsRequest(DP, 0)))
    assert feat.body.types & (1 << ofp.OFPGT_FF)

    ctl.send(p.OFPMeterMod(DP, ofp.OFPMC_ADD, ofp.OFPMF_PKTPS, 3,
                           [p.OFPMeterBandDrop(rate=1000)]))
    ctl.send(flow_mod(priority=1, match=p.OFPMatch(in_port=1),
                      instructions=[p.OFPInstructionMeter(3)] + apply(p.OFPActionGroup(5))))
    ctl.barrier()
    assert rules(daemon)[0]["actions"].startswith("meter:3")
    assert ctl.error_for(p.OFPMeterMod(DP, ofp.OFPMC_ADD, ofp.OFPMF_KBPS, 4, [
        p.OFPMeterBandDrop(rate=10), p.OFPMeterBandDrop(rate=20)])) == \
        (ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_OUT_OF_BANDS)
    assert ctl.error_for(p.OFPMeterMod(DP, ofp.OFPMC_ADD, ofp.OFPMF_KBPS, 4, [
        p.OFPMeterBandDscpRemark(rate=10, prec_level=1)])) == \
        (ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_BAD_BAND)
    cfg = ctl.expect(p.OFPMeterConfigStatsReply, ctl.send(p.OFPMeterConfigStatsRequest(DP, 0)))
    assert cfg.body[0].meter_id == 3 and cfg.body[0].bands[0].rate == 1000
    ms = ctl.expect(p.OFPMeterStatsReply, ctl.send(p.OFPMeterStatsRequest(DP, 0)))
    assert ms.body[0].meter_id == 3
    mf = ctl.expect(p.OFPMeterFeaturesStatsReply,
                    ctl.send(p.OFPMeterFeaturesStatsRequest(DP, 0)))
    assert mf.body[0].max_bands == 1
    # deleting the group deletes the rule that used it (OpenFlow)
    ctl.send(p.OFPGroupMod(DP, ofp.OFPGC_DELETE, 0, 5))
    ctl.send(p.OFPMeterMod(DP, ofp.OFPMC_DELETE, 0, 3))
    ctl.barrier()
    assert rules(daemon) == []


def test_packet_in_out_and_flow_removed(ctl: Controller, daemon: Daemon, ports: Ports) -> None:
    ctl.send(flow_mod(priority=0, cookie=0x77, instructions=apply(
        p.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER))))
    ctl.send(flow_mod(table_id=0, priority=50, cookie=0x78,
                      match=p.OFPMatch(eth_dst="02:00:00:00:00:99"),
                      instructions=apply(p.OFPActionOutput(ofp.OFPP_CONTROLLER, 64))))
    ctl.barrier()
    ports.send(0, frame())
    pin = ctl.expect(p.OFPPacketIn, timeout=5)
    assert pin.match["in_port"] == 1 and pin.reason == ofp.OFPR_NO_MATCH
    assert pin.cookie == 0x77 and pin.table_id == 0 and pin.data[:14] == frame()[:14]
    ports.send(1, frame(dst="02:00:00:00:00:99"))
    pin = ctl.expect(p.OFPPacketIn, timeout=5)
    assert pin.match["in_port"] == 2 and pin.reason == ofp.OFPR_ACTION and pin.cookie == 0x78
    # the reason is the rule's, not its cookie's: a rule with the table-miss entry's cookie
    # is OFPR_ACTION, and so is a priority-0 rule that matches something
    ctl.send(flow_mod(table_id=0, priority=40, cookie=0x77,
                      match=p.OFPMatch(eth_dst="02:00:00:00:00:98"),
                      instructions=apply(p.OFPActionOutput(ofp.OFPP_CONTROLLER, 64))))
    ctl.send(flow_mod(table_id=0, priority=0, cookie=0x77,
                      match=p.OFPMatch(eth_dst="02:00:00:00:00:97"),
                      instructions=apply(p.OFPActionOutput(ofp.OFPP_CONTROLLER, 64))))
    ctl.barrier()
    for dst in ("02:00:00:00:00:98", "02:00:00:00:00:97"):
        ports.send(0, frame(dst=dst))
        pin = ctl.expect(p.OFPPacketIn, timeout=5)
        assert (pin.reason, pin.cookie) == (ofp.OFPR_ACTION, 0x77), dst

    # packet-out to a port, to FLOOD, and through the tables (OFPP_TABLE)
    out = frame(payload=b"packet-out")
    ctl.send(p.OFPPacketOut(DP, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                            actions=[p.OFPActionOutput(2)], data=out))
    assert ports.recv(1) == out
    ctl.send(p.OFPPacketOut(DP, buffer_id=ofp.OFP_NO_BUFFER, in_port=1,
                            actions=[p.OFPActionOutput(ofp.OFPP_FLOOD)], data=out))
    assert ports.recv(1) == out
    ctl.send(p.OFPPacketOut(DP, buffer_id=ofp.OFP_NO_BUFFER, in_port=2,
                            actions=[p.OFPActionOutput(ofp.OFPP_TABLE)], data=out))
    pin = ctl.expect(p.OFPPacketIn, timeout=5)
    assert pin.match["in_port"] == 2 and bytes(pin.data) == out

    # a rule with send_flow_rem and a hard timeout leaves a flow-removed; one without the
    # flag, removed by the same kind of timeout at the same moment, leaves none
    ctl.send(flow_mod(priority=8, cookie=0x4, hard_timeout=1, match=p.OFPMatch(in_port=1),
                      instructions=apply(p.OFPActionOutput(2))))
    ctl.send(flow_mod(priority=9, cookie=0x5, hard_timeout=1, flags=ofp.OFPFF_SEND_FLOW_REM,
                      match=p.OFPMatch(in_port=2), instructions=apply(p.OFPActionOutput(1))))
    rem = ctl.expect(p.OFPFlowRemoved, timeout=6)
    assert rem.reason == ofp.OFPRR_HARD_TIMEOUT and rem.priority == 9
    assert rem.match["in_port"] == 2
    assert rem.cookie == 0x5 and rem.hard_timeout == 1 and rem.idle_timeout == 0
    wait_for(lambda: not any(f["priority"] == 8 for f in daemon.call(
        "dump-flows", switch="br0")["flows"]), timeout=5)
    with pytest.raises(TimeoutError):
        ctl.expect(p.OFPFlowRemoved, timeout=1.5)

    # OFPCML_NO_BUFFER: the whole frame, not its first 128 bytes
    big = frame(payload=b"x" * 900)
    ports.send(0, big)
    pin = ctl.expect(p.OFPPacketIn, timeout=5)
    assert pin.total_len == len(big) and bytes(pin.data) == big


def test_ports_tables_roles(ctl: Controller, daemon: Daemon, ports: Ports) -> None:
    desc = ctl.expect(p.OFPPortDescStatsReply, ctl.send(p.OFPPortDescStatsRequest(DP, 0)))
    assert [(d.port_no, d.name.rstrip(b"\0")) for d in desc.body] == [(1, b"p1"), (2, b"p2")]
    ports.send(0, frame())
    wait_for(lambda: daemon.port_stats("br0")["p1"]["rx_packets"] >= 1)
    st = ctl.expect(p.OFPPortStatsReply, ctl.send(p.OFPPortStatsRequest(DP, 0, ofp.OFPP_ANY)))
    assert {s.port_no for s in st.body} == {1, 2}
    assert next(s for s in st.body if s.port_no == 1).rx_packets >= 1
    ts = ctl.expect(p.OFPTableStatsReply, ctl.send(p.OFPTableStatsRequest(DP, 0)))
    assert len(ts.body) == 64
    tf = ctl.expect(p.OFPTableFeaturesStatsReply, ctl.send(p.OFPTableFeaturesStatsRequest(DP, 0)))
    assert tf.body[0].table_id == 0

    # port-status when a port's link goes down and up, and when a port is deleted
    run("ip", "link", "set", ports.peer[0], "down")
    ps = ctl.expect(p.OFPPortStatus, timeout=5)
    assert ps.reason == ofp.OFPPR_MODIFY and ps.desc.port_no == 1
    assert ps.desc.state & ofp.OFPPS_LINK_DOWN
    run("ip", "link", "set", ports.peer[0], "up")
    ps = ctl.expect(p.OFPPortStatus, timeout=5)
    assert ps.reason == ofp.OFPPR_MODIFY and not ps.desc.state & ofp.OFPPS_LINK_DOWN
    daemon.call("del-port", switch="br0", name="p2")
    ps = ctl.expect(p.OFPPortStatus, timeout=5)
    assert ps.reason == ofp.OFPPR_DELETE and ps.desc.port_no == 2

    # roles: master, then a stale generation is refused, slaves may not change rules
    r = ctl.expect(p.OFPRoleReply, ctl.send(p.OFPRoleRequest(DP, ofp.OFPCR_ROLE_MASTER, 5)))
    assert r.role == ofp.OFPCR_ROLE_MASTER
    assert ctl.error_for(p.OFPRoleRequest(DP, ofp.OFPCR_ROLE_MASTER, 4)) == \
        (ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE)
    ctl.expect(p.OFPRoleReply, ctl.send(p.OFPRoleRequest(DP, ofp.OFPCR_ROLE_SLAVE, 6)))
    assert ctl.error_for(flow_mod()) == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE)
    # the state shows in sluiced
    wait_for(lambda: daemon.call("get-controller", switch="br0")["status"]["connections"][0]
             ["role"] == "slave")


def test_reconnect_and_standalone(daemon: Daemon, ports: Ports) -> None:
    """No controller listening: the agent retries with back-off; standalone forwards by
    `normal` meanwhile; a controller that comes up later gets the switch."""
    daemon.call("add-switch", name="br0", mode="flow")
    for i, iface in enumerate(ports.sw):
        daemon.call("add-port", switch="br0", name=f"p{i + 1}", spec=f"af_packet:iface={iface}")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    agent: Proc = start_agent(daemon, "br0")
    try:
        daemon.call("set-fail-mode", switch="br0", mode="standalone")
        daemon.call("set-controller", switch="br0", targets=[f"tcp:127.0.0.1:{port}"])
        wait_for(lambda: any(f["actions"].lower() == "normal" for f in rules(daemon)))
        ports.send(0, frame(dst="ff:ff:ff:ff:ff:ff"))
        assert ports.recv(1) is not None           # flooded by the normal action
        wait_for(lambda: daemon.call("get-controller", switch="br0")["status"]
                 ["connections"][0]["error"] != "")
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", port))
        lsock.listen(1)
        lsock.settimeout(20)
        conn, _ = lsock.accept()                   # the back-off is at most 8 s
        c = Controller(conn)
        c.recv()
        c.send(p.OFPHello(DP))
        c.barrier()
        wait_for(lambda: not any(f["actions"].lower() == "normal" for f in rules(daemon)))
        conn.close()
        lsock.close()
        # the state file keeps the settings
        show = daemon.call("show")["switches"][0]["openflow"]
        assert show["fail_mode"] == "standalone" and show["targets"]
    finally:
        agent.stop()
        print(agent.text())


def test_settings_survive_a_restart(workdir: Path) -> None:
    """Controllers, datapath id and fail mode are in the state file like everything else;
    bad settings are refused with a message naming them."""
    state = workdir / "of.state"
    d = Daemon(workdir, "ofst", ["--state", str(state), "--no-ofagent"]).start()
    try:
        d.call("add-switch", name="br0", mode="flow")
        d.call("set-controller", switch="br0",
               targets=["tcp:127.0.0.1:6653", "tcp:[::1]:6654"])
        d.call("set-datapath-id", switch="br0", datapath_id="00000000000000a1")
        d.call("set-fail-mode", switch="br0", mode="standalone")
        for method, params, word in (
                ("set-controller", {"targets": ["udp:1.2.3.4"]}, "expected tcp"),
                ("set-controller", {"targets": ["ssl:1.2.3.4"]}, "ssl_key"),
                ("set-controller", {"targets": ["tcp:1.2.3.4:70000"]}, "expected tcp"),
                ("set-datapath-id", {"datapath_id": "0"}, "not zero"),
                ("set-datapath-id", {"datapath_id": "xyz"}, "hex"),
                ("set-fail-mode", {"mode": "open"}, "secure or standalone")):
            with pytest.raises(RpcError) as exc:
                d.call(method, switch="br0", **params)
            assert exc.value.code == -32602 and word in exc.value.message, exc.value
        d.call("add-switch", name="lr", mode="learn")
        with pytest.raises(RpcError) as exc:
            d.call("set-controller", switch="lr", targets=[])
        assert exc.value.code == -32005
        d.stop()
        d.start()
        of = d.call("get-controller", switch="br0")
        assert of["targets"] == ["tcp:127.0.0.1:6653", "tcp:[::1]:6654"]
        assert of["datapath_id"] == "00000000000000a1" and of["fail_mode"] == "standalone"
        d.call("del-controller", switch="br0")
        assert d.call("get-controller", switch="br0")["targets"] == []
    finally:
        d.stop()


def test_sluiced_runs_the_agent(workdir: Path) -> None:
    """set-controller is all it takes: sluiced starts the agent, starts it again when it
    dies, and stops it on del-controller."""
    d = agent_daemon(workdir, "run", spawn=True).start()
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    lsock.settimeout(20)
    try:
        d.call("add-switch", name="br0", mode="flow")
        d.call("set-controller", switch="br0", targets=[f"tcp:127.0.0.1:{lsock.getsockname()[1]}"])
        conn, _ = lsock.accept()
        assert isinstance(Controller(conn).recv(), p.OFPHello)
        m = re.search(r"OpenFlow agent started \(.*, pid (\d+)\)", d.log.read_text())
        assert m is not None, d.log.read_text()
        os.kill(int(m.group(1)), signal.SIGKILL)
        conn.close()
        conn, _ = lsock.accept()                  # started again after its back-off
        assert isinstance(Controller(conn).recv(), p.OFPHello)
        assert "ended by signal 9" in d.log.read_text()
        d.call("del-controller", switch="br0")
        wait_for(lambda: d.log.read_text().count("OpenFlow agent (pid") >= 2)
        conn.close()
    finally:
        lsock.close()
        assert d.stop() == 0


def make_certs(d: Path) -> None:
    """A CA, and a certificate of it for the controller and one for the switch."""
    def ossl(*args: str) -> None:
        run("openssl", *args)
    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
         "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))
    for who in ("ctl", "sw"):
        ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}",
             "-keyout", str(d / f"{who}.key"), "-out", str(d / f"{who}.csr"))
        ossl("x509", "-req", "-in", str(d / f"{who}.csr"), "-CA", str(d / "ca.pem"),
             "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1",
             "-out", str(d / f"{who}.pem"))


def test_ssl_controller(daemon: Daemon, workdir: Path) -> None:
    """ssl: targets: the agent presents the switch's certificate and checks the
    controller's against the CA; the controller checks the switch's."""
    make_certs(workdir)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(workdir / "ca.pem"))
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_cert_chain(str(workdir / "ctl.pem"), str(workdir / "ctl.key"))
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    lsock.settimeout(20)
    daemon.call("add-switch", name="br0", mode="flow")
    agent = start_agent(daemon, "br0")
    try:
        daemon.call("set-controller", switch="br0",
                    targets=[f"ssl:127.0.0.1:{lsock.getsockname()[1]}"],
                    ssl_key=str(workdir / "sw.key"), ssl_cert=str(workdir / "sw.pem"),
                    ssl_ca=str(workdir / "ca.pem"))
        raw, _ = lsock.accept()
        conn = ctx.wrap_socket(raw, server_side=True)
        assert conn.getpeercert()["subject"] == ((("commonName", "sw"),),)
        c = Controller(conn)
        assert isinstance(c.recv(), p.OFPHello)
        c.send(p.OFPHello(DP))
        f = c.expect(p.OFPSwitchFeatures, c.send(p.OFPFeaturesRequest(DP)))
        assert f.n_tables == 64
        conn.close()
    finally:
        lsock.close()
        agent.stop()
        print(agent.text())


def test_flow_mods_in_one_write(ctl: Controller, daemon: Daemon) -> None:
    """Adds that arrive together go to sluiced as one add-flows; one bad add among them
    is answered with its own error and the others are installed."""
    msgs, xids = [], []
    for i, act in enumerate((p.OFPActionOutput(1), p.OFPActionGroup(77), p.OFPActionOutput(2),
                             p.OFPActionOutput(1))):
        m = flow_mod(priority=10 + i, match=p.OFPMatch(in_port=1 + i % 2),
                     instructions=apply(act))
        ctl.xid += 1
        m.set_xid(ctl.xid)
        m.serialize()
        msgs.append(bytes(m.buf))
        xids.append(ctl.xid)
    ctl.send_raw(b"".join(msgs))
    e = ctl.expect(p.OFPErrorMsg, xids[1])
    assert (e.type, e.code) == (ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_GROUP)
    ctl.barrier()
    assert sorted(f["priority"] for f in rules(daemon)) == [10, 12, 13]
    # a clean run of adds is installed whole
    msgs = []
    for i in range(50):
        m = flow_mod(table_id=1, priority=100 + i, match=p.OFPMatch(in_port=1),
                     instructions=apply(p.OFPActionOutput(2)))
        ctl.xid += 1
        m.set_xid(ctl.xid)
        m.serialize()
        msgs.append(bytes(m.buf))
    ctl.send_raw(b"".join(msgs))
    ctl.barrier()
    assert len([f for f in rules(daemon) if f["table"] == 1]) == 50


def port_config(ctl: Controller, port_no: int) -> tuple[int, int]:
    desc = ctl.expect(p.OFPPortDescStatsReply, ctl.send(p.OFPPortDescStatsRequest(DP, 0)))
    d = next(d for d in desc.body if d.port_no == port_no)
    return d.config, d.state


def port_mod(ctl: Controller, port_no: int, config: int, mask: int) -> Any:
    """Sends a port-mod (the port's own address, as the specification asks) and returns
    the port-status it brings."""
    desc = ctl.expect(p.OFPPortDescStatsReply, ctl.send(p.OFPPortDescStatsRequest(DP, 0)))
    mac = next(d.hw_addr for d in desc.body if d.port_no == port_no)
    ctl.send(p.OFPPortMod(DP, port_no, mac, config, mask, 0))
    ctl.barrier()
    ps = ctl.expect(p.OFPPortStatus, timeout=5)
    assert ps.reason == ofp.OFPPR_MODIFY and ps.desc.port_no == port_no
    assert ps.desc.config == config & mask or ps.desc.config & mask == config & mask
    return ps


def test_port_mod_config(ctl: Controller, daemon: Daemon, ports: Ports) -> None:
    """port-mod's config bits, honoured with real frames: each frame the config stops is
    counted with its reason, in `stats` and `show`."""
    def drops(port: str) -> dict[str, int]:
        return daemon.port_stats("br0")[port]["drops"]

    def sent_through(i: int, j: int, f: bytes) -> bool:
        ports.send(i, f)
        got = ports.recv(j, timeout=1.0)
        while got is not None and got != f:     # something else: read on
            got = ports.recv(j, timeout=1.0)
        return got == f

    ctl.send(flow_mod(priority=10, match=p.OFPMatch(in_port=1),
                      instructions=apply(p.OFPActionOutput(2))))
    ctl.send(flow_mod(priority=10, match=p.OFPMatch(in_port=2),
                      instructions=apply(p.OFPActionOutput(1))))
    ctl.send(flow_mod(priority=20, match=p.OFPMatch(eth_dst="02:00:00:00:00:99"),
                      instructions=apply(p.OFPActionOutput(ofp.OFPP_CONTROLLER,
                                                           ofp.OFPCML_NO_BUFFER))))
    ctl.send(flow_mod(priority=20, match=p.OFPMatch(eth_dst="02:00:00:00:00:ff"),
                      instructions=apply(p.OFPActionOutput(ofp.OFPP_FLOOD))))
    ctl.barrier()
    assert sent_through(0, 1, frame(payload=b"before"))

    # NO_FWD on p2: nothing goes out of it; the frame is counted as port_no_fwd on p1
    ps = port_mod(ctl, 2, ofp.OFPPC_NO_FWD, ofp.OFPPC_NO_FWD)
    assert ps.desc.config == ofp.OFPPC_NO_FWD
    assert port_config(ctl, 2)[0] == ofp.OFPPC_NO_FWD
    listed = {q["name"]: q for q in daemon.call("show")["switches"][0]["ports"]}
    assert listed["p2"]["of_config"] == "no_fwd" and listed["p1"]["of_config"] == ""
    before = drops("p1")["port_no_fwd"]
    assert not sent_through(0, 1, frame(payload=b"no-fwd"))
    wait_for(lambda: drops("p1")["port_no_fwd"] == before + 1)
    assert sent_through(1, 0, frame(payload=b"other way"))    # p2 still receives
    out = frame(payload=b"packet-out to no_fwd")                # nor does a packet-out
    ctl.send(p.OFPPacketOut(DP, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                            actions=[p.OFPActionOutput(2)], data=out))
    ctl.barrier()
    assert ports.recv(1, timeout=1.0) is None

    # NO_FLOOD on p2 (NO_FWD off): a unicast output reaches it, a flood does not
    port_mod(ctl, 2, 1 << 4, ofp.OFPPC_NO_FWD | 1 << 4)
    assert sent_through(0, 1, frame(payload=b"unicast"))
    before = drops("p1")["port_no_fwd"]
    assert not sent_through(0, 1, frame(dst="02:00:00:00:00:ff", payload=b"flood"))
    wait_for(lambda: drops("p1")["port_no_fwd"] == before + 1)
    port_mod(ctl, 2, 0, 1 << 4)
    assert sent_through(0, 1, frame(dst="02:00:00:00:00:ff", payload=b"flood again"))

    # NO_RECV on p1: what it receives is dropped as port_no_recv; it still sends
    port_mod(ctl, 1, ofp.OFPPC_NO_RECV, ofp.OFPPC_NO_RECV)
    before = drops("p1")["port_no_recv"]
    assert not sent_through(0, 1, frame(payload=b"no-recv"))
    wait_for(lambda: drops("p1")["port_no_recv"] == before + 1)
    assert sent_through(1, 0, frame(payload=b"to p1"))
    port_mod(ctl, 1, 0, ofp.OFPPC_NO_RECV)

    # NO_PACKET_IN on p2: its frames for the controller are dropped as port_no_packet_in
    port_mod(ctl, 2, ofp.OFPPC_NO_PACKET_IN, ofp.OFPPC_NO_PACKET_IN)
    before = drops("p2")["port_no_packet_in"]
    ports.send(1, frame(dst="02:00:00:00:00:99", payload=b"quiet"))
    wait_for(lambda: drops("p2")["port_no_packet_in"] == before + 1)
    ports.send(0, frame(dst="02:00:00:00:00:99", payload=b"loud"))    # p1 may
    pin = ctl.expect(p.OFPPacketIn, timeout=5)
    assert pin.match["in_port"] == 1
    with pytest.raises(TimeoutError):
        ctl.expect(p.OFPPacketIn, timeout=1)
    port_mod(ctl, 2, 0, ofp.OFPPC_NO_PACKET_IN)

    # PORT_DOWN on p2: neither receives nor sends, and reads as down in port-desc
    ps = port_mod(ctl, 2, ofp.OFPPC_PORT_DOWN, ofp.OFPPC_PORT_DOWN)
    assert ps.desc.config == ofp.OFPPC_PORT_DOWN and ps.desc.state & ofp.OFPPS_LINK_DOWN
    before1, before2 = drops("p1")["port_down"], drops("p2")["port_down"]
    assert not sent_through(0, 1, frame(payload=b"to a down port"))
    assert not sent_through(1, 0, frame(payload=b"from a down port"))
    wait_for(lambda: (drops("p1")["port_down"], drops("p2")["port_down"]) ==
             (before1 + 1, before2 + 1))
    ps = port_mod(ctl, 2, 0, ofp.OFPPC_PORT_DOWN)
    assert ps.desc.config == 0 and not ps.desc.state & ofp.OFPPS_LINK_DOWN
    assert sent_through(0, 1, frame(payload=b"after"))

    # bits OpenFlow 1.3 does not define are refused
    desc = ctl.expect(p.OFPPortDescStatsReply, ctl.send(p.OFPPortDescStatsRequest(DP, 0)))
    mac = next(d.hw_addr for d in desc.body if d.port_no == 1)
    assert ctl.error_for(p.OFPPortMod(DP, 1, mac, 1 << 3, 1 << 3, 0)) == \
        (ofp.OFPET_PORT_MOD_FAILED, ofp.OFPPMFC_BAD_CONFIG)
    # every frame is accounted for in the human view too
    text = run(str(Path(__file__).resolve().parents[2] / "bin" / "sluicectl"), "--socket",
               str(daemon.socket), "stats", "br0").stdout
    assert "port_no_fwd=" in text and "port_down=" in text and "port_no_recv=" in text


def test_port_config_set_and_kept(workdir: Path) -> None:
    """set-port of_config: flow switches only, names checked, kept in the state file."""
    state = workdir / "pc.state"
    d = Daemon(workdir, "pc", ["--state", str(state), "--no-ofagent"]).start()
    try:
        d.call("add-switch", name="br0", mode="flow")
        d.call("add-port", switch="br0", name="n1", spec="null")
        d.call("set-port", switch="br0", name="n1", of_config="no_fwd,no_packet_in")
        with pytest.raises(RpcError) as exc:
            d.call("set-port", switch="br0", name="n1", of_config="no_such")
        assert exc.value.code == -32602 and "no_recv" in exc.value.message
        d.call("add-switch", name="lr", mode="learn")
        d.call("add-port", switch="lr", name="n2", spec="null")
        with pytest.raises(RpcError) as exc:
            d.call("set-port", switch="lr", name="n2", of_config="down")
        assert "flow switch" in exc.value.message
        d.stop()
        d.start()
        ports = {q["name"]: q for s in d.call("show")["switches"] for q in s["ports"]}
        assert ports["n1"]["of_config"] == "no_fwd,no_packet_in"
        d.call("set-port", switch="br0", name="n1", of_config="none")
        ports = {q["name"]: q for s in d.call("show")["switches"] for q in s["ports"]}
        assert ports["n1"]["of_config"] == ""
    finally:
        d.stop()


def test_table_stats_count_lookups_and_matches(ctl: Controller, ports: Ports) -> None:
    """Table stats: a frame no rule of a table takes is a lookup there but no match (the
    conformance suite's table-miss tests read exactly this)."""
    def table(t: int) -> Any:
        ts = ctl.expect(p.OFPTableStatsReply, ctl.send(p.OFPTableStatsRequest(DP, 0)))
        return ts.body[t]

    ctl.send(flow_mod(priority=10, match=p.OFPMatch(in_port=1),
                      instructions=apply(p.OFPActionOutput(2)) +
                      [p.OFPInstructionGotoTable(1)]))
    ctl.send(flow_mod(table_id=1, priority=10, match=p.OFPMatch(eth_dst="02:00:00:00:00:07"),
                      instructions=apply()))
    ctl.barrier()
    t0, t1 = table(0), table(1)
    assert (t0.active_count, t1.active_count) == (1, 1)
    ports.send(0, frame())                              # table 0 matches, table 1 misses
    ports.send(0, frame(dst="02:00:00:00:00:07"))       # both match
    ports.send(1, frame())                              # table 0 misses
    wait_for(lambda: table(0).lookup_count - t0.lookup_count == 3)
    a0, a1 = table(0), table(1)
    assert a0.matched_count - t0.matched_count == 2
    assert (a1.lookup_count - t1.lookup_count, a1.matched_count - t1.matched_count) == (2, 1)
