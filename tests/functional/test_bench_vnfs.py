"""DPDK's examples in sluice-bench: process VNFs (l2fwd, testpmd-mac) in loopback, the same
frames from sluice-gen's inline VNF as from l2fwd, and basicfwd as a switch.

Real processes throughout. The examples are built (scripts/dpdk-examples.sh) when missing;
the tests skip, saying why, only when that build fails.
"""

from __future__ import annotations

import contextlib
import json
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gen_helpers import GEN
from test_bench import assert_cleaned_up, bench, rows

from conftest import REPO, remove_hugepage_files, stop_process, wait_for
from sluice.bench import examples

PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)   # Ethernet


@pytest.fixture(scope="module")
def built() -> None:
    """DPDK's examples, built if missing; skip (with the build's words) if they cannot be."""
    if all(examples.missing(REPO, n) is None for n in examples.EXAMPLES):
        return
    why = examples.build(REPO)
    if why is not None:
        pytest.skip(f"DPDK's examples cannot be built here: {why}")


# -- loopback with process VNFs ------------------------------------------------------------

def test_loopback_1_with_l2fwd_processes_forwards_and_is_marked_oversubscribed(
        tmp_path: Path, built: None) -> None:
    """loopback-1, an l2fwd process as the VNF of testpmd and of sluiced: frames come
    through both (at the scheduler's pace on 2 CPUs), and every row says oversubscribed.
    Each switch runs alone with its VNF (interleaved trials)."""
    out = tmp_path / "l2fwd"
    # Interleaved: each switch runs its trial alone; 2 s show frames come through.
    r = bench("run", "--scenario", "loopback-1", "--vnf", "l2fwd", "--allow-shared-cpu",
              "--switch", "testpmd,sluice:patch", "--sizes", "64", "--duration", "2",
              "--trials", "1", "--warmup", "0", "--out", str(out), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert {x["key"] for x in got} == {"testpmd:io", "sluice:patch"}, got
    for x in got:
        assert x["rx_pps"] > 0, x
        assert x["vnf"] == "l2fwd" and x["oversubscribed"] is True, x
        assert x["method"] == "interleaved", x        # each switch alone with its VNF
    logs = sorted(p.name for p in (out / "logs").glob("*vnf1-l2fwd.log"))
    assert len(logs) == 2, logs                       # one l2fwd per switch
    for name in logs:                                 # forwarded, then stopped by the harness
        text = (out / "logs" / name).read_text(errors="replace")
        assert "entering main loop" in text and "Bye..." in text, text[-500:]
    assert_cleaned_up(out)


def test_process_vnfs_are_refused_on_shared_cpus_without_allow(tmp_path: Path,
                                                               built: None) -> None:
    """On 2 CPUs a VNF process must share one with a poller: refused before anything
    starts, with the reason."""
    out = tmp_path / "refused"
    r = bench("run", "--scenario", "loopback-1", "--vnf", "testpmd-mac", "--switch",
              "testpmd", "--sizes", "64", "--duration", "2", "--trials", "1",
              "--out", str(out), "--no-report")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "refused" in r.stderr and "testpmd-mac VNF 1" in r.stderr, r.stderr
    assert not (out / "results.jsonl").exists()


# -- the inline VNF and l2fwd put the same frames on the wire ----------------------------

def known_frames(n: int) -> list[bytes]:
    """N distinct IPv4/UDP frames (FCS excluded) of 60 to 1514 bytes, a pattern in each."""
    out = []
    for i in range(n):
        size = 60 + (i * 97) % (1514 - 60 + 1)
        eth = bytes.fromhex("020002000001" "020001000001" "0800")
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, size - 14, i, 0, 64, 17, 0,
                         bytes([10, 0, 0, 1]), bytes([10, 128, 0, 1 + i % 200]))
        udp = struct.pack("!HHHH", 1024 + i, 1024, size - 34, 0)
        payload = bytes((i + k) % 251 for k in range(size - 42))
        out.append(eth + ip + udp + payload)
    return out


def write_pcap(path: Path, frames: list[bytes]) -> None:
    with path.open("wb") as f:
        f.write(PCAP_HEADER)
        for fr in frames:
            f.write(struct.pack("<IIII", 0, 0, len(fr), len(fr)) + fr)


def read_pcap(path: Path) -> list[bytes]:
    """The frames of a pcap file (a record cut short by a writer still at it is left out)."""
    if not path.exists():
        return []
    data, off, out = path.read_bytes(), 24, []
    while off + 16 <= len(data):
        incl = struct.unpack("<IIII", data[off:off + 16])[2]
        if off + 16 + incl > len(data):
            break
        out.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return out


@contextlib.contextmanager
def capture(workdir: Path, name: str) -> Iterator[tuple[Path, Path]]:
    """A vhost-user server whose every received frame is written to a pcap file: testpmd
    io between net_vhost and a net_pcap port (tx only). Yields (socket, capture file)."""
    sock, cap = workdir / f"{name}.sock", workdir / f"{name}.pcap"
    log = workdir / f"{name}-capture.log"
    prefix = f"vnfcap{name}"
    cmd = ["stdbuf", "-oL", "dpdk-testpmd", "--lcores", "0@0,1@1", "--no-pci", "--in-memory",
           "--single-file-segments", "--file-prefix", prefix, "--log-level=*:warning",
           "--vdev", f"net_vhost0,iface={sock},queues=1", "--vdev", f"net_pcap1,tx_pcap={cap}",
           "--", "--forward-mode=io", "--nb-cores", "1", "--port-topology=paired",
           "--stats-period", "3600", "--auto-start"]
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: "forwards packets on" in log.read_text(errors="replace")
                 and sock.exists(), timeout=30)
        yield sock, cap
    finally:
        stop_process(proc, timeout=15)
        remove_hugepage_files(prefix)


def vnf_ports(pcap_in: Path, sock: Path, direction: str) -> tuple[str, str]:
    """The VNF's two ports as (port 0, port 1) sluice port specs: the input replayed from a
    pcap file, the output a virtio-user port with a fixed MAC on the capture's socket. For
    in_to_out the input is port 0 (the inline VNF's in), for out_to_in it is port 1."""
    rx = f"pcap:rx={pcap_in}"
    mac = "02:5e:00:00:00:01" if direction == "in_to_out" else "02:5e:00:00:00:00"
    tx = f"virtio-user:path={sock},mac={mac}"
    return (rx, tx) if direction == "in_to_out" else (tx, rx)


def vdev(i: int, spec: str) -> str:
    """The DPDK vdev of one of vnf_ports' specs (for l2fwd, which takes no sluice specs)."""
    kind, args = spec.split(":", 1)
    if kind == "pcap":
        return f"net_pcap{i},rx_pcap={args.removeprefix('rx=')}"
    return f"net_virtio_user{i},{args},queues=1"


def run_inline(workdir: Path, ports: tuple[str, str]) -> dict:
    """sluice-gen's inline VNF on PORTS, beside a null port it neither sends to nor hears."""
    out = workdir / "inline.json"
    r = subprocess.run([str(GEN), "--cpu", "0", "--role", "rx", "--port", "null",
                        "--vnf-in", ports[0], "--vnf-out", ports[1], "--duration", "2",
                        "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text())["vnfs"][0]


def run_l2fwd(workdir: Path, ports: tuple[str, str], cap: Path, n: int) -> None:
    """DPDK's l2fwd (MAC updating on, its default) on PORTS until the capture has N frames."""
    log, prefix = workdir / "l2fwd.log", "vnfl2fwd"
    cmd = ["stdbuf", "-oL", str(examples.path(REPO, "l2fwd")), "--lcores", "0@0", "--no-pci",
           "--in-memory", "--single-file-segments", "--file-prefix", prefix,
           "--vdev", vdev(0, ports[0]), "--vdev", vdev(1, ports[1]),
           "--", "-p", "0x3", "-q", "2", "-T", "0"]
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: "entering main loop" in log.read_text(errors="replace"), timeout=30)
        wait_for(lambda: len(read_pcap(cap)) >= n, timeout=15)
    finally:
        assert stop_process(proc, timeout=15) == 0, log.read_text(errors="replace")
        remove_hugepage_files(prefix)


@pytest.mark.parametrize("direction", ["in_to_out", "out_to_in"])
def test_inline_vnf_and_l2fwd_emit_the_same_frames(workdir: Path, built: None,
                                                    direction: str) -> None:
    """The same N frames (sizes 60..1514) through sluice-gen's inline VNF and through DPDK's
    l2fwd, each VNF reading them from a pcap file on one port and sending them out of a
    virtio-user port with a fixed MAC into a capturing vhost-user server: the captures are
    equal byte for byte, and each frame is its input with the destination MAC set to
    02:00:00:00:00:0P (P: the output port) and the source to the output port's MAC."""
    n = 120
    frames = known_frames(n)
    pcap_in = workdir / "in.pcap"
    write_pcap(pcap_in, frames)
    got: dict[str, list[bytes]] = {}
    with capture(workdir, "inl") as (sock, cap):
        vnf = run_inline(workdir, vnf_ports(pcap_in, sock, direction))
        wait_for(lambda: len(read_pcap(cap)) >= n, timeout=15)
    got["inline"] = read_pcap(cap)
    assert vnf[direction]["rx"] == n and vnf[direction]["tx"] == n, vnf
    with capture(workdir, "l2f") as (sock, cap):
        run_l2fwd(workdir, vnf_ports(pcap_in, sock, direction), cap, n)
    got["l2fwd"] = read_pcap(cap)
    assert len(got["inline"]) == len(got["l2fwd"]) == n, {k: len(v) for k, v in got.items()}
    out_port = 1 if direction == "in_to_out" else 0
    dst, src = bytes([2, 0, 0, 0, 0, out_port]), bytes([2, 0x5E, 0, 0, 0, out_port])
    for i, (a, b, sent) in enumerate(zip(got["inline"], got["l2fwd"], frames, strict=True)):
        assert a == b, f"frame {i} differs: inline {a[:20].hex()} l2fwd {b[:20].hex()}"
        assert a == dst + src + sent[12:], f"frame {i}: {a[:14].hex()}"


# -- basicfwd as a switch ----------------------------------------------------------------------

def test_basicfwd_forwards_v2v_and_p2p_against_testpmd(tmp_path: Path, built: None) -> None:
    """basicfwd alternated with testpmd in v2v (vhost-user) and p2p memif: both forward,
    nothing shares a CPU, and the ratio rows are there."""
    out = tmp_path / "basicfwd"
    r = bench("run", "--scenario", "v2v,p2p", "--phy", "memif", "--switch",
              "basicfwd,testpmd", "--sizes", "64", "--duration", "4", "--trials", "1",
              "--warmup", "0", "--out", str(out), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert {(x["scenario"], x["key"]) for x in got} == {
        (s, k) for s in ("v2v", "p2p") for k in ("basicfwd:fwd", "testpmd:io")}, got
    for x in got:
        assert x["rx_pps"] > 0 and not x["oversubscribed"], x
        assert x["method"] == "alternating", x
    assert any(x["key"] == "basicfwd:fwd" and x["ratio_median"] for x in got), got
    assert "basicfwd" in json.dumps(json.loads((out / "manifest.json").read_text()))
    assert_cleaned_up(out)
