"""A memif peer that goes away must not take sluiced with it.

DPDK 22.11's memif PMD unmaps the rings it shares with a peer in the EAL interrupt thread as
soon as the peer disconnects, while a worker may still be inside a receive or transmit burst
on that port (src/unmap_guard.c). Here sluice-gen, a real memif peer, connects to a patch
switch at full rate and disconnects, again and again, and the daemon must outlive every one
of those disconnects and still account for every packet."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from gen_helpers import run_gen

from conftest import Daemon, assert_accounting

# Without the guard, busy-polling daemons died of SIGSEGV in the memif receive path at the
# 13th run of the first test and the 4th of the second.
DISCONNECTS = int(os.environ.get("SLUICE_MEMIF_DISCONNECTS", "20"))
# Busy-polling as under sluice-bench: an idle worker that sleeps is never inside a burst when
# the generator (idle for its last 200 ms) disconnects.
BUSY = ["--idle-sleep-us", "0"]


def test_daemon_outlives_memif_peers_disconnecting(workdir: Path) -> None:
    daemon = Daemon(workdir, "d", BUSY).start()
    try:
        one_daemon_runs(daemon, workdir)
    finally:
        rc = daemon.stop()
    assert rc == 0, daemon.log.read_text()


def one_daemon_runs(daemon: Daemon, workdir: Path) -> None:
    """DISCONNECTS runs of the generator through DAEMON's patch switch at full rate."""
    a, b = workdir / "a.memif", workdir / "b.memif"
    daemon.call("add-switch", name="br0")
    daemon.call("add-port", switch="br0", name="a", spec=f"memif:role=server,socket={a}")
    daemon.call("add-port", switch="br0", name="b", spec=f"memif:role=server,socket={b}")
    daemon.call("patch", switch="br0", port1="a", port2="b")
    for i in range(DISCONNECTS):
        res, r = run_gen(workdir, ["--role", "txrx", "--rate", "max", "--duration", "0.3",
                                   "--port", f"memif:role=client,socket={a}",
                                   "--port", f"memif:role=client,socket={b}"])
        assert daemon.proc is not None and daemon.proc.poll() is None, (
            f"sluiced died in run {i + 1} ({daemon.proc.returncode}):\n"
            + daemon.log.read_text())
        assert res["rx_packets"] > 0, (f"run {i + 1}: nothing came back: {r.stderr}\n"
                                       f"{daemon.port_stats('br0')}")
    assert_accounting(daemon.port_stats("br0"))


def patched_memif(d: Daemon, workdir: Path, tag: str) -> list[str]:
    """A patch switch between two memif servers of D; the generator's client ports."""
    d.call("add-switch", name="br0")
    for p in ("in", "out"):
        d.call("add-port", switch="br0", name=p,
               spec=f"memif:role=server,socket={workdir}/{tag}{p}.memif")
    d.call("patch", switch="br0", port1="in", port2="out")
    return ["--port", f"memif:role=client,socket={workdir}/{tag}in.memif",
            "--port", f"memif:role=client,socket={workdir}/{tag}out.memif"]


def test_daemons_outlive_alternating_memif_runs(workdir: Path) -> None:
    """What sluice-bench does between two daemons: alternating windows at full rate (one
    daemon stopped at a time), then both stopped between trials and continued for the next."""
    a = Daemon(workdir, "a", BUSY).start()
    b = Daemon(workdir, "b", BUSY).start()
    try:
        ports = patched_memif(a, workdir, "a") + patched_memif(b, workdir, "b")
        assert a.proc is not None and b.proc is not None
        for i in range(DISCONNECTS // 2):
            run_gen(workdir, [*ports, "--alternate", f"{a.proc.pid},{b.proc.pid}",
                              "--window", "0.3", "--settle", "0.1", "--duration", "1.2"])
            for d in (a, b):
                d.proc.send_signal(signal.SIGSTOP)
            time.sleep(0.2)
            for d in (a, b):
                d.proc.send_signal(signal.SIGCONT)
            time.sleep(0.3)
            for d in (a, b):
                assert d.proc.poll() is None, (f"sluiced died in run {i + 1} "
                                               f"({d.proc.returncode}):\n" + d.log.read_text())
    finally:
        for d in (a, b):
            if d.proc is not None and d.proc.poll() is None:
                d.proc.send_signal(signal.SIGCONT)
        rcs = (a.stop(), b.stop())
    assert rcs == (0, 0)
