"""Where a conformance test's frame went: a trace of one run of of_conformance.py (--trace).

While the tool runs, `tcpdump -i any` records every frame on the veths (interface and
direction; the capture on several interfaces has no Ethernet header) and every OpenFlow
message on the loopback interface, and a thread reads the ports' counters of both switches
(sluiced's `stats` with its drop reasons, the tester OVS's `dump-ports` and its count of
frames its own pipeline dropped) every 0.2 s.
After the run, `analyse` cuts the capture into tests by the times at which the tool logged
each result (of_conformance.py copies its output with times, start_log_reader): a test
is what happened after the previous result and up to its own. For each test it follows
the frame of the tool's packet-out to the tester: the frame leaving the tester (o1 out),
entering sluiced (t1 in), reaching the tester from sluiced (o2 in or o3 in: sluiced's own
transmissions bypass the kernel's taps on its side of the veth) and the packet-in that
comes back, each with its delay after the packet-out. trace.txt gives the delays at each
hop over the passed tests, and each test that failed with the tool's "Receiving timeout"
in full: its OpenFlow messages and frames in time order (with the port counters of the
tool's own port-stats requests), its path, and the changes of the sampled counters
around it.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import statistics
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import Rpc, stop_process

OUTCOME = re.compile(r"^    (\S.*?)\s+(OK|ERROR)$")    # of_conformance.parse_tool_output's
OFP_FEATURES_REPLY, OFP_PACKET_IN, OFP_PACKET_OUT = 6, 10, 13
OFP_MULTIPART_REPLY = 19
OFPMP_PORT_STATS = 4
OF_TYPES = {0: "hello", 1: "error", 2: "echo_req", 3: "echo_rep", 5: "features_req",
            6: "features_rep", 10: "packet_in", 12: "port_status", 13: "packet_out",
            14: "flow_mod", 15: "group_mod", 18: "multipart_req", 19: "multipart_rep",
            20: "barrier_req", 21: "barrier_rep", 29: "meter_mod"}
SAMPLE_S = 0.2


def ovs_port_counters(dump_ports: list[str]) -> dict[str, dict[str, int]]:
    """The tester's port counters from DUMP_PORTS (`ovs-ofctl dump-ports BRIDGE`): port ->
    rx/tx packets and drops."""
    import re

    r = subprocess.run(dump_ports, capture_output=True, text=True, timeout=10, check=False)
    out: dict[str, dict[str, int]] = {}
    port = ""
    for line in r.stdout.splitlines():
        m = re.match(r"\s*port\s+(\S+?):\s*rx pkts=(\d+).*?drop=(\d+)", line)
        if m:
            port = "o" + m.group(1).strip('"')
            out[port] = {"rx": int(m.group(2)), "rx_drop": int(m.group(3))}
            continue
        m = re.match(r"\s*tx pkts=(\d+).*?drop=(\d+)", line)
        if m and port:
            out[port].update(tx=int(m.group(1)), tx_drop=int(m.group(2)))
    return out


def ovs_drops(ctl: Path) -> dict[str, int]:
    """The tester's count of frames its own pipeline dropped (a datapath flow whose action
    is drop: no rule, or a cached flow not yet revalidated)."""
    r = subprocess.run(["ovs-appctl", "-t", str(ctl), "coverage/read-counter",
                        "drop_action_of_pipeline"], capture_output=True, text=True, timeout=10,
                       check=False)
    return {"pipeline_drops": int(r.stdout)} if r.stdout.strip().isdigit() else {}


def sluiced_counters(rpc: Rpc) -> dict[str, dict[str, int]]:
    """sluiced's port counters: rx, tx, and every drop reason that is not 0."""
    out: dict[str, dict[str, int]] = {}
    for p in rpc.call("stats", switch="br0")["switches"][0]["ports"]:
        c = {"rx": p["rx_packets"], "tx": p["tx_packets"]}
        drops = p.get("drops") or {}
        c.update({k: v for k, v in drops.items() if v})
        out[p["name"]] = c
    return out


class Tracer:
    """Starts the capture and the counter sampler; `stop` ends both and writes what the
    analysis needs next to the capture (trace.pcap, samples.json, meta.json)."""

    def __init__(self, out: Path, socket: Path, dump_ports: list[str], of_port: int,
                 ifaces: dict[str, str], ovs_ctl: Path | None = None) -> None:
        self.out, self.socket, self.dump_ports = out, socket, dump_ports
        self.ovs_ctl = ovs_ctl
        self.meta = {"of_port": of_port,
                     "ifindex": {int(Path(f"/sys/class/net/{dev}/ifindex").read_text()): name
                                 for dev, name in ifaces.items()} | {1: "lo"}}
        out.mkdir(parents=True, exist_ok=True)
        self.samples: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        # -s 0: whole, for the OpenFlow streams; --immediate-mode and -U: each frame read
        # and written as it comes (else the last second's are lost when tcpdump is ended).
        self.dump = subprocess.Popen(
            ["tcpdump", "-i", "any", "-n", "-s", "0", "--immediate-mode", "-U", "-B", "65536",
             "-w", str(out / "trace.pcap")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        time.sleep(1)           # tcpdump has opened its sockets

    def _sample(self) -> None:
        rpc: Rpc | None = None
        while not self.stopping.wait(SAMPLE_S):
            sample: dict[str, Any] = {"wall": time.time()}
            try:
                rpc = rpc or Rpc(self.socket)
                sample["counters"] = sluiced_counters(rpc) | ovs_port_counters(self.dump_ports)
                if self.ovs_ctl is not None:
                    sample["counters"]["tester"] = ovs_drops(self.ovs_ctl)
            except Exception as e:  # noqa: BLE001 (a trace must not end the run)
                sample["error"] = str(e)
                rpc = None
            sample["done"] = time.time()
            self.samples.append(sample)
        if rpc is not None:
            rpc.close()

    def stop(self, ovs: Any = None) -> None:
        """Ends the capture and the sampler; with OVS (the tester, still running), keeps
        what it says of its datapath (dpctl/show -s, coverage/show) and its log."""
        self.stopping.set()
        self.thread.join(10)
        time.sleep(1)
        stop_process(self.dump, timeout=5)   # type: ignore[arg-type]
        if ovs is not None:
            for cmd in ("dpctl/show -s", "coverage/show", "dpif-netdev/pmd-stats-show"):
                r = subprocess.run(["ovs-appctl", "-t", str(ovs.ctl_path), *cmd.split()],
                                   capture_output=True, text=True, timeout=20, check=False)
                with open(self.out / "tester-ovs.txt", "a") as f:
                    f.write(f"== ovs-appctl {cmd}\n{r.stdout}{r.stderr}\n")
            with contextlib.suppress(OSError):
                shutil.copy(ovs.dir / "ovs-vswitchd.log", self.out / "ovs-vswitchd.log")
        (self.out / "samples.json").write_text(json.dumps(self.samples) + "\n")
        (self.out / "meta.json").write_text(json.dumps(self.meta) + "\n")


# ---- analysis ----

@dataclass
class Event:
    wall: float
    what: str           # "o1 out", "packet_out tool>tester", ...
    data: bytes = b""   # the frame (from its L3 header on the veths; whole in OpenFlow)
    note: str = ""


def port_stats_note(msg: bytes) -> str:
    """port:rx/tx of a port-stats reply, as the tool reads them."""
    parts = []
    pos = 16
    while pos + 112 <= len(msg):
        port, rx, tx = struct.unpack_from("!I4xQQ", msg, pos)
        if port < 0xffffff00:
            parts.append(f"{port}:{rx}/{tx}")
        pos += 112
    return "rx/tx " + " ".join(parts)


def pcap_records(pcap: Path) -> Iterator[tuple[float, int, int, bytes, bool]]:
    """(time, interface index, packet type, frame from its L3 header, whether it is whole)
    of each record of a `tcpdump -i any` capture (link type LINUX_SLL2)."""
    data = pcap.read_bytes()
    magic, _, _, _, _, _, linktype = struct.unpack_from("<IHHiIII", data, 0)
    if magic != 0xA1B2C3D4 or linktype != 276:
        raise ValueError(f"{pcap}: not a little-endian microsecond LINUX_SLL2 capture")
    pos = 24
    while pos + 16 <= len(data):
        sec, usec, incl, orig = struct.unpack_from("<IIII", data, pos)
        rec = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        if len(rec) >= 20:
            ifindex, = struct.unpack_from("!I", rec, 4)
            yield sec + usec / 1e6, ifindex, rec[10], rec[20:], incl == orig


def tcp_segment(l3: bytes) -> tuple[int, int, bytes] | None:
    """(source port, destination port, payload) of an IPv4 TCP packet, or None."""
    if len(l3) < 20 or l3[0] >> 4 != 4 or l3[9] != 6:
        return None
    ihl = (l3[0] & 15) * 4
    total = struct.unpack_from("!H", l3, 2)[0]
    if len(l3) < ihl + 20:
        return None
    sport, dport = struct.unpack_from("!HH", l3, ihl)
    doff = (l3[ihl + 12] >> 4) * 4
    return sport, dport, l3[ihl + doff:total]


def read_events(pcap: Path, meta: dict[str, Any], dpids: dict[str, str]) -> list[Event]:
    """Every frame on a veth and every OpenFlow message of the tool's connections (which
    switch, which way; each TCP stream's bytes put together, so a message split over
    segments or sharing one is read whole), in capture order."""
    ifindex = {int(k): v for k, v in meta["ifindex"].items()}
    of_port = meta["of_port"]
    events: list[Event] = []
    conn: dict[int, str] = {}                  # the switch's TCP port -> "tester" or "target"
    streams: dict[tuple[int, int], bytes] = {}  # (sport, dport) -> bytes not yet a message
    for wall, index, pkttype, l3, whole in pcap_records(pcap):
        name = ifindex.get(index)
        if name is None:
            continue
        outgoing = pkttype == 4
        if name != "lo":
            events.append(Event(wall, f"{name} {'out' if outgoing else 'in'}", l3))
            continue
        seg = tcp_segment(l3)
        if outgoing or seg is None or of_port not in seg[:2]:
            continue            # loopback frames are seen twice: the incoming copy is kept
        sport, dport, payload = seg
        switch_port = sport if dport == of_port else dport
        from_tool = sport == of_port
        # A segment the capture cut loses the stream's place: start again at the next one.
        buf = streams.get((sport, dport), b"") + payload if whole else b""
        while len(buf) >= 8:
            length = struct.unpack_from("!H", buf, 2)[0]
            if len(buf) < length or length < 8:
                break
            msg, buf = buf[:length], buf[length:]
            mtype = msg[1]
            if mtype == OFP_FEATURES_REPLY and len(msg) >= 16:
                dpid = msg[8:16].hex()
                conn[switch_port] = next((k for k, v in dpids.items() if v == dpid), dpid)
            who = conn.get(switch_port, str(switch_port))
            e = Event(wall, f"{OF_TYPES.get(mtype, str(mtype))} "
                            f"{'tool>' + who if from_tool else who + '>tool'}")
            if mtype == OFP_PACKET_OUT and len(msg) >= 24:
                e.data = msg[24 + struct.unpack_from("!H", msg, 16)[0]:]
            elif mtype == OFP_PACKET_IN and len(msg) >= 32:
                e.data = msg[24 + (struct.unpack_from("!H", msg, 26)[0] + 7) // 8 * 8 + 2:]
            elif mtype == OFP_MULTIPART_REPLY and len(msg) >= 16 and \
                    struct.unpack_from("!H", msg, 8)[0] == OFPMP_PORT_STATS:
                e.note = port_stats_note(msg)
            events.append(e)
        streams[(sport, dport)] = buf
    return events


HOPS = ("o1 out", "t1 in", "o2 in", "o3 in", "packet_in tester>tool", "packet_in target>tool")


def test_path(events: list[Event]) -> dict[str, float]:
    """The delays (s) after the first packet-out to the tester at which its frame was first
    seen at each hop (HOPS); a hop it never reached is absent."""
    po = next((e for e in events if e.what == "packet_out tool>tester"), None)
    if po is None:
        return {}
    key = po.data[-24:]         # the frame's tail: no header an action or a tag changes
    path: dict[str, float] = {"packet_out": 0.0}
    for e in events:
        if e.wall >= po.wall and e.what in HOPS and e.what not in path and key in e.data:
            path[e.what] = round(e.wall - po.wall, 6)
    return path


def start_log_reader(tool: subprocess.Popen[bytes], log: Path, timed: Path,
                     ) -> threading.Thread:
    """Copies the tool's output (a pipe) into LOG as it is, and each line with the time it
    was read into TIMED. (The tool's logger has its own handler, so a logging
    configuration cannot add the times.)"""
    assert tool.stdout is not None
    pipe = tool.stdout

    def copy() -> None:
        with open(log, "wb") as plain, open(timed, "w") as stamped:
            for line in pipe:
                plain.write(line)
                plain.flush()
                stamped.write(f"{time.time():.6f} {line.decode(errors='replace')}")
                stamped.flush()

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def result_times(timed_log: Path) -> list[float]:
    """When the tool logged each test's result, in order."""
    times = []
    for line in timed_log.read_text(errors="replace").splitlines():
        stamp, _, message = line.partition(" ")
        if OUTCOME.match(message.rstrip("\n")):
            times.append(float(stamp))
    return times


def counters_around(samples: list[dict[str, Any]], begin: float, end: float,
                    ) -> tuple[dict[str, dict[str, int]], float, float]:
    """The counters' changes from the last sample read before BEGIN to the first begun
    after END, and how long before and after the test those samples were."""
    ok = [s for s in samples if "counters" in s]
    before = next((s for s in reversed(ok) if s["done"] <= begin), None)
    after = next((s for s in ok if s["wall"] >= end), None)
    if before is None or after is None:
        return {}, 0.0, 0.0
    return (delta(before["counters"], after["counters"]), begin - before["done"],
            after["wall"] - end)


def delta(a: dict[str, Any], b: dict[str, Any]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for port, c in b.items():
        d = {k: v - a.get(port, {}).get(k, 0) for k, v in c.items()
             if v != a.get(port, {}).get(k, 0)}
        if d:
            out[port] = d
    return out


def analyse(out: Path, results: list[dict[str, Any]], dpids: dict[str, str]) -> str:
    """trace.txt and trace.json from the trace in OUT and the tool's RESULTS (summary.json's
    tests, in order); returns trace.txt's text."""
    meta = json.loads((out / "meta.json").read_text())
    samples = json.loads((out / "samples.json").read_text())
    events = read_events(out / "trace.pcap", meta, dpids)
    times = result_times(out / "tool-timed.log")
    lines: list[str] = []
    if len(times) != len(results):
        lines.append(f"note: {len(times)} results in the timed log, {len(results)} in the "
                     "tool's: the pairing below is by order and may be off")
    tests, start, k = [], 0.0, 0
    for t in times:
        window = []
        while k < len(events) and events[k].wall <= t:
            if events[k].wall > start:
                window.append(events[k])
            k += 1
        tests.append(window)
        start = t
    delays: dict[str, list[float]] = {}
    per_test = []
    for i, (r, window) in enumerate(zip(results, tests, strict=False)):
        path = test_path(window)
        ok = r["result"] == "OK"
        timeout = "Receiving timeout" in r["detail"]
        per_test.append({"file": r["file"], "test": r["test"], "result": r["result"],
                         "path": path})
        if ok:
            for hop, d in path.items():
                delays.setdefault(hop, []).append(d)
        if not timeout:
            continue
        end = times[i]
        begin = times[i - 1] if i else (window[0].wall if window else end)
        t0 = next((e.wall for e in window if e.what == "packet_out tool>tester"), begin)
        lines.append(f"== {r['file']} | {r['test']}\n   {r['detail']}")
        for e in window:
            frame = f" {len(e.data)} B" if e.data else ""
            lines.append(f"   {e.wall - t0:+9.4f}  {e.what}{frame} {e.note}".rstrip())
        lines.append(f"   {end - t0:+9.4f}  the tool logs the result")
        lines.append(f"   path: {path}")
        d, pre, post = counters_around(samples, begin, end)
        lines.append(f"   counters from {pre:.2f} s before the test to {post:.2f} s after "
                     f"it: {d}")
    head = [f"{len(results)} tests, {sum(1 for r in results if r['result'] != 'OK')} failed, "
            f"{sum(1 for r in results if 'Receiving timeout' in r['detail'])} with "
            "'Receiving timeout' (each in full below); delays after the packet-out to the "
            "tester, passed tests (s):"]
    for hop, ds in sorted(delays.items(), key=lambda kv: statistics.median(kv[1])):
        ds.sort()
        p99 = ds[max(0, int(len(ds) * 0.99) - 1)]
        head.append(f"  {hop:24} n={len(ds):4} median {statistics.median(ds):.4f} "
                    f"p99 {p99:.4f} max {ds[-1]:.4f}")
    text = "\n".join(head + lines) + "\n"
    (out / "trace.txt").write_text(text)
    (out / "trace.json").write_text(json.dumps(per_test, indent=0) + "\n")
    return text


def main() -> None:
    """Analyses a trace again: of_trace.py OUT (summary.json and the trace files)."""
    import sys

    out = Path(sys.argv[1])
    results = json.loads((out / "summary.json").read_text())["tests"]
    with contextlib.suppress(BrokenPipeError):
        print(analyse(out, results, {"target": "00000000000000a1",
                                     "tester": "00000000000000b1"}), end="")


if __name__ == "__main__":
    main()
