"""sluice-gen's inline L3 VNF (`--vnf-kind l3`, DPDK l3fwd's behaviour in the generator's
loop) and the mixed chain (an L3 VNF, then an L2 VNF) through sluiced and sluice-bench.

- On pcap ports: TTL one less, checksum right, l3fwd's MACs, the rest of the frame as it
  was; TTL-expired and malformed frames discarded and counted by reason.
- Beside DPDK's l3fwd (LPM, the routes sluice-bench gives it) on the same input at a low
  rate: the same frames out, byte for byte, for every frame both forward. Where the two
  differ by design (l3fwd forwards a frame with TTL 1 or a wrong checksum, which the inline
  VNF discards as RFC 1812 asks), the test says so frame by frame.
- The mixed chain through sluiced's patch mode: the frames at the sink have TTL 64 - 1.
- `sluice-bench run --scenario chain-mixed`, inline and with l3fwd and l2fwd processes.
"""

from __future__ import annotations

import contextlib
import json
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gen_helpers import GEN, run_gen
from test_bench import assert_cleaned_up, bench, rows
from test_bench_vnfs import capture, read_pcap, vdev, vnf_ports, write_pcap

from conftest import REPO, Daemon, remove_hugepage_files, stop_process, wait_for
from sluice.bench import examples

REASONS = ("not_ipv4", "truncated", "bad_version", "bad_ihl", "bad_total_length",
           "bad_checksum", "ttl_expired")


@pytest.fixture(scope="module")
def l3fwd_built() -> None:
    """DPDK's examples, built if missing; skip (with the build's words) if they cannot be."""
    if all(examples.missing(REPO, n) is None for n in examples.EXAMPLES):
        return
    why = examples.build(REPO)
    if why is not None:
        pytest.skip(f"DPDK's examples cannot be built here: {why}")


# -- frames and what a router makes of them -------------------------------------------------

def ip_checksum(header: bytes) -> int:
    """The IPv4 header checksum of HEADER (its checksum field taken as it is)."""
    words = struct.unpack(f"!{len(header) // 2}H", header)
    s = sum(words)
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(i: int, dst_ip: bytes, ttl: int = 64, version_ihl: int = 0x45,
          total: int | None = None, break_checksum: bool = False,
          ether_type: int = 0x0800) -> bytes:
    """An Ethernet/IPv4/UDP frame (60 to 1514 bytes, FCS excluded) with a right checksum
    unless BREAK_CHECKSUM, and the header fields given."""
    size = 60 + (i * 97) % (1514 - 60 + 1)
    eth = bytes.fromhex("020002000001" "020001000001") + struct.pack("!H", ether_type)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", version_ihl, 0, size - 14 if total is None
                               else total, i, 0, ttl, 17, 0, bytes([10, 0, 0, 1]), dst_ip))
    ip[10:12] = struct.pack("!H", ip_checksum(bytes(ip)) ^ (0x5A5A if break_checksum else 0))
    udp = struct.pack("!HHHH", 1024 + i, 1024, size - 34, 0)
    payload = bytes((i + k) % 251 for k in range(size - 42))
    return eth + bytes(ip) + udp + payload


def mixed_input(n: int, dst_net: int) -> tuple[list[bytes], dict[int, str]]:
    """N frames to 10.DST_NET.0.x: mostly good ones with TTLs from 2 to 255, and every
    seventh a case for the VNF to discard. Returns the frames and, per index of a case,
    the inline VNF's reason."""
    cases: list[tuple[str, dict[str, object]]] = [
        ("ttl_expired", {"ttl": 1}), ("bad_version", {"version_ihl": 0x65}),
        ("bad_ihl", {"version_ihl": 0x44}), ("bad_total_length", {"total": 19}),
        ("bad_checksum", {"break_checksum": True}), ("not_ipv4", {"ether_type": 0x0806}),
        ("ttl_expired", {"ttl": 0})]
    frames, why = [], {}
    for i in range(n):
        dst = bytes([10, dst_net, 0, 1 + i % 200])
        if i % 7 == 3:
            reason, kw = cases[(i // 7) % len(cases)]
            frames.append(frame(i, dst, **kw))   # type: ignore[arg-type]
            why[i] = reason
        else:
            frames.append(frame(i, dst, ttl=2 + (i * 37) % 254))
    return frames, why


def routed(f: bytes, dst_mac: bytes, src_mac: bytes, l3fwd: bool) -> bytes:
    """F as a router forwards it: MACs rewritten, TTL minus one, and the checksum updated
    as l3fwd does it (++ on the little-endian field: plus 0x0100 in one's complement) or
    as the inline VNF does (RFC 1624 equation 3); the two differ only on a result of 0."""
    ip = bytearray(f[14:34])
    ip[8] = (ip[8] - 1) & 0xFF
    (old,) = struct.unpack("!H", bytes(ip[10:12]))
    if l3fwd:
        le = ((old & 0xFF) << 8 | old >> 8) + 1
        new = ((le & 0xFF) << 8 | (le >> 8) & 0xFF)
    else:
        s = (~old & 0xFFFF) + 0xFEFF
        new = ~((s & 0xFFFF) + (s >> 16)) & 0xFFFF
    ip[10:12] = struct.pack("!H", new)
    return dst_mac + src_mac + f[12:14] + bytes(ip) + f[34:]


def l3fwd_forwards(f: bytes) -> bool:
    """Whether l3fwd (its vector path's rfc1812_process) sends F on to the route's port:
    IPv4 with version 4, a header of 5..15 words and a total length of 20 or more. TTL and
    checksum are not looked at (the checksum is left to the NIC's receive offload)."""
    vi, total = f[14], struct.unpack("!H", f[16:18])[0]
    return f[12:14] == b"\x08\x00" and 0x45 <= vi <= 0x4F and total >= 20


# -- the inline L3 VNF on pcap ports ----------------------------------------------------------

def l3_adds_up(v: dict) -> None:
    """Every frame received was sent, dropped by the port or discarded with a reason."""
    for d in ("in_to_out", "out_to_in"):
        x = v[d]
        assert x["rx"] == x["tx"] + x["dropped"] + x["discarded"], v
        assert x["discarded"] == sum(x["discards"].values()), v
        assert set(x["discards"]) == set(REASONS), v
    assert v["discarded"] == v["in_to_out"]["discarded"] + v["out_to_in"]["discarded"], v


def test_l3_vnf_routes_and_discards_on_the_wire(workdir: Path) -> None:
    """Frames read from a pcap file on the in port leave the out port with TTL - 1, a right
    checksum, destination 02:00:00:00:00:01 (l3fwd's default next hop) and the out port's
    MAC as source, nothing else changed; the cases to discard are counted by reason. The
    other direction, with --vnf-dst-mac, goes to the given MAC."""
    into_in, why_in = mixed_input(70, 128)     # every reason but truncated, in each direction
    into_out, why_out = mixed_input(50, 0)
    write_pcap(workdir / "in.pcap", into_in)
    write_pcap(workdir / "out.pcap", into_out)
    spec_in = f"pcap:rx={workdir}/in.pcap,tx={workdir}/in_tx.pcap"
    spec_out = f"pcap:rx={workdir}/out.pcap,tx={workdir}/out_tx.pcap"
    res, _ = run_gen(workdir, ["--vnf-in", spec_in, "--vnf-out", spec_out, "--vnf-kind", "l3",
                               "--vnf-dst-mac", "02:00:00:00:00:01,02:00:00:00:0a:00",
                               "--duration", "0.5"])
    [v] = res["vnfs"]
    assert v["kind"] == "l3" and res["options"]["vnfs"][0]["kind"] == "l3"
    l3_adds_up(v)
    for sent, why, got, side, dst, mac in (
            (into_in, why_in, read_pcap(workdir / "out_tx.pcap"), "in_to_out",
             "02:00:00:00:00:01", v["out_mac"]),
            (into_out, why_out, read_pcap(workdir / "in_tx.pcap"), "out_to_in",
             "02:00:00:00:0a:00", v["in_mac"])):
        want = [routed(f, bytes.fromhex(dst.replace(":", "")),
                       bytes.fromhex(mac.replace(":", "")), l3fwd=False)
                for i, f in enumerate(sent) if i not in why]
        assert got == want, f"{side}: {len(got)} frames out, {len(want)} expected"
        for g in got:
            assert ip_checksum(g[14:34]) == 0          # a right checksum sums to zero
        counts = {r: sum(1 for w in why.values() if w == r) for r in REASONS}
        assert v[side]["discards"] == counts, v[side]
        assert v[side]["rx"] == len(sent) and v[side]["tx"] == len(want), v[side]
        assert all(counts[r] > 0 for r in REASONS if r != "truncated"), counts


def test_l3_vnf_counts_truncated_frames_and_plain_l2_vnfs_discard_nothing(
        workdir: Path) -> None:
    """A frame cut short of its total length is discarded as truncated by an L3 VNF; the same
    file through an L2 VNF (the default kind) passes whole, TTL untouched."""
    good = frame(5, bytes([10, 128, 0, 1]))
    # The total length says 1400 bytes; the frame holds 545 - 14. Checksum right again.
    cut = good[:16] + struct.pack("!H", 1400) + good[18:24] + b"\0\0" + good[26:]
    cut = cut[:24] + struct.pack("!H", ip_checksum(cut[14:34])) + cut[26:]
    write_pcap(workdir / "in.pcap", [good, cut])
    for kind in ("l3", "l2"):
        spec_in = f"pcap:rx={workdir}/in.pcap"
        spec_out = f"pcap:tx={workdir}/{kind}_tx.pcap"
        res, _ = run_gen(workdir, ["--vnf-in", spec_in, "--vnf-out", spec_out,
                                   "--vnf-kind", kind, "--duration", "0.3"],
                         name=f"{kind}.json")
        [v] = res["vnfs"]
        l3_adds_up(v)
        got = read_pcap(workdir / f"{kind}_tx.pcap")
        if kind == "l3":
            assert v["in_to_out"]["discards"]["truncated"] == 1 and len(got) == 1, v
            assert got[0][22] == 63
        else:
            assert v["discarded"] == 0 and len(got) == 2 and got[0][22] == 64, v


def bad(args: list[str]) -> str:
    r = subprocess.run([str(GEN), *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    return r.stderr


def test_bad_vnf_kind_options() -> None:
    r = subprocess.run([str(GEN), "--help"], capture_output=True, text=True, timeout=10)
    assert "--vnf-kind" in r.stdout
    assert "--vnf-kind" in bad(["--vnf-in", "null", "--vnf-out", "null", "--vnf-kind", "l4"])
    assert "--vnf-kind" in bad(["--vnf-in", "null", "--vnf-out", "null", "--vnf-kind", "l3",
                                "--vnf-kind", "l2"])


# -- beside DPDK's l3fwd ----------------------------------------------------------------------

def run_inline_l3(workdir: Path, ports: tuple[str, str]) -> dict:
    """sluice-gen's inline L3 VNF on PORTS, beside a null port it neither sends to nor hears."""
    out = workdir / "inline.json"
    r = subprocess.run([str(GEN), "--cpu", "0", "--role", "rx", "--port", "null",
                        "--vnf-in", ports[0], "--vnf-out", ports[1], "--vnf-kind", "l3",
                        "--duration", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text())["vnfs"][0]


def run_l3fwd(workdir: Path, ports: tuple[str, str], done: Callable[[], bool]) -> None:
    """DPDK's l3fwd (LPM, both ports on one lcore, the two routes sluice-bench gives it) on
    PORTS until DONE() holds, then a moment more so that nothing beyond it comes out."""
    from sluice.bench.vnfs import L3FWD_RULES_V4, L3FWD_RULES_V6
    v4, v6 = workdir / "v4.cfg", workdir / "v6.cfg"
    v4.write_text(L3FWD_RULES_V4)
    v6.write_text(L3FWD_RULES_V6)
    log, prefix = workdir / "l3fwd.log", "vnfl3fwd"
    cmd = ["stdbuf", "-oL", str(examples.path(REPO, "l3fwd")), "--lcores", "0@0", "--no-pci",
           "--in-memory", "--single-file-segments", "--file-prefix", prefix,
           "--vdev", vdev(0, ports[0]), "--vdev", vdev(1, ports[1]), "--", "-p", "0x3",
           "--config=(0,0,0),(1,0,0)", "--parse-ptype", f"--rule_ipv4={v4}",
           f"--rule_ipv6={v6}"]
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: "entering main loop" in log.read_text(errors="replace"), timeout=30)
        wait_for(done, timeout=15)
        time.sleep(0.3)
    finally:
        assert stop_process(proc, timeout=15) == 0, log.read_text(errors="replace")
        remove_hugepage_files(prefix)


@pytest.mark.parametrize("direction", ["in_to_out", "out_to_in"])
def test_inline_l3_vnf_and_l3fwd_emit_the_same_frames(workdir: Path, l3fwd_built: None,
                                                       direction: str) -> None:
    """The same frames through the inline L3 VNF and through l3fwd, each reading them from a
    pcap file on one port and sending to a capturing vhost-user server from a virtio-user
    port with a fixed MAC. Frames go to 10.128.0.0/9 (l3fwd's route to port 1) for
    in_to_out, to 10.0.0.0/9 (its route to port 0) for out_to_in.

    Both emit, byte for byte, every good frame with TTL - 1, the checksum updated, the
    destination 02:00:00:00:00:0P and the output port's MAC as source, and both discard
    bad versions, header lengths and total lengths. They differ by design on three cases:
    l3fwd sends a frame with TTL 1 or 0 on (TTL wrapped to 0 or 255) and one with a wrong
    checksum (TTL - 1, checksum + 0x0100: still wrong), which the inline VNF discards as
    ttl_expired and bad_checksum (RFC 1812 5.2.2 and 5.3.1); and l3fwd sends a non-IP frame
    back out of the port it came from (its vector path's route for it), which the inline VNF
    discards as not_ipv4 (here that port is the pcap input, which sends nothing anywhere)."""
    out_port = 1 if direction == "in_to_out" else 0
    sent, why = mixed_input(120, 128 if direction == "in_to_out" else 0)
    pcap_in = workdir / "in.pcap"
    write_pcap(pcap_in, sent)
    dst, src = bytes([2, 0, 0, 0, 0, out_port]), bytes([2, 0x5E, 0, 0, 0, out_port])
    want = {"inline": [routed(f, dst, src, l3fwd=False) for i, f in enumerate(sent)
                       if i not in why],
            "l3fwd": [routed(f, dst, src, l3fwd=True) for f in sent if l3fwd_forwards(f)]}
    # No good frame's checksum update ends at 0x0000, where the two ways of updating it
    # write 0x0000 (inline, as a fresh computation) and 0xffff (l3fwd): the frames compare.
    assert all(g[24:26] != b"\0\0" for g in want["inline"])
    got: dict[str, list[bytes]] = {}
    with capture(workdir, "inl") as (sock, cap):
        vnf = run_inline_l3(workdir, vnf_ports(pcap_in, sock, direction))
        wait_for(lambda: len(read_pcap(cap)) >= len(want["inline"]), timeout=15)
    got["inline"] = read_pcap(cap)
    with capture(workdir, "l3f") as (sock, cap):
        run_l3fwd(workdir, vnf_ports(pcap_in, sock, direction),
                  lambda: len(read_pcap(cap)) >= len(want["l3fwd"]))
    got["l3fwd"] = read_pcap(cap)
    for who in ("inline", "l3fwd"):
        assert len(got[who]) == len(want[who]), {k: len(v) for k, v in got.items()}
        for i, (a, b) in enumerate(zip(got[who], want[who], strict=True)):
            assert a == b, f"{who} frame {i}: got {a[:34].hex()} want {b[:34].hex()}"
    # The frames both forward are the same bytes; l3fwd's extra ones are exactly the frames
    # with TTL 0 or 1 and with a wrong checksum.
    both = [g for g in got["l3fwd"] if ip_checksum(g[14:34]) == 0 and g[22] not in (0, 255)]
    assert both == got["inline"]
    extra = sorted(why[i] for i, f in enumerate(sent) if i in why and l3fwd_forwards(f))
    assert set(extra) == {"ttl_expired", "bad_checksum"}
    assert len(got["l3fwd"]) - len(got["inline"]) == len(extra)
    side = vnf[direction]
    assert side["rx"] == len(sent) and side["tx"] == len(want["inline"]), side
    assert side["discarded"] == len(why) and side["dropped"] == 0, side


# -- the mixed chain ------------------------------------------------------------------------

@contextlib.contextmanager
def frontend_capture(workdir: Path, sock: Path) -> Iterator[Path]:
    """A virtio-user port on a switch's vhost-user server socket SOCK whose every received
    frame is written to a pcap file: testpmd io between net_virtio_user and net_pcap (tx
    only). Yields the capture file."""
    cap, log, prefix = workdir / "sink.pcap", workdir / "sink-capture.log", "vnfl3cap"
    cmd = ["stdbuf", "-oL", "dpdk-testpmd", "--lcores", "0@0,1@1", "--no-pci", "--in-memory",
           "--single-file-segments", "--file-prefix", prefix, "--log-level=*:warning",
           "--vdev", f"net_virtio_user0,path={sock},queues=1",
           "--vdev", f"net_pcap1,tx_pcap={cap}", "--", "--forward-mode=io", "--nb-cores", "1",
           "--port-topology=paired", "--stats-period", "3600", "--auto-start"]
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: "forwards packets on" in log.read_text(errors="replace"), timeout=30)
        yield cap
    finally:
        stop_process(proc, timeout=15)
        remove_hugepage_files(prefix)


def settle(cap: Path, want: int, timeout: float = 10.0) -> None:
    """Waits until capture CAP holds WANT frames, or its count has held still for 1 s."""
    deadline, last, since = time.monotonic() + timeout, -1, time.monotonic()
    while time.monotonic() < deadline:
        n = len(read_pcap(cap))
        if n >= want:
            return
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > 1.0:
            return
        time.sleep(0.1)

def test_mixed_chain_through_sluiced_decrements_the_ttl_once(daemon: Daemon,
                                                             workdir: Path) -> None:
    """generator -> L3 VNF -> L2 VNF -> sink, every hop through sluiced's patch mode, the
    sink a capture: every frame arrives with TTL 63 (sluice-gen sends 64) and a right
    checksum, from the L2 VNF's out port to l2fwd's 02:00:00:00:00:01."""
    daemon.call("add-switch", name="br0")
    for p in ("gen", "a0", "a1", "b0", "b1", "sink"):
        daemon.call("add-port", switch="br0", name=p,
                    spec=f"vhost-user:server,path={workdir}/{p}.sock")
    for a, b in (("gen", "a0"), ("a1", "b0"), ("b1", "sink")):
        daemon.call("patch", switch="br0", port1=a, port2=b)
    wait_for((workdir / "sink.sock").exists, timeout=10)
    with frontend_capture(workdir, workdir / "sink.sock") as cap:
        vu = {p: f"virtio-user:path={workdir}/{p}.sock,mac=02:5e:00:00:00:{i:02x}"
              for i, p in enumerate(("gen", "a0", "a1", "b0", "b1"))}
        res, _ = run_gen(workdir, ["--role", "tx", "--port", vu["gen"],
                                   "--vnf-in", vu["a0"], "--vnf-out", vu["a1"],
                                   "--vnf-kind", "l3",
                                   "--vnf-in", vu["b0"], "--vnf-out", vu["b1"],
                                   "--vnf-kind", "l2", "--rate", "20k", "--duration", "1"])
        l3, l2 = res["vnfs"]
        settle(cap, l2["in_to_out"]["tx"])
    got = read_pcap(cap)
    assert l3["kind"] == "l3" and l2["kind"] == "l2"
    assert res["tx_packets"] > 10_000
    assert res["tx_packets"] // 2 < l3["in_to_out"]["rx"] <= res["tx_packets"], l3
    assert l3["in_to_out"]["tx"] == l3["in_to_out"]["rx"] and l3["discarded"] == 0, l3
    assert l2["in_to_out"]["rx"] == l3["in_to_out"]["tx"] > 0, (l3, l2)
    # The capture's poller shares CPU 1 with sluiced's worker: a ring may overflow now and
    # then, but every frame that arrives has been through both VNFs once.
    assert res["tx_packets"] // 2 < len(got) <= l2["in_to_out"]["tx"], (len(got), l2)
    assert {g[22] for g in got} == {63}
    assert all(ip_checksum(g[14:34]) == 0 for g in got)
    assert {g[:12].hex() for g in got} == {"020000000001" "025e00000004"}


def test_chain_mixed_scenario_through_sluice_patch(tmp_path: Path) -> None:
    """sluice-bench's chain-mixed with inline VNFs through sluice:patch: frames come through,
    the rows name the scenario and the VNF kinds, and nothing is left behind."""
    out = tmp_path / "mixed"
    r = bench("run", "--scenario", "chain-mixed", "--switch", "sluice:patch", "--sizes", "64",
              "--duration", "3", "--trials", "1", "--warmup", "1", "--out", str(out),
              "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert got, r.stdout + r.stderr
    for x in got:
        assert x["scenario"] == "chain-mixed" and x["vnf"] == "inline:l3,l2", x
        assert x["rx_pps"] > 0 and not x["oversubscribed"], x
    log = next((out / "logs").glob("gen-chain-mixed-*.log")).read_text()
    assert log.count("--vnf-kind") == 2 and "--vnf-kind l3" in log, log[:2000]
    assert_cleaned_up(out)


def test_chain_mixed_with_l3fwd_and_l2fwd_processes(tmp_path: Path, l3fwd_built: None) -> None:
    """The process variant: l3fwd then l2fwd, each its own process beside the generator on
    CPU 0 (oversubscribed: rows marked), through sluice:patch; frames come through."""
    out = tmp_path / "mixed-procs"
    # One switch, one trial: 2 s show frames come through.
    r = bench("run", "--scenario", "chain-mixed", "--vnf", "l3fwd,l2fwd",
              "--allow-shared-cpu", "--switch", "sluice:patch", "--sizes", "64",
              "--duration", "2", "--trials", "1", "--warmup", "0", "--out", str(out),
              "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert got, r.stdout + r.stderr
    for x in got:
        assert x["vnf"] == "l3fwd,l2fwd" and x["oversubscribed"] is True, x
        assert x["rx_pps"] > 0, x
    logs = {p.name.split("-")[-1] for p in (out / "logs").glob("*vnf*-l*fwd.log")}
    assert logs == {"l3fwd.log", "l2fwd.log"}, logs
    assert_cleaned_up(out)
