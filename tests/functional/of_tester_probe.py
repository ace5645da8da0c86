"""Does the conformance tester (Debian's userspace OVS) lose packet-ins by itself? No sluiced.

The conformance tool begins every test by rewriting the tester's flow table (delete every
flow, add `in_port=2,actions=CONTROLLER`, barrier) and, some 20 ms later, expects each frame
that reaches the tester's port 2 back as a packet-in within 3 s. This probe does just that
to the same OVS (of_conformance.TesterOvs, a netdev bridge on veths), with frames sent into
the far end of port 2's veth from a packet socket instead of by a switch under test:

    python tests/functional/of_tester_probe.py [--rounds 300] [--gap 0.02] [--keep-flows]

Each round: (unless --keep-flows) the tool's two flow-mods and a barrier, wait for the
barrier's reply, sleep GAP, send one frame (its payload holds the round's number), and wait
up to 3 s for the packet-in that carries it. It prints how many packet-ins came, how late,
and how many never came, with OVS's coverage counters that changed. --keep-flows installs
the flow once: the control, without table rewrites.
"""

from __future__ import annotations

import argparse
import os
import queue
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "python")]

from of_conformance import TESTER_DPID, TesterOvs, Veths, free_tcp_port  # noqa: E402
from os_ken.ofproto import ofproto_v1_3 as ofp  # noqa: E402
from os_ken.ofproto import ofproto_v1_3_parser as parser  # noqa: E402

WAIT_S = 3.0     # the tool's WAIT_TIMER


class _Dp:
    """What os-ken's message classes need of a datapath to serialize."""
    ofproto = ofp
    ofproto_parser = parser


class Controller:
    """The controller end of one OpenFlow 1.3 connection: sends messages, answers echoes,
    and hands barrier replies and packet-ins to the caller through queues."""

    def __init__(self, listener: socket.socket) -> None:
        self.sock, _ = listener.accept()
        self.xid = 1
        self.barriers: queue.Queue[int] = queue.Queue()
        self.packet_ins: queue.Queue[tuple[float, bytes]] = queue.Queue()
        self.send(parser.OFPHello(_Dp()))
        self.send(parser.OFPFeaturesRequest(_Dp()))
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, msg: object) -> int:
        xid = self.xid
        self.xid += 1
        msg.set_xid(xid)        # type: ignore[attr-defined]
        msg.serialize()         # type: ignore[attr-defined]
        self.sock.sendall(msg.buf)  # type: ignore[attr-defined]
        return xid

    def _read(self) -> None:
        buf = b""
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            buf += data
            while len(buf) >= 8:
                _, mtype, length, xid = struct.unpack_from("!BBHI", buf)
                if len(buf) < length:
                    break
                msg, buf = buf[:length], buf[length:]
                if mtype == ofp.OFPT_ECHO_REQUEST:
                    echo = struct.pack("!BBHI", 4, ofp.OFPT_ECHO_REPLY, length, xid) + msg[8:]
                    self.sock.sendall(echo)
                elif mtype == ofp.OFPT_BARRIER_REPLY:
                    self.barriers.put(xid)
                elif mtype == ofp.OFPT_PACKET_IN:
                    mlen = struct.unpack_from("!H", msg, 26)[0]
                    self.packet_ins.put((time.monotonic(), msg[24 + (mlen + 7) // 8 * 8 + 2:]))

    def rewrite_table(self) -> None:
        """The tool's _test_initialize_flow on the tester: delete all, add in_port=2 to
        the controller, barrier; returns once the barrier is answered."""
        dp = _Dp()
        self.send(parser.OFPFlowMod(dp, cookie=0, cookie_mask=0, table_id=ofp.OFPTT_ALL,
                                    command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
                                    out_group=ofp.OFPG_ANY))
        self.send(parser.OFPFlowMod(
            dp, cookie=0, command=ofp.OFPFC_ADD, match=parser.OFPMatch(in_port=2),
            instructions=[parser.OFPInstructionActions(
                ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(ofp.OFPP_CONTROLLER)])]))
        xid = self.send(parser.OFPBarrierRequest(dp))
        while self.barriers.get(timeout=10) != xid:
            pass


def frame(n: int) -> bytes:
    """An IPv4/TCP frame like the suite's, its payload tagged with N."""
    eth = bytes.fromhex("222222222222" "121111111111" "0800")
    payload = b"probe" + struct.pack("!I", n) + bytes(range(1, 24))
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0x20, 20 + 20 + len(payload), 0, 0, 64, 6, 0,
                     bytes([192, 168, 10, 10]), bytes([192, 168, 20, 20]))
    tcp = struct.pack("!HHIIBBHHH", 11111, 2222, 0, 0, 0x50, 0, 0, 0, 0)
    return eth + ip + tcp + payload


def coverage(ovs: TesterOvs) -> dict[str, int]:
    r = subprocess.run(["ovs-appctl", "-t", str(ovs.ctl_path), "coverage/show"],
                       capture_output=True, text=True, timeout=20, check=False)
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[-2] == "total:":
            out[parts[0]] = int(parts[-1])
    return out


def probe(rounds: int, gap: float, keep_flows: bool, flow_limit: int | None) -> int:
    tag = f"p{os.getpid() % 10000}"
    workdir = Path(tempfile.mkdtemp(prefix="sluice-ofprobe-", dir="/tmp"))
    port = free_tcp_port()
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen(1)
    veths = Veths(tag, 2)
    # OVS's own default, a datapath flow cache: the conformance run's tester has none.
    ovs = TesterOvs(workdir / "ovs", f"ofc{tag}br", veths.tester, f"tcp:127.0.0.1:{port}",
                    cache_flows=True)
    try:
        ovs.dir.mkdir()
        ovs.start()
        if flow_limit is not None:
            ovs.vsctl("set", "Open_vSwitch", ".", f"other_config:flow-limit={flow_limit}")
        ctl = Controller(listener)
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        raw.bind((veths.target[1], 0))          # the far end of the tester's port 2
        ctl.rewrite_table()
        time.sleep(1)
        before = coverage(ovs)
        late: list[float] = []
        lost: list[int] = []
        delayed: list[int] = []
        for n in range(rounds):
            if not keep_flows:
                ctl.rewrite_table()
            time.sleep(gap)
            tag_bytes = b"probe" + struct.pack("!I", n)
            sent = time.monotonic()
            raw.send(frame(n))
            deadline = sent + WAIT_S
            while True:
                try:
                    when, data = ctl.packet_ins.get(timeout=max(0.0, deadline -
                                                                 time.monotonic()))
                except queue.Empty:
                    lost.append(n)
                    break
                if tag_bytes in data:
                    late.append(when - sent)
                    break
                at = data.find(b"probe")
                if at >= 0:         # an earlier round's, after its 3 s
                    delayed.append(struct.unpack_from("!I", data, at + 5)[0])
        after = coverage(ovs)
        changed = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
        late.sort()
        print(f"tester {TESTER_DPID}: {rounds} rounds, table rewritten each round: "
              f"{not keep_flows}, gap {gap * 1000:.0f} ms, flow-limit {flow_limit}")
        print(f"  packet-ins: {len(late)}, median {statistics.median(late) * 1000:.2f} ms, "
              f"max {late[-1] * 1000:.2f} ms" if late else "  packet-ins: 0")
        print(f"  lost (none within {WAIT_S:.0f} s): {len(lost)} {lost[:20]}; of those, "
              f"came later: {len(delayed)}")
        print(f"  OVS coverage counters that changed: {changed}")
        return 1 if lost else 0
    finally:
        listener.close()
        ovs.stop()
        subprocess.run(["ip", "link", "del", ovs.bridge], check=False, capture_output=True)
        veths.delete()
        subprocess.run(["rm", "-rf", str(workdir)], check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--gap", type=float, default=0.02,
                    help="seconds between the barrier's reply and the frame (default 0.02)")
    ap.add_argument("--keep-flows", action="store_true",
                    help="install the flow once (the control)")
    ap.add_argument("--flow-limit", type=int, default=None,
                    help="the tester's other_config:flow-limit (datapath flows it keeps)")
    args = ap.parse_args()
    return probe(args.rounds, args.gap, args.keep_flows, args.flow_limit)


if __name__ == "__main__":
    sys.exit(main())
