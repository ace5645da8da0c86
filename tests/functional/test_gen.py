"""sluice-gen through the real daemon: a paced stream arrives complete and in order, and
--alternate switches between two daemons, stopping one at a time and resuming both."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from conftest import REPO, Daemon

GEN = REPO / "build" / "tools" / "gen" / "sluice-gen"


def patched_vhost(d: Daemon, workdir: Path, tag: str) -> tuple[str, str]:
    d.call("add-switch", name="br0")
    for p in ("in", "out"):
        d.call("add-port", switch="br0", name=p,
               spec=f"vhost-user:server,path={workdir}/{tag}{p}.sock")
    d.call("patch", switch="br0", port1="in", port2="out")
    return (f"virtio-user:path={workdir}/{tag}in.sock",
            f"virtio-user:path={workdir}/{tag}out.sock")


def run_gen(workdir: Path, args: list[str], timeout: float = 60) -> dict:
    out = workdir / "gen.json"
    r = subprocess.run([str(GEN), "--cpu", "0", *args, "--out", str(out)], capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text())


def test_paced_stream_through_patch(daemon: Daemon, workdir: Path) -> None:
    tx, rx = patched_vhost(daemon, workdir, "p")
    res = run_gen(workdir, ["--port", tx, "--port", rx, "--rate", "200k", "--size", "128",
                            "--duration", "3"])
    assert res["tx_packets"] > 0
    assert abs(res["offered_pps"] - 200_000) / 200_000 < 0.05, res
    assert res["rx_packets"] == res["tx_packets"], res
    assert res["lost"] == 0 and res["reordered"] == 0
    stats = daemon.port_stats("br0")
    assert stats["in"]["rx_packets"] == res["tx_packets"]
    assert stats["in"]["rx_bytes"] == 124 * res["tx_packets"]     # 128 B frame less FCS


def test_alternate_between_two_daemons(workdir: Path) -> None:
    a = Daemon(workdir, "a").start()
    b = Daemon(workdir, "b").start()
    try:
        a_tx, a_rx = patched_vhost(a, workdir, "a")
        b_tx, b_rx = patched_vhost(b, workdir, "b")
        assert a.proc is not None and b.proc is not None
        res = run_gen(workdir, ["--port", a_tx, "--port", a_rx, "--port", b_tx, "--port", b_rx,
                                "--alternate", f"{a.proc.pid},{b.proc.pid}", "--window", "0.5",
                                "--settle", "0.1", "--duration", "3.2"])
        windows = res["windows"]
        assert len(windows) >= 5
        assert [w["switch"] for w in windows] == ["A", "B"] * (len(windows) // 2) + \
            ["A"] * (len(windows) % 2)
        assert all(w["rx_pps"] > 0 for w in windows)
        # Both daemons run again: neither was left stopped.
        for d in (a, b):
            state = Path(f"/proc/{d.proc.pid}/stat").read_text().split()[2]
            assert state != "T", state
            assert d.call("version")
        ports_a = a.port_stats("br0")
        assert ports_a["out"]["tx_packets"] > 0
    finally:
        for d in (a, b):
            if d.proc is not None and d.proc.poll() is None:
                os.kill(d.proc.pid, signal.SIGCONT)
        assert a.stop() == 0 and b.stop() == 0


def test_help_and_bad_options() -> None:
    r = subprocess.run([str(GEN), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--alternate" in r.stdout
    r = subprocess.run([str(GEN), "--port", "bogus:x=1", "--port", "null"], capture_output=True,
                       text=True)
    assert r.returncode != 0 and "unknown port kind 'bogus'" in r.stderr
    r = subprocess.run([str(GEN), "--rate", "fast"], capture_output=True, text=True)
    assert r.returncode == 2 and "--rate" in r.stderr
