"""How late does a packet-in reach its taker? A probe, not a test (no pass or fail):

    python tests/functional/pktin_latency.py [--frames 200] [--agent]

A sluiced of its own (main thread on CPU 0, its worker on CPU 1, as the tests run it) with a
flow switch of one tap port and the rule `priority=0,actions=controller`. Frames go into the
tap one at a time, each after a random gap of 5-25 ms (so that sends do not keep step with
the control thread's 10 ms tick), and each waits for its own packet-in. What is timed: from
just before the frame is written to the tap until its packet-in is read,

- by default, as a `subscribe` notification on the control socket (sluiced's part alone);
- with --agent, as an OFPT_PACKET_IN from sluice-ofagent at a test controller on loopback
  (sluiced and the agent: what a controller sees).

It prints the median, quartiles, 90th percentile and maximum in ms.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "python")]

from flow_helpers import MARK, FlowTaps, Subscriber  # noqa: E402

from conftest import Daemon  # noqa: E402

TAG = b"pktin-probe"


def probe_frame(n: int) -> bytes:
    """A frame the probe can tell apart: its number after MARK and TAG."""
    body = MARK + TAG + struct.pack("!I", n)
    return (bytes.fromhex("020000000002020000000001") + struct.pack("!H", 0x88B5) + body +
            bytes(max(0, 46 - len(body))))


def frame_number(data: bytes) -> int | None:
    i = data.find(MARK + TAG)
    if i < 0:
        return None
    return int(struct.unpack_from("!I", data, i + len(MARK + TAG))[0])


def summary(late: list[float]) -> str:
    if len(late) < 4:
        return f"{len(late)} packet-ins (too few for quartiles)"
    s = sorted(x * 1000 for x in late)
    q = statistics.quantiles(s, n=20)
    return (f"{len(s)} packet-ins: median {statistics.median(s):.2f} ms, quartiles "
            f"[{q[4]:.2f}, {q[14]:.2f}], p90 {q[17]:.2f}, max {s[-1]:.2f} ms")


def run_subscribe(taps: FlowTaps, frames: int) -> tuple[list[float], int]:
    sub = Subscriber(taps.daemon.socket, taps.switch)
    late, missing = [], 0
    try:
        for n in range(frames):
            time.sleep(random.uniform(0.005, 0.025))
            t0 = time.monotonic()
            taps.socks["p0"].send(probe_frame(n))
            while True:
                data = sub.next_packet_in(1.0)
                if data is None:
                    missing += 1
                    break
                if frame_number(data) == n:
                    late.append(time.monotonic() - t0)
                    break
    finally:
        sub.close()
    return late, missing


def run_agent(taps: FlowTaps, frames: int) -> tuple[list[float], int]:
    from of_helpers import start_agent
    from os_ken.ofproto import ofproto_v1_3 as ofp
    from os_ken.ofproto import ofproto_v1_3_parser as p
    from test_openflow_messages import DP, Controller

    d = taps.daemon
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    lsock.settimeout(20)
    agent = start_agent(d, taps.switch)
    late, missing = [], 0
    try:
        d.call("set-controller", switch=taps.switch,
               targets=[f"tcp:127.0.0.1:{lsock.getsockname()[1]}"])
        conn, _ = lsock.accept()
        c = Controller(conn)
        c.recv()
        c.send(p.OFPHello(DP))
        c.barrier()
        c.send(p.OFPFlowMod(DP, priority=0, match=p.OFPMatch(), instructions=[
            p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [
                p.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)])]))
        c.barrier()
        for n in range(frames):
            time.sleep(random.uniform(0.005, 0.025))
            t0 = time.monotonic()
            taps.socks["p0"].send(probe_frame(n))
            while True:
                try:
                    pin = c.expect(p.OFPPacketIn, timeout=1.0)
                except TimeoutError:
                    missing += 1
                    break
                if frame_number(bytes(pin.data)) == n:
                    late.append(time.monotonic() - t0)
                    break
        conn.close()
    finally:
        lsock.close()
        agent.stop()
    return late, missing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--agent", action="store_true", help="through sluice-ofagent")
    args = ap.parse_args()
    wd = Path(tempfile.mkdtemp(prefix=f"sluice-pktin-{os.getpid()}-"))
    d = Daemon(wd, "pl", ["--no-ofagent"]).start()
    taps = FlowTaps(d, "pl", 1, prefix="slpl")
    try:
        if args.agent:
            late, missing = run_agent(taps, args.frames)
        else:
            taps.flows("priority=0,actions=controller")
            late, missing = run_subscribe(taps, args.frames)
        print(("agent to a controller: " if args.agent else "subscribe: ") + summary(late)
              + f", {missing} not seen in 1 s")
    finally:
        taps.close()
        rc = d.stop()
        for f in wd.iterdir():
            f.unlink()
        wd.rmdir()
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
