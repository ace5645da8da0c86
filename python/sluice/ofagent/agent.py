"""sluice-ofagent: one flow switch of sluiced, driven by OpenFlow 1.3 controllers.

The agent reads the switch's controller settings from sluiced (set-controller,
set-datapath-id, set-fail-mode), keeps a connection to each controller (reconnecting with
back-off, echo keep-alive), and turns each message into sluiced's JSON-RPC methods: a
flow-mod becomes the flow-mode rule text of add-flow/mod-flows/del-flows, a packet-out the
packet-out method. sluiced's event stream (subscribe) brings packet-ins, removed rules and
port changes, which go to the controllers as packet-in, flow-removed and port-status.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import ssl
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from sluice.ofagent import wire
from sluice.ofagent.rpcasync import AsyncRpc
from sluice.ofagent.translate import (
    flow_mod_text,
    group_text,
    match_from_text,
    match_text,
    meter_text,
)
from sluice.ofagent.wire import OFError
from sluice.rpc import RpcError, default_socket

log = logging.getLogger("sluice-ofagent")

N_TABLES = 64
ECHO_INTERVAL = 5.0          # an idle connection is probed this often
ECHO_MISSES = 3              # unanswered probes before the connection is given up
BACKOFF_MIN, BACKOFF_MAX = 1.0, 8.0
PACKET_IN_RATE = 1000        # packet-ins a second to the controllers (token bucket)
FAIL_OPEN_COOKIE = 0x5157CE0000000001   # the standalone rule's, to find it again
CAPABILITIES = (ofp.OFPC_FLOW_STATS | ofp.OFPC_TABLE_STATS | ofp.OFPC_PORT_STATS |
                ofp.OFPC_GROUP_STATS)
FAIL_OPEN_AFTER = 3.0        # seconds without a controller before standalone takes over
PORT_SPEED_KBPS = 10_000_000
READ_CHUNK = 256 * 1024      # bytes read from a controller at once
BATCH_MAX = 4096             # flow-mod adds sent to sluiced in one add-flows
PORT_CURR = ofp.OFPPF_10GB_FD | ofp.OFPPF_COPPER


@dataclass
class Conn:
    target: str
    writer: asyncio.StreamWriter | None = None
    connected: bool = False
    role: int = ofp.OFPCR_ROLE_EQUAL
    last_rx: float = 0.0
    echo_pending: int = 0
    miss_send_len: int = 128
    config_flags: int = 0
    since: float = 0.0
    error: str = ""
    xid: int = 0x10000


@dataclass
class Counters:
    packet_ins: int = 0
    packet_ins_dropped: int = 0        # over the rate limit, or nobody connected
    packet_outs: int = 0
    flow_mods: int = 0
    errors_sent: int = 0
    flow_removed: int = 0
    port_status: int = 0


# A port's OpenFlow config as sluiced names it (set-port of_config, show's of_config).
PORT_CONFIG_NAMES = {"down": ofp.OFPPC_PORT_DOWN, "no_recv": ofp.OFPPC_NO_RECV,
                     "no_flood": 1 << 4, "no_fwd": ofp.OFPPC_NO_FWD,
                     "no_packet_in": ofp.OFPPC_NO_PACKET_IN}
PORT_CONFIG_ALL = sum(PORT_CONFIG_NAMES.values())


def config_bits(names: str) -> int:
    return sum(PORT_CONFIG_NAMES[n] for n in names.split(",") if n in PORT_CONFIG_NAMES)


def config_names(bits: int) -> str:
    return ",".join(n for n, b in PORT_CONFIG_NAMES.items() if bits & b) or "none"


@dataclass
class PortInfo:
    ofport: int
    name: str
    mac: str
    up: bool
    config: int = 0

    @classmethod
    def from_event(cls, p: dict[str, Any]) -> PortInfo:
        return cls(p["ofport"], p["name"], p["mac"], p["link"] == "up",
                   config_bits(p.get("of_config", "")))


@dataclass
class Agent:
    socket_path: str
    switch: str
    echo_interval: float = ECHO_INTERVAL
    rpc: AsyncRpc = field(init=False)
    events: AsyncRpc = field(init=False)
    conns: dict[str, Conn] = field(default_factory=dict)
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    ports: dict[int, PortInfo] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)
    instructions: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    tokens: float = PACKET_IN_RATE
    last_refill: float = field(default_factory=time.monotonic)
    generation_id: int = -1
    fail_open: bool = False
    last_connected: float = field(default_factory=time.monotonic)
    start: float = field(default_factory=time.monotonic)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    # ---- sluiced side ----

    async def run(self) -> None:
        self.rpc = AsyncRpc(self.socket_path)
        self.events = AsyncRpc(self.socket_path, self.on_event)
        await self.rpc.open()
        await self.events.open()
        snap = await self.events.call("subscribe", switch=self.switch)
        for p in snap["ports"]:
            self.ports[p["ofport"]] = PortInfo.from_event(p)
        await self.reload()
        status = asyncio.create_task(self.report_loop())
        done = asyncio.create_task(self.events.closed.wait())
        stop = asyncio.create_task(self.stopping.wait())
        await asyncio.wait({done, stop}, return_when=asyncio.FIRST_COMPLETED)
        for t in [status, done, stop, *self.tasks.values()]:
            t.cancel()
        await asyncio.gather(status, done, stop, *self.tasks.values(), return_exceptions=True)
        for c in self.conns.values():
            if c.writer is not None:
                c.writer.close()
        await self.rpc.close()
        await self.events.close()

    async def reload(self) -> None:
        """Reads the controller settings and connects to the targets they name."""
        self.settings = await self.rpc.call("get-controller", switch=self.switch)
        targets = set(self.settings["targets"])
        for t in list(self.tasks):
            if t not in targets:
                self.tasks.pop(t).cancel()
                self.conns.pop(t, None)
        for t in targets:
            if t not in self.tasks:
                self.conns[t] = Conn(t)
                self.tasks[t] = asyncio.create_task(self.keep_connected(self.conns[t]))
        await self.check_fail_mode()

    @property
    def dpid(self) -> int:
        return int(self.settings.get("datapath_id", "1"), 16)

    def any_connected(self) -> bool:
        return any(c.connected for c in self.conns.values())

    async def check_fail_mode(self) -> None:
        """Standalone: `normal` forwarding once no controller has been connected for
        FAIL_OPEN_AFTER seconds (as OVS's fail-open; a short gap, or the agent's own
        restart, leaves the controller's rules alone)."""
        if self.any_connected():
            self.last_connected = time.monotonic()
        want = (self.settings.get("fail_mode") == "standalone" and not self.any_connected()
                and time.monotonic() - self.last_connected >= FAIL_OPEN_AFTER)
        if want and not self.fail_open:
            await self.rpc.call("replace-flows", switch=self.switch, flows=[
                f"priority=0,cookie={FAIL_OPEN_COOKIE:#x},actions=normal"])
            self.fail_open = True
            log.info("%s: no controller connected: standalone, normal forwarding", self.switch)
        elif not want and self.fail_open:
            with contextlib.suppress(RpcError):
                await self.rpc.call("del-flows", switch=self.switch,
                                    flow=f"cookie={FAIL_OPEN_COOKIE:#x}/0xffffffffffffffff")
            self.fail_open = False

    async def report_loop(self) -> None:
        while True:
            status = {
                "agent": "sluice-ofagent",
                "connections": [{"target": c.target, "connected": c.connected,
                                 "role": {0: "nochange", 1: "equal", 2: "master",
                                          3: "slave"}[c.role],
                                 "since": round(time.monotonic() - c.since, 1) if c.since else 0,
                                 "error": c.error} for c in self.conns.values()],
                "fail_open": self.fail_open,
                **self.counters.__dict__,
            }
            with contextlib.suppress(RpcError, ConnectionError):
                await self.rpc.call("set-controller-status", switch=self.switch, status=status)
                await self.check_fail_mode()
            await asyncio.sleep(1.0)

    async def on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "packet-in":
            self.packet_in(params)
        elif method == "flow-removed":
            self.flow_removed(params)
        elif method == "port-status":
            self.port_status(params)
        elif method == "controller-config":
            asyncio.get_running_loop().create_task(self.reload())
        elif method == "switch-deleted":
            self.stopping.set()

    # ---- events to controllers ----

    def broadcast(self, msg: bytes, async_kind: str) -> bool:
        sent = False
        for c in self.conns.values():
            if c.connected and c.writer is not None and c.role != ofp.OFPCR_ROLE_SLAVE:
                c.writer.write(msg)
                sent = True
        return sent

    def packet_in(self, p: dict[str, Any]) -> None:
        log.debug("%s: packet-in %s", self.switch, p)
        now = time.monotonic()
        self.tokens = min(PACKET_IN_RATE, self.tokens + (now - self.last_refill) * PACKET_IN_RATE)
        self.last_refill = now
        if self.tokens < 1 or not self.any_connected():
            self.counters.packet_ins_dropped += 1
            return
        self.tokens -= 1
        data = bytes.fromhex(p["data"])
        cookie = int(p["cookie"], 16)
        # sluiced tells a table-miss entry's (priority 0, empty match) packet-ins apart.
        reason = ofp.OFPR_NO_MATCH if p["reason"] == "no_match" else ofp.OFPR_ACTION
        msg = wire.packet_in(reason, p["table"], cookie, p["in_port"], p["total_len"], data)
        if self.broadcast(msg, "packet_in"):
            self.counters.packet_ins += 1
        else:
            self.counters.packet_ins_dropped += 1

    def flow_removed(self, p: dict[str, Any]) -> None:
        # OpenFlow 1.3 tells a controller of a removed rule only when the rule had
        # OFPFF_SEND_FLOW_REM; sluiced records timeouts of every rule (flows-removed).
        if not p.get("send_flow_rem", False):
            return
        text = p["flow"]
        fields = dict(t.split("=", 1) for t in text.split(",")[:2])
        rest = ",".join(text.split(",")[2:])
        reason = {"idle_timeout": ofp.OFPRR_IDLE_TIMEOUT, "hard_timeout": ofp.OFPRR_HARD_TIMEOUT,
                  "delete": ofp.OFPRR_DELETE}.get(p["reason"], ofp.OFPRR_DELETE)
        match = match_from_text(rest, self.port_names())
        cookie = int(p.get("cookie", "0"), 16) if isinstance(p.get("cookie"), str) else 0
        msg = wire.flow_removed(cookie, int(fields.get("priority", 0)), reason,
                                int(fields.get("table", 0)), float(p["duration"]),
                                int(p.get("idle_timeout", 0)), int(p.get("hard_timeout", 0)),
                                p["packets"], p["bytes"], match)
        self.broadcast(msg, "flow_removed")
        self.counters.flow_removed += 1

    def port_names(self) -> dict[str, int]:
        return {p.name: p.ofport for p in self.ports.values()}

    def port_bytes(self, p: PortInfo) -> bytes:
        mac = bytes.fromhex(p.mac.replace(":", ""))
        # A port the controller took down has no link as far as OpenFlow goes (as OVS).
        up = p.up and not p.config & ofp.OFPPC_PORT_DOWN
        state = ofp.OFPPS_LIVE if up else ofp.OFPPS_LINK_DOWN
        return wire.port_struct(p.ofport, mac, p.name, p.config, state, PORT_CURR,
                                PORT_SPEED_KBPS)

    def port_status(self, p: dict[str, Any]) -> None:
        reason = {"add": ofp.OFPPR_ADD, "delete": ofp.OFPPR_DELETE,
                  "modify": ofp.OFPPR_MODIFY}[p["reason"]]
        port = p["port"]
        if reason == ofp.OFPPR_DELETE:
            info = self.ports.pop(port["ofport"], None) or PortInfo(
                port["ofport"], "", "00:00:00:00:00:00", False)
        else:
            info = PortInfo.from_event(port)
            self.ports[info.ofport] = info
        self.broadcast(wire.port_status(reason, self.port_bytes(info)), "port_status")
        self.counters.port_status += 1

    # ---- controller connections ----

    async def keep_connected(self, c: Conn) -> None:
        backoff = BACKOFF_MIN
        while True:
            try:
                await self.session(c)
                backoff = BACKOFF_MIN
            except (OSError, asyncio.IncompleteReadError, ssl.SSLError) as exc:
                c.error = str(exc)
            except Exception as exc:      # a bug: log it, reconnect rather than die
                log.exception("%s: controller %s: %s", self.switch, c.target, exc)
                c.error = f"internal error: {exc}"
            if c.connected:
                c.connected = False
                c.since = time.monotonic()
                log.info("%s: controller %s disconnected", self.switch, c.target)
            c.writer = None
            await self.check_fail_mode()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.settings["ssl_ca"])
        ctx.check_hostname = False
        ctx.load_cert_chain(self.settings["ssl_cert"], self.settings["ssl_key"])
        return ctx

    async def session(self, c: Conn) -> None:
        proto, rest = c.target.split(":", 1)
        host, _, port = rest.rpartition(":")
        if not host:
            host, port = rest, "6653"
        host = host.strip("[]")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            host, int(port), ssl=self.ssl_context() if proto == "ssl" else None), 5.0)
        c.writer = writer
        c.role = ofp.OFPCR_ROLE_EQUAL
        c.last_rx = time.monotonic()
        c.echo_pending = 0
        writer.write(wire.header(ofp.OFPT_HELLO, 1, hello_bitmap()))
        keep = asyncio.create_task(self.keepalive(c))
        buf = bytearray()
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    raise OSError("the controller closed the connection")
                buf += data
                c.last_rx = time.monotonic()
                c.echo_pending = 0
                msgs = []
                while len(buf) >= wire.HEADER.size:
                    version, msg_type, length, xid = wire.HEADER.unpack_from(buf)
                    if length < wire.HEADER.size:
                        raise OSError("bad OpenFlow length")
                    if len(buf) < length:
                        break
                    msgs.append((version, msg_type, xid, bytes(buf[:length])))
                    del buf[:length]
                await self.handle_batch(c, msgs)
                await writer.drain()
        finally:
            keep.cancel()
            writer.close()

    async def handle_batch(self, c: Conn, msgs: list[tuple[int, int, int, bytes]]) -> None:
        """Handles the messages read at once, in order. A run of flow-mod adds (a
        controller's pipeline arrives so) goes to sluiced as one add-flows; should sluiced
        refuse it, each is sent again alone, so that the error names the right one."""
        i = 0
        while i < len(msgs):
            run = []
            while i + len(run) < len(msgs) and len(run) < BATCH_MAX:
                added = self.batchable_add(c, *msgs[i + len(run)])
                if added is None:
                    break
                run.append(added)
            if len(run) < 2:
                await self.handle(c, *msgs[i])
                i += 1
                continue
            try:
                await self.rpc.call("add-flows", switch=self.switch,
                                    flows=[text for _, text in run])
            except RpcError:
                for k in range(len(run)):
                    await self.handle(c, *msgs[i + k])
            else:
                for fm, _ in run:
                    self.counters.flow_mods += 1
                    self.remember_added(fm)
            i += len(run)

    def batchable_add(self, c: Conn, version: int, msg_type: int, xid: int,
                      buf: bytes) -> tuple[Any, str] | None:
        """A flow-mod add that can go in an add-flows (parsed, translated, no overlap
        check), as (flow-mod, rule text); None for anything else."""
        if (version != ofp.OFP_VERSION or msg_type != ofp.OFPT_FLOW_MOD
                or c.role == ofp.OFPCR_ROLE_SLAVE):
            return None
        try:
            fm = wire.parse_flow_mod(buf, xid)
            if (fm.command != ofp.OFPFC_ADD or fm.table_id >= N_TABLES
                    or fm.flags & ofp.OFPFF_CHECK_OVERLAP):
                return None
            return fm, flow_mod_text(fm)
        except (OFError, struct.error):
            return None

    def remember_added(self, fm: Any) -> None:
        key = self.rule_key(fm.table_id, fm.priority, fm.match, {})
        self.instructions[key] = fm.instructions

    async def keepalive(self, c: Conn) -> None:
        while True:
            await asyncio.sleep(self.echo_interval)
            if time.monotonic() - c.last_rx < self.echo_interval or c.writer is None:
                continue
            if c.echo_pending >= ECHO_MISSES:
                log.info("%s: controller %s does not answer echo; reconnecting",
                         self.switch, c.target)
                c.writer.close()
                return
            c.echo_pending += 1
            c.writer.write(wire.header(ofp.OFPT_ECHO_REQUEST, c.xid, b""))
            c.xid += 1

    async def handle(self, c: Conn, version: int, msg_type: int, xid: int, buf: bytes) -> None:
        assert c.writer is not None
        log.debug("%s: %s: message type %d xid %d, %d bytes", self.switch, c.target, msg_type,
                  xid, len(buf))
        if msg_type == ofp.OFPT_HELLO:
            if not hello_accepts_13(version, buf):
                c.writer.write(wire.error(xid, ofp.OFPET_HELLO_FAILED, ofp.OFPHFC_INCOMPATIBLE,
                                          buf))
                raise OSError("controller does not speak OpenFlow 1.3")
            if not c.connected:
                c.connected = True
                c.since = time.monotonic()
                c.error = ""
                log.info("%s: controller %s connected", self.switch, c.target)
                await self.check_fail_mode()
            return
        if version != ofp.OFP_VERSION:
            c.writer.write(wire.error(xid, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VERSION, buf))
            self.counters.errors_sent += 1
            return
        try:
            replies = await self.dispatch(c, msg_type, xid, buf)
        except OFError as e:
            log.debug("%s: refusing message type %d: %s", self.switch, msg_type, e)
            c.writer.write(wire.error(xid, e.type, e.code, buf))
            self.counters.errors_sent += 1
            return
        except struct.error:
            c.writer.write(wire.error(xid, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN, buf))
            self.counters.errors_sent += 1
            return
        except RpcError as e:
            log.warning("%s: sluiced refused message type %d: %s", self.switch, msg_type, e)
            c.writer.write(wire.error(xid, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM, buf))
            self.counters.errors_sent += 1
            return
        for r in replies:
            c.writer.write(r)

    def check_master(self, c: Conn) -> None:
        if c.role == ofp.OFPCR_ROLE_SLAVE:
            raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE, "slave connection")

    async def dispatch(self, c: Conn, t: int, xid: int, buf: bytes) -> list[bytes]:
        if t == ofp.OFPT_ECHO_REQUEST:
            return [wire.header(ofp.OFPT_ECHO_REPLY, xid, buf[wire.HEADER.size:])]
        if t == ofp.OFPT_ECHO_REPLY:
            return []
        if t == ofp.OFPT_FEATURES_REQUEST:
            return [wire.features_reply(xid, self.dpid, N_TABLES, CAPABILITIES)]
        if t == ofp.OFPT_GET_CONFIG_REQUEST:
            return [wire.header(ofp.OFPT_GET_CONFIG_REPLY, xid,
                                struct.pack("!HH", c.config_flags, c.miss_send_len))]
        if t == ofp.OFPT_SET_CONFIG:
            flags, miss = struct.unpack_from("!HH", buf, wire.HEADER.size)
            if flags & ~ofp.OFPC_FRAG_MASK or flags & ofp.OFPC_FRAG_MASK not in (0,):
                raise OFError(ofp.OFPET_SWITCH_CONFIG_FAILED, ofp.OFPSCFC_BAD_FLAGS, "flags")
            c.config_flags, c.miss_send_len = flags, miss
            return []
        if t == ofp.OFPT_BARRIER_REQUEST:
            return [wire.header(ofp.OFPT_BARRIER_REPLY, xid, b"")]
        if t == ofp.OFPT_ROLE_REQUEST:
            return [self.role_request(c, xid, buf)]
        if t == ofp.OFPT_GET_ASYNC_REQUEST:
            mask = struct.pack("!IIIIII", 0x7, 0x7, 0x7, 0, 0x7, 0x7)
            return [wire.header(ofp.OFPT_GET_ASYNC_REPLY, xid, mask)]
        if t == ofp.OFPT_SET_ASYNC:
            return []
        if t == ofp.OFPT_FLOW_MOD:
            self.check_master(c)
            await self.flow_mod(wire.parse_flow_mod(buf, xid))
            return []
        if t == ofp.OFPT_GROUP_MOD:
            self.check_master(c)
            await self.group_mod(wire.parse_group_mod(buf))
            return []
        if t == ofp.OFPT_METER_MOD:
            self.check_master(c)
            await self.meter_mod(wire.parse_meter_mod(buf))
            return []
        if t == ofp.OFPT_PORT_MOD:
            self.check_master(c)
            await self.port_mod(buf)
            return []
        if t == ofp.OFPT_PACKET_OUT:
            self.check_master(c)
            await self.packet_out(wire.parse_packet_out(buf))
            return []
        if t == ofp.OFPT_MULTIPART_REQUEST:
            return await self.multipart(xid, buf)
        if t == ofp.OFPT_TABLE_MOD:
            self.check_master(c)
            return []
        if t in (ofp.OFPT_QUEUE_GET_CONFIG_REQUEST,):
            raise OFError(ofp.OFPET_QUEUE_OP_FAILED, ofp.OFPQOFC_BAD_QUEUE, "no queues")
        if t == ofp.OFPT_EXPERIMENTER:
            raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_EXPERIMENTER, "experimenter")
        raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE, f"message type {t}")

    def role_request(self, c: Conn, xid: int, buf: bytes) -> bytes:
        role, gen = struct.unpack_from(ofp.OFP_ROLE_REQUEST_PACK_STR, buf, wire.HEADER.size)
        if role not in (ofp.OFPCR_ROLE_NOCHANGE, ofp.OFPCR_ROLE_EQUAL, ofp.OFPCR_ROLE_MASTER,
                        ofp.OFPCR_ROLE_SLAVE):
            raise OFError(ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_BAD_ROLE, "role")
        if role in (ofp.OFPCR_ROLE_MASTER, ofp.OFPCR_ROLE_SLAVE):
            if self.generation_id >= 0 and ((gen - self.generation_id) & (1 << 64) - 1) >= 1 << 63:
                raise OFError(ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE, "stale")
            self.generation_id = gen
        if role == ofp.OFPCR_ROLE_MASTER:
            for other in self.conns.values():
                if other is not c and other.role == ofp.OFPCR_ROLE_MASTER:
                    other.role = ofp.OFPCR_ROLE_SLAVE
        if role != ofp.OFPCR_ROLE_NOCHANGE:
            c.role = role
        return wire.header(ofp.OFPT_ROLE_REPLY, xid,
                           struct.pack(ofp.OFP_ROLE_REQUEST_PACK_STR, c.role,
                                       max(self.generation_id, 0)))

    # ---- rules ----

    @staticmethod
    def rule_key(table: int, priority: int, match: parser.OFPMatch,
                 ports: dict[str, int]) -> tuple[Any, ...]:
        m = match_from_text(match_text(match), ports) if match is not None else None
        return (table, priority, tuple(sorted((k, repr(v)) for k, v in m.items())) if m else ())

    async def flow_mod(self, fm: Any) -> None:
        self.counters.flow_mods += 1
        cmd = fm.command
        if cmd == ofp.OFPFC_ADD and fm.table_id >= N_TABLES:
            raise OFError(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_TABLE_ID, "table")
        if cmd not in (ofp.OFPFC_ADD, ofp.OFPFC_MODIFY, ofp.OFPFC_MODIFY_STRICT,
                       ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT):
            raise OFError(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_COMMAND, "command")
        if cmd in (ofp.OFPFC_MODIFY, ofp.OFPFC_MODIFY_STRICT, ofp.OFPFC_DELETE_STRICT) and \
                fm.table_id == ofp.OFPTT_ALL and cmd != ofp.OFPFC_DELETE_STRICT:
            raise OFError(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_TABLE_ID, "table")
        text = flow_mod_text(fm)
        try:
            if cmd == ofp.OFPFC_ADD:
                await self.rpc.call("add-flow", switch=self.switch, flow=text)
                self.remember_added(fm)
            elif cmd in (ofp.OFPFC_MODIFY, ofp.OFPFC_MODIFY_STRICT):
                await self.rpc.call("mod-flows", switch=self.switch, flow=text,
                                    strict=cmd == ofp.OFPFC_MODIFY_STRICT)
                await self.remember_modified(fm, text)
            else:
                await self.rpc.call("del-flows", switch=self.switch, flow=text,
                                    strict=cmd == ofp.OFPFC_DELETE_STRICT)
                if (cmd == ofp.OFPFC_DELETE and not fm.match.items()
                        and fm.table_id == ofp.OFPTT_ALL):
                    self.instructions.clear()
        except RpcError as e:
            raise rule_error(e.message) from e

    async def remember_modified(self, fm: Any, text: str) -> None:
        """The rules a modify changed now have its instructions (for flow stats)."""
        flt = text.split(",actions=", 1)[0] if ",actions=" in text else ""
        params: dict[str, Any] = {"switch": self.switch,
                                  "strict": fm.command == ofp.OFPFC_MODIFY_STRICT}
        if flt and not flt.startswith("actions="):
            params["flow"] = flt
        names = self.port_names()
        for f in (await self.rpc.call("dump-flows", **params))["flows"]:
            m = match_from_text(f["match"], names)
            key = (f["table"], f["priority"], tuple(sorted((k, repr(v)) for k, v in m.items())))
            self.instructions[key] = fm.instructions

    async def group_mod(self, gm: wire.GroupMod) -> None:
        try:
            if gm.command == ofp.OFPGC_DELETE:
                gid = "all" if gm.group_id == ofp.OFPG_ALL else str(gm.group_id)
                with contextlib.suppress(RpcError):    # deleting none is no error in OF
                    await self.rpc.call("del-groups", switch=self.switch, group=gid)
                return
            if gm.group_id > ofp.OFPG_MAX:
                raise OFError(ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_INVALID_GROUP, "group id")
            text = group_text(gm.group_id, gm.type, gm.buckets)
            if gm.command == ofp.OFPGC_ADD:
                await self.rpc.call("add-group", switch=self.switch, group=text)
            elif gm.command == ofp.OFPGC_MODIFY:
                await self.rpc.call("mod-group", switch=self.switch, group=text)
            else:
                raise OFError(ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_BAD_COMMAND, "command")
        except RpcError as e:
            g = ofp.OFPET_GROUP_MOD_FAILED
            if e.code == -32001:
                raise OFError(g, ofp.OFPGMFC_GROUP_EXISTS, e.message) from e
            if e.code == -32000:
                raise OFError(g, ofp.OFPGMFC_UNKNOWN_GROUP, e.message) from e
            if "port" in e.message:
                raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_PORT, e.message) from e
            raise OFError(ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_INVALID_GROUP, e.message) from e

    async def meter_mod(self, mm: wire.MeterMod) -> None:
        try:
            if mm.command == ofp.OFPMC_DELETE:
                mid = "all" if mm.meter_id == ofp.OFPM_ALL else str(mm.meter_id)
                with contextlib.suppress(RpcError):
                    await self.rpc.call("del-meters", switch=self.switch, meter=mid)
                return
            if mm.meter_id == 0 or mm.meter_id > ofp.OFPM_MAX:
                raise OFError(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_INVALID_METER, "meter id")
            if not mm.bands:
                raise OFError(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_INVALID_METER, "no band")
            text = meter_text(mm.meter_id, mm.flags, mm.bands)
            if mm.command == ofp.OFPMC_ADD:
                await self.rpc.call("add-meter", switch=self.switch, meter=text)
            elif mm.command == ofp.OFPMC_MODIFY:
                await self.rpc.call("mod-meter", switch=self.switch, meter=text)
            else:
                raise OFError(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_BAD_COMMAND, "command")
        except RpcError as e:
            mf = ofp.OFPET_METER_MOD_FAILED
            if e.code == -32001:
                raise OFError(mf, ofp.OFPMMFC_METER_EXISTS, e.message) from e
            if e.code == -32000:
                raise OFError(mf, ofp.OFPMMFC_UNKNOWN_METER, e.message) from e
            raise OFError(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_BAD_RATE, e.message) from e

    async def port_mod(self, buf: bytes) -> None:
        port_no, hw_addr, config, mask, _ = wire.parse_port_mod(buf)
        p = self.ports.get(port_no)
        if p is None:
            raise OFError(ofp.OFPET_PORT_MOD_FAILED, ofp.OFPPMFC_BAD_PORT, "port")
        if bytes.fromhex(p.mac.replace(":", "")) != hw_addr:
            raise OFError(ofp.OFPET_PORT_MOD_FAILED, ofp.OFPPMFC_BAD_HW_ADDR, "hw_addr")
        if mask & ~PORT_CONFIG_ALL:
            raise OFError(ofp.OFPET_PORT_MOD_FAILED, ofp.OFPPMFC_BAD_CONFIG, "config")
        new = (p.config & ~mask) | (config & mask)
        if new == p.config:
            return
        try:
            await self.rpc.call("set-port", switch=self.switch, name=p.name,
                                of_config=config_names(new))
        except RpcError as e:
            raise OFError(ofp.OFPET_PORT_MOD_FAILED, ofp.OFPPMFC_EPERM, e.message) from e
        # sluiced's event stream sends the port-status; the next request sees the change.
        p.config = new

    async def packet_out(self, po: wire.PacketOut) -> None:
        if po.buffer_id != ofp.OFP_NO_BUFFER:
            raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BUFFER_UNKNOWN, "no buffers")
        if len(po.data) < 14:
            raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN, "no frame")
        in_port = po.in_port if po.in_port <= ofp.OFPP_MAX else 0
        if po.in_port not in (ofp.OFPP_CONTROLLER, ofp.OFPP_ANY) and po.in_port > ofp.OFPP_MAX:
            raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_PORT, "in_port")
        if in_port and in_port not in self.ports:
            raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_PORT, "in_port")
        frame = bytearray(po.data)
        for a in po.actions:
            if isinstance(a, parser.OFPActionOutput):
                await self.output(frame, in_port, a.port)
            elif isinstance(a, parser.OFPActionPushVlan):
                frame[12:12] = struct.pack("!HH", a.ethertype, 0)
            elif isinstance(a, parser.OFPActionPopVlan):
                if struct.unpack_from("!H", frame, 12)[0] in (0x8100, 0x88a8):
                    del frame[12:16]
            elif isinstance(a, parser.OFPActionSetField):
                set_field(frame, a.key, a.value)
            else:
                raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_TYPE,
                              f"{type(a).__name__} in packet-out")
        self.counters.packet_outs += 1

    async def output(self, frame: bytearray, in_port: int, port: int) -> None:
        if port == ofp.OFPP_TABLE:
            if not in_port:
                raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_PORT, "TABLE needs in_port")
            await self.rpc.call("packet-out", switch=self.switch, data=frame.hex(),
                                in_port=in_port, table=True)
            return
        if port in (ofp.OFPP_FLOOD, ofp.OFPP_ALL):
            outs = [p for p in self.ports if p != in_port]
        elif port == ofp.OFPP_IN_PORT:
            outs = [in_port] if in_port else []
        elif port in self.ports:
            outs = [port]
        elif port in (ofp.OFPP_CONTROLLER, ofp.OFPP_LOCAL, ofp.OFPP_NORMAL):
            raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_PORT, "reserved port")
        else:
            raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_PORT, f"port {port}")
        # The ports' config, as for the rules' outputs: NO_FWD and PORT_DOWN ports get
        # nothing, NO_FLOOD ports no flood.
        blocked = ofp.OFPPC_NO_FWD | ofp.OFPPC_PORT_DOWN
        if port == ofp.OFPP_FLOOD:
            blocked |= PORT_CONFIG_NAMES["no_flood"]
        outs = [o for o in outs if not self.ports[o].config & blocked]
        if outs:
            await self.rpc.call("packet-out", switch=self.switch, data=frame.hex(),
                                in_port=in_port, output=outs)

    # ---- multipart ----

    async def multipart(self, xid: int, buf: bytes) -> list[bytes]:
        mp_type, _flags = struct.unpack_from("!HH", buf, wire.HEADER.size)
        off = wire.HEADER.size + 8
        if mp_type == ofp.OFPMP_DESC:
            body = struct.pack(ofp.OFP_DESC_PACK_STR, b"sluice", b"sluiced flow mode",
                               b"sluice-ofagent", b"none", self.switch.encode())
            return [wire.multipart_reply(xid, mp_type, body)]
        if mp_type in (ofp.OFPMP_FLOW, ofp.OFPMP_AGGREGATE):
            table_id, out_port, out_group, cookie, cookie_mask = struct.unpack_from(
                ofp.OFP_FLOW_STATS_REQUEST_0_PACK_STR, buf, off)
            match = wire.parse_match(buf, off + struct.calcsize(
                ofp.OFP_FLOW_STATS_REQUEST_0_PACK_STR))
            return [await self.flow_stats(xid, mp_type, table_id, out_port, out_group,
                                          cookie, cookie_mask, match)]
        if mp_type == ofp.OFPMP_TABLE:
            return [await self.table_stats(xid)]
        if mp_type == ofp.OFPMP_PORT_STATS:
            (port_no,) = struct.unpack_from("!I", buf, off)
            return [await self.port_stats(xid, port_no)]
        if mp_type == ofp.OFPMP_PORT_DESC:
            body = b"".join(self.port_bytes(p) for _, p in sorted(self.ports.items()))
            return [wire.multipart_reply(xid, mp_type, body)]
        if mp_type == ofp.OFPMP_GROUP_FEATURES:
            types = 0xf
            caps = ofp.OFPGFC_CHAINING
            body = struct.pack(ofp.OFP_GROUP_FEATURES_PACK_STR, types, caps,
                               65535, 65535, 65535, 65535,
                               *(1 << ofp.OFPAT_OUTPUT | 1 << ofp.OFPAT_SET_FIELD |
                                 1 << ofp.OFPAT_PUSH_VLAN | 1 << ofp.OFPAT_POP_VLAN |
                                 1 << ofp.OFPAT_DEC_NW_TTL | 1 << ofp.OFPAT_GROUP,) * 4)
            return [wire.multipart_reply(xid, mp_type, body)]
        if mp_type in (ofp.OFPMP_GROUP, ofp.OFPMP_GROUP_DESC):
            return [await self.group_stats(xid, mp_type)]
        if mp_type == ofp.OFPMP_METER_FEATURES:
            body = struct.pack(ofp.OFP_METER_FEATURES_PACK_STR, 65535, 1 << ofp.OFPMBT_DROP,
                               ofp.OFPMF_KBPS | ofp.OFPMF_PKTPS | ofp.OFPMF_BURST |
                               ofp.OFPMF_STATS, 1, 0)
            return [wire.multipart_reply(xid, mp_type, body)]
        if mp_type in (ofp.OFPMP_METER, ofp.OFPMP_METER_CONFIG):
            return [await self.meter_stats(xid, mp_type)]
        if mp_type == ofp.OFPMP_TABLE_FEATURES:
            if len(buf) > off:
                raise OFError(ofp.OFPET_TABLE_FEATURES_FAILED, ofp.OFPTFFC_EPERM,
                              "tables are not reconfigured")
            return self.table_features(xid)
        raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_MULTIPART, f"multipart {mp_type}")

    async def switch_show(self) -> dict[str, Any]:
        show = await self.rpc.call("show")
        for s in show["switches"]:
            if s["name"] == self.switch:
                return s
        return {}

    async def table_stats(self, xid: int) -> bytes:
        """Active entries, and lookups as matches plus misses: a table's matches are its
        rules' packets (of the rules it has now), its misses sluiced's count of frames no
        rule of it took."""
        show = await self.switch_show()
        tables = {t["table"]: t for t in show.get("tables", [])}
        try:
            dump = await self.rpc.call("dump-flows", switch=self.switch)
        except RpcError as e:
            raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM, e.message) from e
        matched = [0] * N_TABLES
        for f in dump["flows"]:
            if 0 <= f.get("table", 0) < N_TABLES:
                matched[f.get("table", 0)] += f["packets"]
        body = b"".join(
            struct.pack(ofp.OFP_TABLE_STATS_PACK_STR, t, tables.get(t, {}).get("rules", 0),
                        matched[t] + tables.get(t, {}).get("missed", 0), matched[t])
            for t in range(N_TABLES))
        return wire.multipart_reply(xid, ofp.OFPMP_TABLE, body)

    async def flow_stats(self, xid: int, mp_type: int, table_id: int, out_port: int,
                         out_group: int, cookie: int, cookie_mask: int,
                         match: parser.OFPMatch) -> bytes:
        flt = []
        if table_id != ofp.OFPTT_ALL:
            flt.append(f"table={table_id}")
        if out_port != ofp.OFPP_ANY:
            flt.append(f"out_port={out_port}")
        if out_group != ofp.OFPG_ANY:
            flt.append(f"out_group={out_group}")
        if cookie_mask:
            flt.append(f"cookie={cookie:#x}/{cookie_mask:#x}")
        m = match_text(match)
        if m:
            flt.append(m)
        params: dict[str, Any] = {"switch": self.switch}
        if flt:
            params["flow"] = ",".join(flt)
        try:
            dump = await self.rpc.call("dump-flows", **params)
        except RpcError as e:
            raise rule_error(e.message) from e
        names = self.port_names()
        if mp_type == ofp.OFPMP_AGGREGATE:
            flows = dump["flows"]
            body = struct.pack(ofp.OFP_AGGREGATE_STATS_REPLY_PACK_STR,
                               sum(f["packets"] for f in flows), sum(f["bytes"] for f in flows),
                               len(flows))
            return wire.multipart_reply(xid, mp_type, body)
        parts = []
        for f in dump["flows"]:
            fm = match_from_text(f["match"], names)
            key = (f["table"], f["priority"],
                   tuple(sorted((k, repr(v)) for k, v in fm.items())))
            flags = ofp.OFPFF_SEND_FLOW_REM if f.get("send_flow_rem") else 0
            parts.append(wire.flow_stats(f["table"], float(f["duration"]), f["priority"],
                                         f["idle_timeout"], f["hard_timeout"], flags,
                                         int(f["cookie"], 16), f["packets"], f["bytes"], fm,
                                         self.instructions.get(key, [])))
        return wire.multipart_reply(xid, mp_type, b"".join(parts))

    async def port_stats(self, xid: int, port_no: int) -> bytes:
        stats = await self.rpc.call("stats", switch=self.switch)
        by_name = {p["name"]: p for p in stats["switches"][0]["ports"]} if stats["switches"] else {}
        body = b""
        dur = time.monotonic() - self.start
        for no, p in sorted(self.ports.items()):
            if port_no not in (ofp.OFPP_ANY, no):
                continue
            s = by_name.get(p.name)
            if s is None:
                continue
            body += struct.pack(ofp.OFP_PORT_STATS_PACK_STR, no, s["rx_packets"],
                                s["tx_packets"], s["rx_bytes"], s["tx_bytes"],
                                s["dropped"] + s.get("rx_missed", 0), s["flood_tx_dropped"],
                                0, 0, 0, 0, 0, 0, int(dur), 0)
        if port_no != ofp.OFPP_ANY and not body:
            raise OFError(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_PORT, "port")
        return wire.multipart_reply(xid, ofp.OFPMP_PORT_STATS, body)

    async def group_stats(self, xid: int, mp_type: int) -> bytes:
        groups = (await self.rpc.call("dump-groups", switch=self.switch))["groups"]
        body = b""
        for g in groups:
            if mp_type == ofp.OFPMP_GROUP:
                body += struct.pack(ofp.OFP_GROUP_STATS_PACK_STR, ofp.OFP_GROUP_STATS_SIZE,
                                    g["group_id"], 0, g["packets"], g["bytes"], 0, 0)
            else:
                gtype = {"all": 0, "select": 1, "indirect": 2, "ff": 3,
                         "fast_failover": 3}.get(_kv(g["text"]).get("type", "all"), 0)
                body += struct.pack(ofp.OFP_GROUP_DESC_STATS_PACK_STR,
                                    ofp.OFP_GROUP_DESC_STATS_SIZE, gtype, g["group_id"])
        return wire.multipart_reply(xid, mp_type, body)

    async def meter_stats(self, xid: int, mp_type: int) -> bytes:
        meters = (await self.rpc.call("dump-meters", switch=self.switch))["meters"]
        body = b""
        for m in meters:
            kv = _kv(m["text"])
            if mp_type == ofp.OFPMP_METER:
                band = struct.pack(ofp.OFP_METER_BAND_STATS_PACK_STR, m["dropped_packets"],
                                   m["dropped_bytes"])
                body += struct.pack(ofp.OFP_METER_STATS_PACK_STR, m["meter_id"],
                                    ofp.OFP_METER_STATS_SIZE + len(band), 0, m["packets"],
                                    m["bytes"], int(time.monotonic() - self.start), 0) + band
            else:
                flags = ofp.OFPMF_PKTPS if "pktps" in m["text"] else ofp.OFPMF_KBPS
                band = struct.pack(ofp.OFP_METER_BAND_DROP_PACK_STR, ofp.OFPMBT_DROP,
                                   ofp.OFP_METER_BAND_DROP_SIZE, int(kv.get("rate", 0)),
                                   int(kv.get("burst_size", 0)))
                body += struct.pack(ofp.OFP_METER_CONFIG_PACK_STR,
                                    ofp.OFP_METER_CONFIG_SIZE + len(band), flags,
                                    m["meter_id"]) + band
        return wire.multipart_reply(xid, mp_type, body)

    def table_features(self, xid: int) -> list[bytes]:
        """Every table the same: any match flow mode has, goto to a later table."""
        out = []
        for t in range(N_TABLES):
            name = f"table{t}".encode()
            props = b""
            inst = b"".join(struct.pack("!HH", i, 4) for i in (
                ofp.OFPIT_GOTO_TABLE, ofp.OFPIT_WRITE_METADATA, ofp.OFPIT_WRITE_ACTIONS,
                ofp.OFPIT_APPLY_ACTIONS, ofp.OFPIT_CLEAR_ACTIONS, ofp.OFPIT_METER))
            props += _prop(ofp.OFPTFPT_INSTRUCTIONS, inst)
            if t + 1 < N_TABLES:
                props += _prop(ofp.OFPTFPT_NEXT_TABLES, bytes(range(t + 1, N_TABLES)))
            length = struct.calcsize(ofp.OFP_TABLE_FEATURES_PACK_STR) + len(props)
            body = struct.pack(ofp.OFP_TABLE_FEATURES_PACK_STR, length, t, name,
                               0xffffffffffffffff, 0xffffffffffffffff, 0, 100000) + props
            out.append(wire.multipart_reply(xid, ofp.OFPMP_TABLE_FEATURES, body,
                                            more=t + 1 < N_TABLES))
        return out


def _prop(type_: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("!HH", type_, length) + payload + bytes(wire.pad8(length) - length)


def _kv(text: str) -> dict[str, str]:
    out = {}
    for tok in text.split(","):
        k, _, v = tok.partition("=")
        out.setdefault(k, v)
    return out


def hello_bitmap() -> bytes:
    """A version bitmap element saying 1.3 (OpenFlow 1.3, 7.5.1)."""
    return struct.pack("!HHI", ofp.OFPHET_VERSIONBITMAP, 8, 1 << ofp.OFP_VERSION)


def hello_accepts_13(version: int, buf: bytes) -> bool:
    off = wire.HEADER.size
    while off + 4 <= len(buf):
        etype, elen = struct.unpack_from("!HH", buf, off)
        if elen < 4:
            break
        if etype == ofp.OFPHET_VERSIONBITMAP and elen >= 8:
            (bits,) = struct.unpack_from("!I", buf, off + 4)
            return bool(bits & (1 << ofp.OFP_VERSION))
        off += wire.pad8(elen)
    return version >= ofp.OFP_VERSION


def set_field(frame: bytearray, key: str, value: Any) -> None:
    """The header changes a packet-out may carry (Ethernet addresses and the VLAN tag)."""
    if key in ("eth_dst", "eth_src"):
        at = 0 if key == "eth_dst" else 6
        frame[at:at + 6] = bytes.fromhex(value.replace(":", ""))
    elif key == "vlan_vid" and struct.unpack_from("!H", frame, 12)[0] in (0x8100, 0x88a8):
        (tci,) = struct.unpack_from("!H", frame, 14)
        struct.pack_into("!H", frame, 14, (tci & 0xf000) | (value & 0xfff))
    elif key == "vlan_pcp" and struct.unpack_from("!H", frame, 12)[0] in (0x8100, 0x88a8):
        (tci,) = struct.unpack_from("!H", frame, 14)
        struct.pack_into("!H", frame, 14, (tci & 0x1fff) | (value & 7) << 13)
    else:
        raise OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_SET_TYPE, f"set_field {key}")


def rule_error(message: str) -> OFError:
    """sluiced's refusal of a rule, as the OpenFlow error that names it."""
    m = message.lower()
    if "overlap" in m:
        return OFError(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP, message)
    if "group" in m:
        return OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_GROUP, message)
    if "meter" in m:
        return OFError(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_UNKNOWN_METER, message)
    if "table" in m:
        return OFError(ofp.OFPET_BAD_INSTRUCTION, ofp.OFPBIC_BAD_TABLE_ID, message)
    if "requires" in m or "needs" in m:
        return OFError(ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_PREREQ, message)
    if "port" in m:
        return OFError(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_PORT, message)
    if "full" in m or "limit" in m:
        return OFError(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_TABLE_FULL, message)
    return OFError(ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_VALUE, message)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="sluice-ofagent",
        description="Connects flow switches of sluiced to OpenFlow 1.3 controllers "
                    "(sluicectl set-controller SWITCH tcp:IP:PORT names them).")
    ap.add_argument("switches", nargs="+", metavar="SWITCH", help="flow switches to serve")
    ap.add_argument("--socket", default=None, help="sluiced's control socket")
    ap.add_argument("--echo-interval", type=float, default=ECHO_INTERVAL, metavar="S",
                    help=f"probe a silent controller every S seconds (default {ECHO_INTERVAL})")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every message")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="sluice-ofagent: %(message)s")
    path = args.socket or default_socket()

    async def serve() -> None:
        agents = [Agent(path, s, echo_interval=args.echo_interval) for s in args.switches]
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: [a.stopping.set() for a in agents])
        await asyncio.gather(*(a.run() for a in agents))

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        return 0
    except (OSError, RpcError) as e:
        print(f"sluice-ofagent: {e}", file=sys.stderr)
        return 1
    return 0
