"""`sluicectl capture` on vhost-user ports of sluiced's own data path (fast=1), which have no
ethdev for dpdk-dumpcap: sluiced captures them itself (src/capture.c). Real guests
(dpdk-testpmd over virtio-user, as in test_vhost_fast.py) send real frames; the file is read
back, and the daemon's counters must stay exact while the port leaves the one-copy path for
the capture and after it comes back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from scapy.all import IP, UDP, Ether, RawPcapReader, rdpcap  # type: ignore
from test_vhost_fast import (
    MACS,
    Guest,
    guests,
    learn_fast_ports,
    links,
    mac_guest,
    start_pair,
    two_fast_ports,
)

from conftest import REPO, Daemon, assert_accounting, stop_process, wait_for
from sluice.capture import EPB, epb_direction, pcapng_blocks

__all__ = ["guests"]     # the fixture, used by name


def spawn(daemon: Daemon, port: str, path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.Popen(
        [sys.executable, "-m", "sluice.ctl", "--socket", str(daemon.socket), "capture", "br0",
         port, "-w", str(path), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def start(daemon: Daemon, port: str, path: Path, *extra: str) -> subprocess.Popen[str]:
    """sluicectl capture in the background, once it says the capture has begun."""
    proc = spawn(daemon, port, path, *extra)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("capturing") and "captured by sluiced" in line, \
        line + proc.communicate(timeout=30)[1]
    return proc


def blocks(path: Path) -> list[tuple[str | None, bytes, int]]:
    """(direction, bytes, timestamp) of each packet, with the module's own pcapng reader."""
    out = []
    for btype, block, order in pcapng_blocks(path.read_bytes()):
        if btype == EPB:
            ts = (int.from_bytes(block[12:16], "little") << 32) | int.from_bytes(
                block[16:20], "little")
            cap_len = int.from_bytes(block[20:24], "little")
            out.append((epb_direction(block, order), block[28:28 + cap_len], ts))
    return out


def packets_read(path: Path) -> int:
    """How many packets scapy's reader finds in the file PATH, read to its end but not
    dissected: rdpcap would dissect each of the few 100,000 frames of an unbounded
    capture, which took 20 s of the test."""
    with RawPcapReader(str(path)) as reader:
        return sum(1 for _ in reader)


def one_copy(daemon: Daemon) -> int:
    return int(daemon.port_stats("br0")["vm1"]["one_copy"])


def back_on_one_copy(daemon: Daemon) -> None:
    """vm1's frames take the one-copy path again: one_copy grows by 10,000 in 10 s."""
    before = one_copy(daemon)
    wait_for(lambda: one_copy(daemon) > before + 10_000, 10)


def finish_pair(daemon: Daemon, rx: Guest, tx: Guest) -> None:
    """Stops the guests and checks that every frame is counted: testpmd's TX is vm1's rx,
    vm2's tx is testpmd's RX."""
    assert tx.stop() == 0
    time.sleep(1.5)
    assert rx.stop() == 0
    stats = daemon.port_stats("br0")
    vm1, vm2 = stats["vm1"], stats["vm2"]
    assert_accounting(stats)
    assert vm1["rx_packets"] == tx.counts()["TX-packets"]
    assert vm2["tx_packets"] == rx.counts()["RX-packets"] > 0
    assert vm1["rx_packets"] == vm2["tx_packets"] + vm1["dropped"]
    assert 0 < vm1["one_copy"] < vm1["forwarded"], vm1     # both paths were taken


def test_count_each_direction_then_one_copy_again(daemon: Daemon, workdir: Path,
                                                  guests: list[Guest]) -> None:
    """testpmd txonly -> vm1 -> vm2 -> testpmd rxonly: --count 300 of what vm1 receives,
    what vm2 sends and both directions of vm1 (only received frames there), each 300
    testpmd frames of the right direction; after each, vm1 is back on the one-copy path."""
    two_fast_ports(daemon, workdir)
    rx, tx = start_pair(daemon, workdir, guests)
    wait_for(lambda: one_copy(daemon) > 10_000, 60)
    seen = set()
    for port, direction, want in (("vm1", "rx", 1), ("vm2", "tx", 2), ("vm1", "both", 1)):
        out = workdir / f"{port}-{direction}.pcapng"
        began = time.time()
        proc = start(daemon, port, out, "--count", "300", "--direction", direction,
                     "--duration", "30")
        stdout, stderr = proc.communicate(timeout=40)
        assert proc.returncode == 0, stderr
        assert f"300 packets captured in {out}" in stdout, stdout
        assert "sluiced's capture ring dropped" in stdout, stdout
        got = rdpcap(str(out))
        assert len(got) == 300 and {p.direction for p in got} == {want}
        # testpmd txonly: one 64-byte frame (as the daemon counts it: rx_bytes), UDP 9 ->
        # 9, sent again and again; the same bytes seen on the way in and on the way out.
        assert {len(p) for p in got} == {64}
        assert all(p.haslayer(UDP) and p[UDP].dport == 9 for p in got)
        seen |= {bytes(p) for p in got}
        own = blocks(out)
        assert [d for d, _, _ in own] == [direction if direction != "both" else "rx"] * 300
        stamps = [t for _, _, t in own]
        assert stamps == sorted(stamps) and began - 1 < stamps[0] / 1e9 < time.time() + 1
        back_on_one_copy(daemon)
    assert len(seen) == 1
    finish_pair(daemon, rx, tx)


def test_both_directions_bytes(daemon: Daemon, workdir: Path, guests: list[Guest]) -> None:
    """A burst bouncing between two guests (io --tx-first on vm1, macswap on vm2): vm1's
    capture holds both directions, and each frame it sent its guest is one its guest sent,
    with the addresses swapped or as it was."""
    two_fast_ports(daemon, workdir)
    back = Guest(workdir, "swap", workdir / "vm2.sock", "macswap").start()
    guests.append(back)
    wait_for(lambda: links(daemon)["vm2"] == "up", 30)
    first = Guest(workdir, "io", workdir / "vm1.sock", "io")
    first.cmd.append("--tx-first")
    guests.append(first.start())
    wait_for(lambda: daemon.port_stats("br0")["vm1"]["rx_packets"] > 10_000, 60)
    out = workdir / "both.pcapng"
    proc = start(daemon, "vm1", out, "--count", "400", "--duration", "30")
    stdout, stderr = proc.communicate(timeout=40)
    assert proc.returncode == 0 and "400 packets captured" in stdout, stderr
    got = rdpcap(str(out))
    sent = {bytes(p) for p in got if p.direction == 1}
    taken = {bytes(p) for p in got if p.direction == 2}
    assert sent and taken

    def swapped(f: bytes) -> bytes:
        return f[6:12] + f[0:6] + f[12:]

    assert all(f in sent or swapped(f) in sent for f in taken), (len(sent), len(taken))
    assert all(Ether(f).haslayer(IP) for f in sent | taken)
    for g in (first, back):
        assert g.stop() == 0
    stats = daemon.port_stats("br0")
    assert_accounting(stats)
    assert stats["vm1"]["one_copy"] > 0


def test_duration_second_capture_refused_one_copy_paused(daemon: Daemon, workdir: Path,
                                                         guests: list[Guest]) -> None:
    """--duration 3 --count 0: while it runs vm1's frames take the mbuf path (one_copy
    stands still while forwarded grows) and a second capture of vm1 is refused; it ends by
    itself after about 3 s, and the one-copy path comes back."""
    two_fast_ports(daemon, workdir)
    rx, tx = start_pair(daemon, workdir, guests)
    wait_for(lambda: one_copy(daemon) > 10_000, 60)
    out = workdir / "dur.pcapng"
    began = time.monotonic()
    proc = start(daemon, "vm1", out, "--count", "0", "--duration", "3")
    a = daemon.port_stats("br0")["vm1"]
    time.sleep(0.5)
    b = daemon.port_stats("br0")["vm1"]
    assert b["one_copy"] == a["one_copy"] and b["forwarded"] > a["forwarded"] + 1000, (a, b)
    second = spawn(daemon, "vm1", workdir / "second.pcapng", "--count", "5")
    _, err = second.communicate(timeout=30)
    assert second.returncode == 1 and "being captured already" in err, err
    stdout, stderr = proc.communicate(timeout=30)
    took = time.monotonic() - began
    assert proc.returncode == 0, stderr
    assert 2.5 < took < 10, took
    print(stdout.strip())
    n = int(stdout.split(" packets captured")[0].rsplit("\n", 1)[-1])
    assert n > 1000 and len(blocks(out)) == n, stdout
    back_on_one_copy(daemon)
    finish_pair(daemon, rx, tx)


def test_ctrl_c_and_sigkill(daemon: Daemon, workdir: Path, guests: list[Guest]) -> None:
    """Ctrl-C ends an unbounded capture cleanly (status 0, a valid file); a sluicectl
    killed mid-capture (SIGKILL) closes its connection, which ends the capture at once:
    the one-copy path comes back within seconds and vm1 can be captured again."""
    two_fast_ports(daemon, workdir)
    rx, tx = start_pair(daemon, workdir, guests)
    wait_for(lambda: one_copy(daemon) > 10_000, 60)
    out = workdir / "int.pcapng"
    proc = start(daemon, "vm1", out, "--count", "0")
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0 and " packets captured in " in stdout, stderr
    assert packets_read(out) > 0

    proc = start(daemon, "vm1", workdir / "killed.pcapng", "--count", "0")
    time.sleep(0.5)
    frozen = one_copy(daemon)
    time.sleep(0.2)
    assert one_copy(daemon) == frozen
    proc.kill()
    proc.wait()
    killed = time.monotonic()
    wait_for(lambda: one_copy(daemon) > frozen + 10_000, 10)
    assert time.monotonic() - killed < 5
    assert "ended (client gone)" in daemon.log.read_text()
    again = spawn(daemon, "vm1", workdir / "again.pcapng", "--count", "10")
    stdout, stderr = again.communicate(timeout=30)
    assert again.returncode == 0 and "10 packets captured" in stdout, stderr
    finish_pair(daemon, rx, tx)


def test_stopped_client_times_out(daemon: Daemon, workdir: Path, guests: list[Guest]) -> None:
    """A sluicectl that stops reading (SIGSTOP) keeps its connection open: the capture ends
    when nobody has read it for 10 s, and the port goes back to the one-copy path."""
    two_fast_ports(daemon, workdir)
    rx, tx = start_pair(daemon, workdir, guests)
    wait_for(lambda: one_copy(daemon) > 10_000, 60)
    proc = start(daemon, "vm1", workdir / "stopped.pcapng", "--count", "0")
    proc.send_signal(signal.SIGSTOP)
    stopped = time.monotonic()
    frozen = one_copy(daemon)
    try:
        wait_for(lambda: one_copy(daemon) > frozen + 10_000, 30)
        assert 9 < time.monotonic() - stopped < 20
        assert "nobody read it for 10 s" in daemon.log.read_text()
    finally:
        proc.send_signal(signal.SIGCONT)
        stop_process(proc)      # type: ignore[arg-type]
    finish_pair(daemon, rx, tx)


def test_learn_switch_output_and_input(daemon: Daemon, workdir: Path,
                                       guests: list[Guest]) -> None:
    """A learn switch, vm2's MAC static on vm2: vm1's frames to it take the one copy (the
    switch decides frame by frame). Captured as the output (vm2, tx) and as the input (vm1,
    rx), the frames take the mbuf path meanwhile and the file holds them; after, the one
    copy again, and every frame counted."""
    learn_fast_ports(daemon, workdir, ["vm1", "vm2"])
    daemon.call("fdb-add", switch="br0", mac=MACS["vm2"], port="vm2")
    rx = mac_guest(workdir, "vm2", "rxonly").start()
    guests.append(rx)
    wait_for(lambda: links(daemon)["vm2"] == "up", 30)
    tx = mac_guest(workdir, "vm1", "txonly", MACS["vm2"]).start()
    guests.append(tx)
    wait_for(lambda: one_copy(daemon) > 10_000, 60)
    for port, direction in (("vm2", "tx"), ("vm1", "rx")):
        out = workdir / f"learn-{port}.pcapng"
        proc = start(daemon, port, out, "--direction", direction, "--count", "0",
                     "--duration", "2")
        a = daemon.port_stats("br0")["vm1"]
        time.sleep(0.5)
        b = daemon.port_stats("br0")["vm1"]
        assert b["one_copy"] == a["one_copy"] and b["forwarded"] > a["forwarded"] + 1000, \
            (port, a, b)
        stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 0, stderr
        print(port, direction, stdout.strip())
        got = blocks(out)       # scapy would take minutes over a few 100,000 frames
        assert len(got) > 1000 and {d for d, _, _ in got} == {direction}
        assert {f[:6] for _, f, _ in got} == {bytes.fromhex(MACS["vm2"].replace(":", ""))}
        back_on_one_copy(daemon)
    finish_pair(daemon, rx, tx)


def test_port_deleted_mid_capture(daemon: Daemon, workdir: Path) -> None:
    """Deleting a port under its capture ends the capture: sluicectl writes what it got
    and exits 0; the other fast port of the switch can be captured at once."""
    two_fast_ports(daemon, workdir)
    out = workdir / "gone.pcapng"
    proc = start(daemon, "vm1", out, "--count", "0")
    daemon.call("del-port", switch="br0", name="vm1")
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0 and f"0 packets captured in {out}" in stdout, stderr
    assert blocks(out) == [] and "ended (port deleted)" in daemon.log.read_text()
    again = spawn(daemon, "vm2", workdir / "vm2.pcapng", "--duration", "0.5")
    stdout, stderr = again.communicate(timeout=30)
    assert again.returncode == 0 and "0 packets captured" in stdout, stderr
