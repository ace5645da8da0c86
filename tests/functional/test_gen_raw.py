"""sluice-gen's virtio-raw ports (docs/gen.md, "virtio-raw ports"): its own virtio-net driver
on a switch's vhost-user server socket, or with server=1 on a socket of its own that the
switch's vhost-user client port connects to. Every frame is accounted for against the switch's
own counters, the checks still find each frame once and in order, and a backend that is
missing or goes away ends the run with a clear message instead of a hang."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gen_helpers import GEN, gen_cmd, run_gen, vhost_patch
from scapy.all import rdpcap, wrpcap  # type: ignore

from conftest import (
    Daemon,
    assert_accounting,
    links,
    remove_hugepage_files,
    stop_process,
    wait_for,
)


def raw(path: Path) -> str:
    return f"virtio-raw:path={path}"


def port_totals(res: dict) -> tuple[list[int], list[int]]:
    return [p["tx"] for p in res["port_stats"]], [p["rx"] for p in res["port_stats"]]



def test_handshake_brings_the_link_up(daemon: Daemon, workdir: Path) -> None:
    """sluiced's vhost-user port sees our driver as a device: link up while we run, down
    once we are gone."""
    qin, _ = vhost_patch(daemon, workdir, ("in", "out"), ("hin", "hout"))
    assert links(daemon)["in"] == "down"
    proc = subprocess.Popen(gen_cmd(["--role", "rx", "--port", raw(qin), "--duration", "3"]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: links(daemon)["in"] == "up", timeout=10)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    wait_for(lambda: links(daemon)["in"] == "down", timeout=10)


@pytest.mark.parametrize("check", ["all", "none"])
def test_through_sluiced_both_ways_counts_every_frame(daemon: Daemon, workdir: Path,
                                                      check: str) -> None:
    """Both ends virtio-raw through sluiced's patch: what each port sent is what the switch
    received, what the switch sent is what the other port received; stamped frames arrive
    once each, in order, with a latency each."""
    qin, qout = vhost_patch(daemon, workdir, ("in", "out"), (f"a{check}", f"b{check}"))
    res, _ = run_gen(workdir, ["--port", raw(qin), "--port", raw(qout), "--bidir",
                               "--rate", "200k", "--check", check, "--duration", "2",
                               "--warmup", "0.5"])
    stats = daemon.port_stats("br0")
    tx, rx = port_totals(res)
    assert_accounting(stats)
    assert stats["in"]["rx_packets"] == tx[0] > 300_000 and stats["out"]["tx_packets"] == rx[1]
    assert stats["out"]["rx_packets"] == tx[1] > 300_000 and stats["in"]["tx_packets"] == rx[0]
    assert tx == [rx[1], rx[0]], (tx, rx, stats)      # a moderate rate: nothing dropped
    assert res["lost"] == 0 and res["foreign"] == 0 and res["stray"] == 0
    assert res["tx_frames"] == "prebuilt" and res["backend_closed"] is False
    assert res["rx_sizes"] == {"64": res["rx_packets"]}
    if check == "all":
        assert res["rx_packets"] == res["tx_packets"] > 200_000
        assert res["duplicated"] == 0 and res["reordered"] == 0
        assert res["latency_ns"]["count"] == res["rx_packets"]
        assert 0 < res["latency_ns"]["p50"] < 10_000_000
    else:
        assert res["latency_ns"]["count"] == 0


def test_raw_sender_into_a_virtio_user_sink(daemon: Daemon, workdir: Path) -> None:
    """The two kinds mix in one loop: virtio-raw sends 1518 B frames with 3 flows, DPDK's
    virtio-user receives them, sequence-checked."""
    qin, qout = vhost_patch(daemon, workdir, ("in", "out"), ("min", "mout"))
    res, _ = run_gen(workdir, ["--port", raw(qin), "--port", f"virtio-user:path={qout}",
                               "--rate", "50k", "--size", "1518", "--flows", "3",
                               "--duration", "2", "--warmup", "0.5"])
    stats = daemon.port_stats("br0")
    tx, rx = port_totals(res)
    assert stats["in"]["rx_packets"] == tx[0] == rx[1] == stats["out"]["tx_packets"] > 50_000
    assert res["rx_packets"] == res["tx_packets"] and res["lost"] == 0
    assert res["duplicated"] == 0 and res["reordered"] == 0 and res["foreign"] == 0
    assert res["rx_sizes"] == {"1518": res["rx_packets"]}


def test_tx_and_rx_roles_in_two_processes(daemon: Daemon, workdir: Path) -> None:
    """--role tx and --role rx, each with a virtio-raw port: the sink finds the stream's
    sequence numbers without a gap."""
    qin, qout = vhost_patch(daemon, workdir, ("in", "out"), ("tin", "tout"))
    # Both on CPU 0, taking turns: rings of 4096 ride out the other's time slices.
    sink = subprocess.Popen(gen_cmd(["--role", "rx", "--port", f"{raw(qout)},queue_size=4096",
                                     "--duration", "5", "--out", str(workdir / "rx.json")]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        res, _ = run_gen(workdir, ["--role", "tx", "--port", raw(qin), "--rate", "50k",
                                   "--ring", "4096", "--duration", "2"], name="tx.json")
    finally:
        # The sender is done: the sink's --duration (5 s) is only a bound; stopped
        # (SIGINT), it still reads what is on its ring (200 ms) before it counts.
        if sink.poll() is None:
            sink.send_signal(signal.SIGINT)
        _, err = sink.communicate(timeout=30)
    assert sink.returncode == 0, err
    got = json.loads((workdir / "rx.json").read_text())
    stats = daemon.port_stats("br0")
    sent = res["port_stats"][0]["tx"]
    assert stats["in"]["rx_packets"] == sent > 50_000
    assert got["port_stats"][0]["rx"] == stats["out"]["tx_packets"] == sent
    assert got["rx_packets"] == sent and got["lost"] == 0 and got["reordered"] == 0


def test_announced_to_a_learning_switch(daemon: Daemon, workdir: Path) -> None:
    """--announce from virtio-raw ports (their MACs given with mac=): a learn-mode switch
    learns all four, and the run's two streams go unicast, none flooded to the other pair."""
    macs = {p: f"02:00:00:00:0b:0{i}" for i, p in enumerate("abcd")}
    daemon.call("add-switch", name="br0", mode="learn")
    for p in macs:
        daemon.call("add-port", switch="br0", name=p,
                    spec=f"vhost-user:server,path={workdir}/l{p}.sock")
    ports = [a for p, m in macs.items()
             for a in ("--port", f"{raw(workdir / f'l{p}.sock')},mac={m}")]
    res, _ = run_gen(workdir, [*ports, "--announce", "--rate", "50k", "--duration", "2"])
    # Each port's announcements flood to the 3 others (not yet learnt) and come back.
    assert res["announced"] == 4 * 3 and res["announce_echoes"] == 4 * 3 * 3, res
    assert res["rx_packets"] == res["tx_packets"] > 150_000 and res["lost"] == 0
    stats = daemon.port_stats("br0")
    assert stats["a"]["tx_packets"] == stats["c"]["tx_packets"] == 3 * 3, stats
    learnt = {e["mac"].lower(): e["port"] for e in
              daemon.call("fdb-show", switch="br0")["entries"]}
    assert learnt == {m: p for p, m in macs.items()}


def test_alternate_between_two_daemons(workdir: Path) -> None:
    """--alternate with four virtio-raw ports: windows switch A, B, A, ..., each with frames,
    and neither daemon is left stopped."""
    a = Daemon(workdir, "a").start()
    b = Daemon(workdir, "b").start()
    try:
        pa = vhost_patch(a, workdir, ("in", "out"), ("aa", "ab"))
        pb = vhost_patch(b, workdir, ("in", "out"), ("ba", "bb"))
        assert a.proc is not None and b.proc is not None
        res, _ = run_gen(workdir, [a for p in (*pa, *pb) for a in ("--port", raw(p))] + [
            "--alternate", f"{a.proc.pid},{b.proc.pid}", "--window", "0.5", "--settle", "0.1",
            "--duration", "3.2"])
        windows = res["windows"]
        assert len(windows) >= 5 and all(w["rx_pps"] > 0 for w in windows), windows
        assert [w["switch"] for w in windows][:4] == ["A", "B", "A", "B"]
        # A switch stopped with frames in its rings drops a few (virtio-user: more).
        assert res["lost"] < res["tx_packets"] / 1000 and res["backend_closed"] is False
        for d in (a, b):
            assert Path(f"/proc/{d.proc.pid}/stat").read_text().split()[2] != "T"
            assert d.call("version")
    finally:
        for d in (a, b):
            if d.proc is not None and d.proc.poll() is None:
                d.proc.send_signal(signal.SIGCONT)
        assert a.stop() == 0 and b.stop() == 0


@contextlib.contextmanager
def io_forwarder(workdir: Path) -> Iterator[list[Path]]:
    """dpdk-testpmd io-forwarding between two vhost-user server ports (CPU 1)."""
    socks = [workdir / "tp0.sock", workdir / "tp1.sock"]
    prefix = f"graw{time.monotonic_ns() % 10**9}"
    with open(workdir / "testpmd.log", "wb") as log:
        proc = subprocess.Popen(
            ["dpdk-testpmd", "--no-pci", "--lcores", "0@0,1@1", "--file-prefix", prefix,
             "--single-file-segments", "--log-level", "*:warning",
             "--vdev", f"net_vhost0,iface={socks[0]},queues=1",
             "--vdev", f"net_vhost1,iface={socks[1]},queues=1",
             "--", "--forward-mode=io", "--nb-cores", "1", "--stats-period", "60"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: all(s.exists() for s in socks), timeout=30)
        time.sleep(1)
        yield socks
    finally:
        stop_process(proc, signal.SIGINT)
        remove_hugepage_files(prefix)


def test_through_testpmd_io(workdir: Path) -> None:
    with io_forwarder(workdir) as (a, b):
        res, _ = run_gen(workdir, ["--port", raw(a), "--port", raw(b), "--bidir",
                                   "--rate", "200k", "--duration", "2", "--warmup", "0.5"])
    tx, rx = port_totals(res)
    assert tx == [rx[1], rx[0]] and tx[0] > 300_000, res["port_stats"]
    assert res["rx_packets"] == res["tx_packets"] and res["lost"] == 0
    assert res["duplicated"] == 0 and res["reordered"] == 0
    assert res["latency_ns"]["count"] == res["rx_packets"]


def test_backend_that_dies_ends_the_run(workdir: Path) -> None:
    """sluiced killed (SIGKILL) mid-run: sluice-gen stops within a second or so, says which
    port lost its backend and when, writes its summary and exits 1."""
    d = Daemon(workdir, "v").start()
    try:
        qin, qout = vhost_patch(d, workdir, ("in", "out"), ("kin", "kout"))
        out = workdir / "dead.json"
        proc = subprocess.Popen(gen_cmd(["--port", raw(qin), "--port", raw(qout), "--bidir",
                                         "--rate", "100k", "--duration", "30",
                                         "--out", str(out)]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)
        assert d.proc is not None
        d.proc.kill()
        start = time.monotonic()
        _, err = proc.communicate(timeout=20)
        assert time.monotonic() - start < 5
    finally:
        d.stop()
    assert proc.returncode == 1, err
    assert "the vhost-user backend closed the connection" in err and str(qin) in err, err
    res = json.loads(out.read_text())
    assert res["backend_closed"] is True and res["tx_packets"] > 100_000
    assert any(p["backend_closed"] for p in res["port_stats"])


def test_no_backend(workdir: Path) -> None:
    r = subprocess.run(gen_cmd(["--port", raw(workdir / "nobody.sock"), "--role", "tx",
                                "--duration", "1"]), capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert "cannot connect to vhost-user socket" in r.stderr and "no such file" in r.stderr


def test_silent_backend_times_out(workdir: Path) -> None:
    """A socket that accepts and never answers: the handshake gives up after 5 s."""
    path = workdir / "silent.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    try:
        start = time.monotonic()
        r = subprocess.run(gen_cmd(["--port", raw(path), "--role", "tx", "--duration", "1"]),
                           capture_output=True, text=True, timeout=30)
        assert time.monotonic() - start < 15
    finally:
        srv.close()
    assert r.returncode == 1 and "no answer in 5 s" in r.stderr, r.stderr


def stale_socket(path: Path) -> None:
    """A socket file nobody listens on, as a process that died leaves behind."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()


def test_server_for_a_vhost_user_client_port(daemon: Daemon, workdir: Path) -> None:
    """virtio-raw server=1 on the socket of a sluiced vhost-user client port (which
    connects to it, as OVS-DPDK's dpdkvhostuserclient ports do) beside a virtio-raw client
    on a server port, through patch: every frame counted on both sides, both ways. A stale
    socket file at the server's path is replaced; the server's file is gone once the
    backend is connected."""
    qin, qout = workdir / "cin.sock", workdir / "cout.sock"
    stale_socket(qin)
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="in", spec=f"vhost-user:client,path={qin}")
    daemon.call("add-port", switch="br0", name="out", spec=f"vhost-user:server,path={qout}")
    daemon.call("patch", switch="br0", port1="in", port2="out")
    res, r = run_gen(workdir, ["--port", f"{raw(qin)},server=1", "--port", raw(qout),
                               "--bidir", "--rate", "200k", "--duration", "2",
                               "--warmup", "0.5"])
    assert "waiting up to 30 s for a vhost-user backend" in r.stderr, r.stderr
    stats = daemon.port_stats("br0")
    tx, rx = port_totals(res)
    assert_accounting(stats)
    assert stats["in"]["rx_packets"] == tx[0] > 300_000 and stats["out"]["tx_packets"] == rx[1]
    assert stats["out"]["rx_packets"] == tx[1] > 300_000 and stats["in"]["tx_packets"] == rx[0]
    assert tx == [rx[1], rx[0]], (tx, rx, stats)
    assert res["rx_packets"] == res["tx_packets"] and res["lost"] == 0
    assert res["duplicated"] == 0 and res["reordered"] == 0
    assert res["backend_closed"] is False
    assert not qin.exists()


def test_server_without_a_backend_times_out(workdir: Path) -> None:
    """Nobody connects: the wait ends after accept_timeout with a message naming the
    socket, exit 1, and the socket file is removed."""
    path = workdir / "lonely.sock"
    start = time.monotonic()
    r = subprocess.run(gen_cmd(["--port", f"{raw(path)},server=1,accept_timeout=2",
                                "--role", "tx", "--duration", "1"]),
                       capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 15
    assert r.returncode == 1, r.stderr
    assert f"no vhost-user backend connected to {path} in 2 s" in r.stderr, r.stderr
    assert not path.exists()


def test_server_refuses_a_regular_file(workdir: Path) -> None:
    path = workdir / "notasocket"
    path.write_text("keep me\n")
    r = subprocess.run(gen_cmd(["--port", f"{raw(path)},server=1", "--role", "tx",
                                "--duration", "1"]), capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert f"{path} exists and is not a socket" in r.stderr, r.stderr
    assert path.read_text() == "keep me\n"


def test_server_refuses_a_socket_in_use(workdir: Path) -> None:
    path = workdir / "busy.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(4)
    try:
        r = subprocess.run(gen_cmd(["--port", f"{raw(path)},server=1", "--role", "tx",
                                    "--duration", "1"]), capture_output=True, text=True,
                           timeout=30)
    finally:
        srv.close()
    assert r.returncode == 1 and "in use by another process" in r.stderr, r.stderr
    assert path.exists()


@pytest.mark.parametrize("args,what,code", [
    (["--role", "reflect"], "--role", 2),
    (["--role", "ping"], "--role", 2),
    (["--size", "64,128"], "--size", 2),
    (["--size", "imix"], "--size", 2),
    (["--size", "9018"], "--size", 2),
    (["--touch"], "--touch", 2),
    (["--tx-frames", "refcnt", "--check", "none"], "--tx-frames", 2),
    (["--tx-frames", "copy"], "--tx-frames", 2),
])
def test_refused_options(workdir: Path, args: list[str], what: str, code: int) -> None:
    r = subprocess.run([str(GEN), "--port", raw(workdir / "x.sock"), "--duration", "0.2", *args],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == code and what in r.stderr, r.stderr


@pytest.mark.parametrize("spec,what", [
    ("virtio-raw:queue_size=256", "path= is required"),
    ("virtio-raw:path=rel.sock", "absolute"),
    ("virtio-raw:path=/tmp/x.sock,queue_size=100", "power of two"),
    ("virtio-raw:path=/tmp/x.sock,mrg_rxbuf=1", "unknown key"),
    ("virtio-raw:path=/tmp/x.sock,mac=01:00:00:00:00:01", "unicast MAC"),
    ("virtio-raw:path=/tmp/x.sock,server=2", "server= takes 1 or 0"),
    ("virtio-raw:path=/tmp/x.sock,role=both", "server= takes 1 or 0"),
    ("virtio-raw:path=/tmp/x.sock,accept_timeout=5", "for server=1 ports"),
    ("virtio-raw:path=/tmp/x.sock,server=1,accept_timeout=0", "from 1 to 3600"),
])
def test_bad_specs(spec: str, what: str) -> None:
    r = subprocess.run([str(GEN), "--port", spec, "--duration", "0.2"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and what in r.stderr, r.stderr


def test_only_as_a_port(workdir: Path) -> None:
    r = subprocess.run([str(GEN), "--port", "null", "--reflect", raw(workdir / "x.sock"),
                        "--duration", "0.2"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "can only be a --port" in r.stderr, r.stderr


def replay_through_sluiced(daemon: Daemon, workdir: Path, frames: list, name: str) -> dict:
    """FRAMES, sluice-gen's stamped frames as a capture, replayed once by sluiced (a pcap
    port on a learning bridge, which floods them to its vhost-user port) into a virtio-raw
    sink: what the sink counted."""
    cap = workdir / f"{name}.pcap"
    wrpcap(str(cap), frames)
    sock = workdir / f"{name}.sock"
    daemon.call("add-switch", name=name, mode="learn")
    daemon.call("add-port", switch=name, name=f"{name}-out",
                spec=f"vhost-user:server,path={sock}")
    out = workdir / f"{name}.json"
    # A ring that holds the whole capture: nothing is dropped for want of room.
    sink = subprocess.Popen(gen_cmd(["--role", "rx", "--port", f"{raw(sock)},queue_size=8192",
                                     "--duration", "3", "--out", str(out)]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: links(daemon)[f"{name}-out"] == "up", timeout=10)
        daemon.call("add-port", switch=name, name=f"{name}-cap", spec=f"pcap:rx={cap}")
        # Once sluiced has put the whole capture on the sink's ring, the sink need not
        # wait out its --duration (3 s, a bound): stopped (SIGINT), it still reads what is
        # on its ring (its 200 ms drain) before it counts. If they never all go, the sink
        # ends at its --duration and the checks below say what is missing.
        with contextlib.suppress(AssertionError):
            wait_for(lambda: daemon.port_stats(name)[f"{name}-out"]["tx_packets"]
                     >= len(frames), timeout=3)
    finally:
        if sink.poll() is None:
            sink.send_signal(signal.SIGINT)
        _, err = sink.communicate(timeout=30)
    assert sink.returncode == 0, err
    stats = daemon.port_stats(name)
    res = json.loads(out.read_text())
    assert stats[f"{name}-cap"]["rx_packets"] == len(frames), stats
    assert res["port_stats"][0]["rx"] == stats[f"{name}-out"]["tx_packets"] == len(frames)
    return res


def test_stamped_checks_exact_through_sluiced(daemon: Daemon, workdir: Path) -> None:
    """The virtio-raw sink's stamp checks, behind a real switch: a capture of stamped
    frames sent in bursts (its bursts in order take the sink's whole-burst path), then with
    holes, swaps and a duplicate (bursts that take the frame-by-frame path), each counted
    exactly as the same capture replayed straight into sluice-gen (test_gen.py)."""
    pcap = workdir / "clean.pcap"
    run_gen(workdir, ["--role", "tx", "--port", f"pcap:tx={pcap}", "--rate", "10k",
                      "--duration", "0.5"], name="tx.json")
    frames = list(rdpcap(str(pcap)))
    assert len(frames) > 2000
    clean = replay_through_sluiced(daemon, workdir, frames, "c0")
    assert (clean["rx_packets"], clean["lost"], clean["duplicated"], clean["reordered"]) == \
        (len(frames), 0, 0, 0)
    assert clean["latency_ns"]["count"] == len(frames) and clean["foreign"] == 0

    holes = [f for i, f in enumerate(frames) if i not in (10, 11, 12, 500, 900, 1700)]
    res = replay_through_sluiced(daemon, workdir, holes, "c1")
    assert (res["rx_packets"], res["lost"], res["duplicated"], res["reordered"]) == \
        (len(holes), 6, 0, 0)
    assert res["latency_ns"]["count"] == len(holes)

    swapped = frames[:]
    swapped[20], swapped[21] = swapped[21], swapped[20]
    swapped[600], swapped[603] = swapped[603], swapped[600]
    res = replay_through_sluiced(daemon, workdir, swapped, "c2")
    # 21,20 gives one reordered (20); 599,603,601,602,600 gives three (601, 602, 600).
    assert (res["rx_packets"], res["lost"], res["duplicated"], res["reordered"]) == \
        (len(frames), 0, 0, 4)

    # Frame 30 first came in the sink's first burst (frame by frame); frame 500 in a burst
    # in order, so its duplicate is found by the seen bits the whole-burst path sets.
    doubled = frames[:50] + [frames[30]] + frames[50:1000] + [frames[500]] + frames[1000:]
    res = replay_through_sluiced(daemon, workdir, doubled, "c3")
    assert (res["rx_packets"], res["lost"], res["duplicated"], res["reordered"]) == \
        (len(doubled), 0, 2, 0)
    assert res["latency_ns"]["count"] == len(doubled)
