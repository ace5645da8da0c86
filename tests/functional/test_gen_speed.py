"""sluice-gen's fast paths (docs/gen.md, SPEED): prebuilt and reference-counted frames, the
sink that counts without reading (--check none), and that each still counts every frame: the
generator's accepted frames equal what the switch and the sink see."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from gen_helpers import GEN, memif_pair, run_gen, vhost_patch
from scapy.all import IP, UDP, rdpcap  # type: ignore

from conftest import Daemon

MAGIC = 0x51CE


def port_totals(res: dict) -> tuple[list[int], list[int]]:
    """Each --port's ethdev tx and rx over the whole run."""
    return [p["tx"] for p in res["port_stats"]], [p["rx"] for p in res["port_stats"]]


@pytest.mark.parametrize("frames", ["prebuilt", "refcnt", "copy"])
def test_count_only_sink_loses_nothing_silently(workdir: Path, frames: str) -> None:
    res, _ = run_gen(workdir, [*memif_pair(workdir, f"c{frames}"), "--bidir", "--rate", "1Mpps",
                               "--check", "none", "--tx-frames", frames, "--duration", "1.5",
                               "--warmup", "0.3"])
    assert res["tx_frames"] == frames
    assert res["checked"] == {"seq": False, "latency": False}
    tx, rx = port_totals(res)
    # Whole-run loss: what each port accepted less what its peer received.
    assert tx[0] == rx[1] and tx[1] == rx[0] and res["lost"] == 0, res["port_stats"]
    assert res["tx_packets"] > 1_000_000       # 2 x 1.2 s at 1 Mpps, less a busy machine's share
    # Unstamped frames count by arrival time: the interval's rx is within a burst or two.
    assert abs(res["rx_packets"] - res["tx_packets"]) <= 4 * 32
    assert res["latency_ns"]["count"] == 0 and res["duplicated"] == 0
    assert res["rx_sizes"] == {"64": res["rx_packets"]}
    assert 0 < res["busy_fraction"] <= 1 and res["busy_cycles_per_frame"] > 0


@pytest.mark.parametrize("check", ["all", "seq", "latency"])
def test_prebuilt_frames_keep_their_stamps(workdir: Path, check: str) -> None:
    """Prebuilt buffers come back and go out again: sequence numbers and timestamps are
    still each frame's own (no gaps, no duplicates), and loss still per interval."""
    res, _ = run_gen(workdir, [*memif_pair(workdir, f"s{check}"), "--rate", "2Mpps",
                               "--check", check, "--flows", "5", "--duration", "1.5",
                               "--warmup", "0.3", "--rx-burst", "64"])
    assert res["tx_frames"] == "prebuilt" and res["options"]["rx_burst"] == 64
    assert res["rx_packets"] == res["tx_packets"] > 2_000_000 and res["lost"] == 0
    assert res["duplicated"] == 0 and res["reordered"] == 0 and res["foreign"] == 0
    assert (res["latency_ns"]["count"] > 0) == (check != "seq")


@pytest.mark.parametrize("check", ["all", "none"])
def test_prebuilt_frames_on_the_wire(workdir: Path, check: str) -> None:
    """What leaves a prebuilt stream, read back from a pcap: every flow's 5-tuple, our
    payload, and a sequence number per frame only when stamped."""
    out = workdir / f"wire-{check}.pcap"
    res, _ = run_gen(workdir, ["--role", "tx", "--port", f"pcap:tx={out}", "--rate", "20k",
                               "--flows", "3", "--vary", "ip", "--check", check,
                               "--duration", "0.5"])
    assert res["tx_frames"] == "prebuilt"
    frames = rdpcap(str(out))
    assert len(frames) == res["port_stats"][0]["tx"] > 100
    seqs = []
    for k, f in enumerate(frames):
        assert len(f) == 60 and f[IP].src == f"10.0.0.{1 + k % 3}" and f[UDP].dport == 1024
        magic, stream, _flags, seq = struct.unpack("<HBBI", bytes(f[UDP].payload)[:8])
        assert magic == MAGIC and stream == 0
        seqs.append(seq)
    assert seqs == (list(range(len(frames))) if check == "all" else [0] * len(frames))


def test_count_only_through_the_switch(daemon: Daemon, workdir: Path) -> None:
    """Nothing lost silently: the generator's accepted frames are what the switch received,
    and what the switch sent is what the count-only sink counted."""
    vhost_patch(daemon, workdir, ("in", "out"), ("qin", "qout"))
    res, _ = run_gen(workdir, ["--port", f"virtio-user:path={workdir}/qin.sock",
                               "--port", f"virtio-user:path={workdir}/qout.sock",
                               "--rate", "200k", "--check", "none", "--duration", "2"])
    stats = daemon.port_stats("br0")
    tx, rx = port_totals(res)
    assert tx[0] > 100_000       # 200 kpps for 2 s, less what a busy machine takes
    assert stats["in"]["rx_packets"] == tx[0]
    assert stats["out"]["tx_packets"] == rx[1]
    assert res["lost"] == tx[0] - rx[1], (res["lost"], stats)


@pytest.mark.parametrize("vargs", ["mrg_rxbuf=0", "mrg_rxbuf=0,in_order=0,vectorized=1"])
def test_virtio_args_keep_every_check(daemon: Daemon, workdir: Path, vargs: str) -> None:
    """--virtio-args changes our side of the virtqueues, not the frames: through sluiced's
    patch both ways, stamped frames all arrive, once each and in order, with latencies, and
    the switch's counts match the generator's."""
    vhost_patch(daemon, workdir, ("in", "out"), ("win", "wout"))
    # 1024-slot virtqueues: the vector path keeps up to 63 of its slots unposted, and a
    # busy machine can stop the loop for a millisecond (the switch then drops, not we).
    res, _ = run_gen(workdir, ["--port", f"virtio-user:path={workdir}/win.sock",
                               "--port", f"virtio-user:path={workdir}/wout.sock", "--bidir",
                               "--rate", "100k", "--ring", "1024", "--virtio-args", vargs,
                               "--duration", "2", "--warmup", "0.5"])
    assert res["options"]["virtio_args"] == vargs and res["tx_frames"] == "prebuilt"
    stats = daemon.port_stats("br0")
    tx, rx = port_totals(res)
    assert res["rx_packets"] == res["tx_packets"] > 200_000 and res["lost"] == 0, (
        tx, rx, stats, res["streams"])
    assert res["duplicated"] == 0 and res["reordered"] == 0 and res["foreign"] == 0
    assert res["latency_ns"]["count"] == res["rx_packets"]
    assert stats["in"]["rx_packets"] == tx[0] == rx[1] == stats["out"]["tx_packets"]
    assert stats["out"]["rx_packets"] == tx[1] == rx[0] == stats["in"]["tx_packets"]


@pytest.mark.parametrize("args,what,code", [
    (["--check", "none", "--role", "ping"], "latency", 2),
    (["--check", "sometimes"], "--check", 2),
    (["--tx-frames", "magic"], "--tx-frames", 2),
    (["--rx-burst", "0"], "--rx-burst", 2),
    (["--virtio-args", "queue_size=64"], "--virtio-args", 2),
    (["--virtio-args", "in_order=2"], "--virtio-args", 2),
    (["--virtio-args", "in_order=0,in_order=1"], "--virtio-args", 2),
    (["--virtio-args", "vectorized=1", "--rx-burst", "4"], "--rx-burst", 2),
    (["--virtio-args", "vectorized=1", "--rx-burst", "64"], "--rx-burst", 2),
    (["--tx-frames", "refcnt"], "constant frames", 1),
    (["--tx-frames", "prebuilt", "--size", "64,128"], "one --size", 1),
])
def test_bad_speed_options(args: list[str], what: str, code: int) -> None:
    r = subprocess.run([str(GEN), "--port", "null", "--duration", "0.2", *args],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == code and what in r.stderr, r.stderr


def test_alternate_needs_stamps(workdir: Path) -> None:
    r = subprocess.run([str(GEN), *memif_pair(workdir, "a1"), *memif_pair(workdir, "a2"),
                        "--alternate", "4242,4343", "--check", "none"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 2 and "--alternate" in r.stderr, r.stderr
