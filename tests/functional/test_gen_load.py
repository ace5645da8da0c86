"""sluice-gen's load models and the container study's echo test, over real memif ports:
open loop counts what a port refuses as not accepted while closed loop offers it again;
--role ping measures round trips through a reflector (another process, or a port of its
own); --touch reads every received byte; --size csv:FILE sends the weighted mix."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from gen_helpers import GEN, assert_no_hugepage_files, gen_cmd, memif_pair, run_gen

from conftest import Daemon, stop_process, wait_for

# What the loop cannot reach: every pass then sends a whole burst.
FLOOD = ["--rate", "100Mpps", "--burst", "512"]


def memif(workdir: Path, name: str, role: str) -> str:
    return f"memif:role={role},socket={workdir / name}.sock"


def start_peer(workdir: Path, name: str, args: list[str], cpu: int) -> subprocess.Popen[bytes]:
    """A sluice-gen with the memif server NAME; returns once its socket listens."""
    proc = subprocess.Popen(gen_cmd([*args, "--port", memif(workdir, name, "server")], cpu=cpu),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (workdir / f"{name}.sock").exists() or proc.poll() is not None)
    except AssertionError:
        stop_process(proc)
        raise
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    return proc


def other_cpu() -> int:
    """A CPU for the peer process: another than the generator's CPU 0 where there is one."""
    cpus = sorted(os.sched_getaffinity(0))
    return next((c for c in cpus if c != 0), cpus[0])


def loss_adds_up(res: dict) -> None:
    """offered = accepted + not accepted; accepted = received + lost in flight."""
    seconds = res["duration_s"]
    offered, accepted = res["offered_pps"] * seconds, res["accepted_pps"] * seconds
    assert offered == pytest.approx(accepted + res["not_accepted"], abs=2), res
    assert res["tx_packets"] == pytest.approx(accepted, abs=2)
    assert res["tx_packets"] == res["rx_packets"] + res["lost_in_flight"], res
    assert res["lost_in_flight"] == res["lost"]
    assert res["loss_fraction"] == pytest.approx(
        res["not_accepted_fraction"] + res["lost_in_flight_fraction"], abs=1e-12)
    assert res["tx_pps"] == res["accepted_pps"]


def test_open_loop_counts_refusals_closed_loop_retries(workdir: Path) -> None:
    """Bursts of 512 into a memif whose sink, in the same loop, takes 32 a pass: the ring
    fills every pass whatever the machine's speed, so the port refuses for certain."""
    opened, _ = run_gen(workdir, [*memif_pair(workdir, "o"), *FLOOD, "--load", "open",
                                  "--duration", "1.5", "--warmup", "0.2"], name="open.json")
    assert opened["load"] == "open" and opened["burst"] == 512
    assert opened["asked_pps"] == 100e6
    assert opened["not_accepted"] > 0 and opened["retried"] == 0, opened
    assert opened["offered_pps"] > opened["accepted_pps"] > 0
    assert opened["not_accepted_fraction"] > 0.1
    assert opened["lost_in_flight"] == 0          # a memif in one process loses nothing taken
    assert opened["streams"][0]["not_accepted"] == opened["not_accepted"]
    loss_adds_up(opened)

    closed, _ = run_gen(workdir, [*memif_pair(workdir, "c"), *FLOOD, "--load", "closed",
                                  "--duration", "1.5", "--warmup", "0.2"], name="closed.json")
    assert closed["load"] == "closed"
    assert closed["not_accepted"] == 0 and closed["not_accepted_fraction"] == 0
    assert closed["retried"] > 0                  # the port did refuse; it was offered again
    assert closed["offered_pps"] == closed["accepted_pps"] > 0
    assert closed["rx_packets"] == closed["tx_packets"] and closed["lost"] == 0
    assert closed["loss_fraction"] == 0
    assert closed["reordered"] == closed["duplicated"] == 0
    loss_adds_up(closed)


def test_open_loop_into_a_sink_that_shares_the_cpu(workdir: Path) -> None:
    """A sink in another process pinned to the generator's CPU gets the CPU a few
    milliseconds at a time (PLATFORM.md); meanwhile its ring fills: at 5 Mpps a scheduler
    slice holds several rings' worth. Open loop loses those frames as not accepted; closed
    loop, at the same asked rate, waits for the sink and loses none."""
    for load in ("open", "closed"):
        sink_out = workdir / f"sink-{load}.json"
        sink = start_peer(workdir, load, ["--role", "rx", "--duration", "6",
                                          "--out", str(sink_out)], cpu=0)
        try:
            res, _ = run_gen(workdir, ["--role", "tx", "--port", memif(workdir, load, "client"),
                                       "--rate", "5Mpps", "--load", load, "--duration", "2",
                                       "--warmup", "0.3"], name=f"{load}.json")
        finally:
            stop_process(sink, timeout=15)
        if load == "open":
            assert res["not_accepted"] > 0, res
            assert res["offered_pps"] > res["accepted_pps"]
            assert res["offered_pps"] == pytest.approx(5e6, rel=0.2)
        else:
            assert res["not_accepted"] == 0 and res["retried"] > 0, res
            assert res["offered_pps"] == res["accepted_pps"]
    assert_no_hugepage_files()


def test_default_load_follows_the_rate(workdir: Path) -> None:
    for rate, load, asked in (("max", "closed", None), ("200k", "open", 200e3)):
        res, _ = run_gen(workdir, ["--role", "tx", "--port", "null", "--rate", rate,
                                   "--duration", "0.3"])
        assert res["load"] == load and res["asked_pps"] == asked
        assert res["options"]["load"] == "default"
        assert res["offered_pps"] == res["accepted_pps"]     # null takes everything


def test_burst_paces_per_burst(workdir: Path) -> None:
    """At 100 kpps in bursts of 100, a burst leaves every millisecond: 1000 a second."""
    res, r = run_gen(workdir, ["--role", "tx", "--port", "null", "--rate", "100k",
                               "--burst", "100", "--duration", "1", "--json"])
    assert res["burst"] == 100
    assert res["tx_packets"] % 100 == 0
    assert res["tx_packets"] == pytest.approx(100_000, rel=0.05)
    seconds = [json.loads(line) for line in r.stdout.splitlines()
               if line.startswith("{") and "monotonic_s" in line]
    assert seconds and all(s["load"] == "open" and "offered_pps" in s and
                           "accepted_pps" in s and s["not_accepted"] == 0 for s in seconds)


@pytest.mark.parametrize("args,what", [
    (["--burst", "0"], "--burst"), (["--burst", "513"], "--burst"),
    (["--load", "half"], "--load"), (["--size", "csv:/nonexistent.csv"], "nonexistent.csv"),
])
def test_bad_options(args: list[str], what: str) -> None:
    r = subprocess.run([str(GEN), "--port", "null", *args], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and what in r.stderr, r.stderr


@pytest.mark.parametrize("burst", [4, 32])
def test_ping_against_a_reflector_process(workdir: Path, burst: int) -> None:
    """The echo test of the container study: timestamped bursts at 1000 pps, sent back by a
    reflector in another process, whose payload (stream, sequence, timestamp) comes back
    intact: every frame is recognised, none lost, each round trip plausible."""
    refl_out = workdir / "reflect.json"
    refl = start_peer(workdir, "p", ["--role", "reflect", "--duration", "6",
                                     "--out", str(refl_out)], cpu=other_cpu())
    try:
        res, _ = run_gen(workdir, ["--role", "ping", "--burst", str(burst), "--port",
                                   memif(workdir, "p", "client"), "--duration", "2",
                                   "--warmup", "0.2"])
    finally:
        stop_process(refl, timeout=15)
    assert res["role"] == "ping" and res["burst"] == burst
    assert res["asked_pps"] == 1000 and res["load"] == "open"
    rtt = res["rtt_ns"]
    assert rtt["count"] > 0 and rtt["count"] == res["rx_packets"] == res["tx_packets"], res
    assert res["tx_packets"] % burst == 0
    assert res["lost"] == 0 and res["foreign"] == 0 and res["duplicated"] == 0
    assert 0 < rtt["mean"] < 1e9 and rtt["p50"] <= rtt["p99"] <= rtt["p999"] <= rtt["max"]
    assert set(rtt) == {"mean", "stdev", "p50", "p99", "p999", "max", "count"}
    assert res["offered_pps"] == pytest.approx(1000, rel=0.1)
    if refl_out.exists():                         # written when the reflector ends
        assert json.loads(refl_out.read_text())["reflect"]["sent"] >= res["tx_packets"]


def test_ping_through_a_reflecting_port_of_its_own(workdir: Path) -> None:
    hist = workdir / "rtt.csv"
    res, _ = run_gen(workdir, ["--role", "ping", "--burst", "8", "--rate", "4000pps",
                               "--port", memif(workdir, "q", "client"),
                               "--reflect", memif(workdir, "q", "server"),
                               "--duration", "1", "--hist-out", str(hist)])
    assert res["rtt_ns"]["count"] == res["tx_packets"] > 3000
    assert res["reflect"]["sent"] == res["tx_packets"] and res["lost"] == 0
    rows = [line.split(",") for line in hist.read_text().splitlines()[1:]]   # a header
    assert sum(int(r[2]) for r in rows) == res["rtt_ns"]["count"]


@pytest.mark.parametrize("size", [128, 512])
def test_touch_reads_every_received_byte(workdir: Path, size: int) -> None:
    res, _ = run_gen(workdir, [*memif_pair(workdir, "t"), "--touch", "--size", str(size),
                               "--rate", "200k", "--duration", "1"])
    touch = res["touch"]
    # No warm-up or cool-down: every frame received is a measured one.
    assert touch["frames"] == res["rx_packets"] > 150_000
    assert touch["bytes"] == (size - 4) * touch["frames"]        # the buffer has no FCS
    assert len(touch["checksum"]) == 16 and int(touch["checksum"], 16) != 0
    assert res["rx_sizes"] == {str(size): res["rx_packets"]}
    assert res["options"]["touch"] is True
    # L2 counts the frame, L1 adds 20 B of preamble, delimiter and gap.
    assert res["rx_gbps_l2"] == pytest.approx(res["rx_pps"] * size * 8 / 1e9, rel=1e-9)
    assert res["rx_gbps_l1"] == pytest.approx(res["rx_pps"] * (size + 20) * 8 / 1e9,
                                              rel=1e-9)
    assert res["tx_gbps_l1"] == pytest.approx(res["tx_pps"] * (size + 20) * 8 / 1e9,
                                              rel=1e-9)


def test_touch_on_a_reflector(workdir: Path) -> None:
    res, _ = run_gen(workdir, ["--role", "ping", "--burst", "4", "--rate", "20k", "--touch",
                               "--port", memif(workdir, "r", "client"),
                               "--reflect", memif(workdir, "r", "server"), "--size", "64",
                               "--duration", "0.5"])
    # The reflector and the ping port both read what they receive.
    reflected = res["reflect"]["sent"] + res["reflect"]["refused"]
    assert res["touch"]["frames"] == reflected + res["rx_packets"]
    assert res["touch"]["bytes"] == 60 * res["touch"]["frames"]


def test_size_distribution_from_csv(workdir: Path) -> None:
    csv = workdir / "sizes.csv"
    csv.write_text("# a mix of three sizes\nsize,weight\n64,6\n"
                   "128, 3   # middle\n\n1518,1\n")
    res, _ = run_gen(workdir, [*memif_pair(workdir, "s"), "--size", f"csv:{csv}",
                               "--rate", "300k", "--duration", "1"])
    seen = {int(k): v for k, v in res["rx_sizes"].items()}
    total = sum(seen.values())
    assert total == res["rx_packets"] > 250_000 and set(seen) == {64, 128, 1518}
    for size, weight in ((64, 6), (128, 3), (1518, 1)):
        assert seen[size] / total == pytest.approx(weight / 10, abs=0.01), seen
    assert res["mean_frame_bytes"] == pytest.approx((6 * 64 + 3 * 128 + 1518) / 10)


def test_bad_csv_names_the_line(workdir: Path) -> None:
    csv = workdir / "bad.csv"
    csv.write_text("64,1\n70000,2\n")
    r = subprocess.run([str(GEN), "--port", "null", "--size", f"csv:{csv}"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert f"{csv}:2: size '70000'" in r.stderr, r.stderr


def test_ping_through_the_switch(daemon: Daemon, workdir: Path) -> None:
    """The echo set-up of the container study: ping and reflector on a switch's two
    vhost-user ports (patched), served here by one loop; every frame comes back."""
    daemon.call("add-switch", name="br0")
    for p in ("ping", "echo"):
        daemon.call("add-port", switch="br0", name=p,
                    spec=f"vhost-user:server,path={workdir}/{p}.sock")
    daemon.call("patch", switch="br0", port1="ping", port2="echo")
    res, _ = run_gen(workdir, ["--role", "ping", "--burst", "16", "--size", "512",
                               "--port", f"virtio-user:path={workdir}/ping.sock",
                               "--reflect", f"virtio-user:path={workdir}/echo.sock",
                               "--duration", "1.5", "--warmup", "0.2"])
    assert res["rtt_ns"]["count"] == res["rx_packets"] == res["tx_packets"] > 1000, res
    assert res["lost"] == 0 and res["foreign"] == 0
    assert res["rx_sizes"] == {"512": res["rx_packets"]}
    stats = daemon.port_stats("br0")
    assert stats["ping"]["rx_packets"] >= res["tx_packets"]
    assert stats["echo"]["rx_packets"] >= res["tx_packets"]
