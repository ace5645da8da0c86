"""sluice-gen --sink-port: one sender, N receive-only ports, through a real learning bridge.

The generator sends broadcast frames into one vhost-user port of a sluiced learn-mode switch,
which floods each to the other ports; sluice-gen's --sink-port ports count the copies each
receives. At a modest rate every sink should see every frame, and the generator's counters,
its per-second records and the switch's own must agree.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import REPO, Daemon, assert_accounting

GEN = REPO / "build" / "tools" / "gen" / "sluice-gen"
BROADCAST = "ff:ff:ff:ff:ff:ff"


def learn_bridge(d: Daemon, workdir: Path, sinks: int) -> tuple[str, list[str]]:
    """A learn-mode switch with a sender port and SINKS sink ports (vhost-user servers);
    the generator's virtio-user specs for them."""
    d.call("add-switch", name="br0", mode="learn")
    names = ["tx"] + [f"s{i}" for i in range(sinks)]
    for n in names:
        d.call("add-port", switch="br0", name=n,
               spec=f"vhost-user:server,path={workdir}/f{n}.sock")
    specs = [f"virtio-user:path={workdir}/f{n}.sock" for n in names]
    return specs[0], specs[1:]


def run(workdir: Path, args: list[str]) -> tuple[dict, list[dict]]:
    """sluice-gen with ARGS, paced but closed loop (a frame the sender's ring refuses is
    offered again, so every frame counted as sent was taken and should arrive N times)."""
    out = workdir / "fanout.json"
    r = subprocess.run([str(GEN), "--cpu", "0", *args, "--load", "closed", "--json", "--out",
                        str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    seconds = [json.loads(line) for line in r.stdout.splitlines()
               if line.startswith("{") and "monotonic_s" in line]
    return json.loads(out.read_text()), seconds


def test_two_sinks_each_get_every_flooded_frame(daemon: Daemon, workdir: Path) -> None:
    tx, sinks = learn_bridge(daemon, workdir, 2)
    res, seconds = run(workdir, ["--port", tx, "--sink-port", sinks[0], "--sink-port",
                                 sinks[1], "--dst-mac", BROADCAST, "--rate", "100k",
                                 "--size", "64", "--duration", "3", "--warmup", "0.5"])
    fan = res["fanout"]
    sent = res["tx_packets"]
    assert sent > 200_000, res
    assert fan["sinks"] == 2 and fan["tx_packets"] == sent
    assert fan["expected_copies"] == 2 * sent
    per = fan["per_sink"]
    assert [p["port"] for p in per] == sinks
    for p in per:
        # Nearly every frame of the measured interval arrived once at each sink, in order (a
        # busy shared CPU may cost the switch a burst now and then), and what a sink lacks
        # is its loss, exactly.
        assert p["rx_packets"] >= 0.999 * sent, per
        assert p["rx_packets"] + p["lost"] == sent, per
        assert p["duplicated"] == 0 and p["reordered"] == 0, per
        assert p["delivered_fraction"] == p["rx_packets"] / sent
    assert fan["rx_copies"] == res["rx_packets"] == sum(p["rx_packets"] for p in per)
    lost = sum(p["lost"] for p in per)
    assert res["lost"] == res["lost_in_flight"] == lost
    assert fan["delivered"] == fan["rx_copies"] == 2 * sent - lost
    assert fan["delivered_fraction"] == (2 * sent - lost) / (2 * sent)
    assert res["not_accepted"] == 0
    assert abs(res["lost_in_flight_fraction"] - lost / (2 * sent)) < 1e-12
    assert res["loss_fraction"] == res["lost_in_flight_fraction"]
    # rx_pps counts copies: about twice the frame rate.
    assert abs(res["rx_pps"] - 2 * res["tx_pps"]) <= 0.001 * res["rx_pps"] + 1
    assert abs(fan["copies_pps"] - res["rx_pps"]) < 1.0
    assert abs(fan["frames_pps"] - 100_000) / 100_000 < 0.05, fan
    stream = res["streams"][0]
    assert stream["rx_packets"] == 2 * sent - lost and stream["lost"] == lost
    # The per-second records count copies per sink, and rx is their sum.
    last = seconds[-1]
    assert len(last["sink_rx_packets"]) == 2
    assert last["rx_packets"] == sum(last["sink_rx_packets"])
    # The switch saw each frame once on its input and sent a copy out of each sink port (the
    # whole run: warm-up included), nothing else.
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    total = stats["tx"]["rx_packets"]
    assert total >= sent
    for n in ("s0", "s1"):
        assert 0.999 * total <= stats[n]["tx_packets"] <= total, stats
        assert stats[n]["rx_packets"] == 0


def test_a_sink_that_gets_nothing_counts_every_copy_lost(daemon: Daemon,
                                                          workdir: Path) -> None:
    # A sink port on a switch of its own (patched to nothing) receives none of the flood:
    # its copies are lost, the delivered fraction is that of one sink in two.
    tx, sinks = learn_bridge(daemon, workdir, 1)
    daemon.call("add-switch", name="lone", mode="learn")
    daemon.call("add-port", switch="lone", name="x",
                spec=f"vhost-user:server,path={workdir}/lone.sock")
    res, _ = run(workdir, ["--port", tx, "--sink-port", sinks[0], "--sink-port",
                           f"virtio-user:path={workdir}/lone.sock", "--dst-mac", BROADCAST,
                           "--rate", "50k", "--duration", "2", "--warmup", "0.5"])
    fan = res["fanout"]
    sent = fan["tx_packets"]
    got, lone = fan["per_sink"]
    assert got["rx_packets"] >= 0.999 * sent and got["rx_packets"] + got["lost"] == sent
    assert lone["rx_packets"] == 0 and lone["lost"] == sent
    assert res["lost"] == res["lost_in_flight"] == sent + got["lost"]
    share = got["rx_packets"] / (2 * sent)           # about a half
    assert abs(fan["delivered_fraction"] - share) < 1e-9 and 0.4995 <= share <= 0.5
    assert abs(res["lost_in_flight_fraction"] - (1 - share)) < 1e-9
    assert res["loss_fraction"] == res["lost_in_flight_fraction"]


def test_sink_port_option_checks() -> None:
    spec = "virtio-user:path=/tmp/none.sock"
    for args, words in (
            (["--port", spec, "--port", spec, "--sink-port", spec], "exactly one --port"),
            (["--port", spec, "--role", "rx", "--sink-port", spec], "--role txrx"),
            (["--port", spec, "--bidir", "--sink-port", spec], "not --bidir"),
            (["--port", spec, "--sink-port", "bogus:x=1"], "--sink-port bogus:x=1")):
        r = subprocess.run([str(GEN), *args], capture_output=True, text=True, timeout=20)
        assert r.returncode == 2, (args, r.stderr)
        assert words in r.stderr, (args, r.stderr)
    r = subprocess.run([str(GEN), "--port", spec, *["--sink-port", spec] * 17],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "at most 16 sink ports" in r.stderr
