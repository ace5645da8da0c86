"""sluicectl against the real daemon: the README's session, human and JSON output, errors
and exit statuses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import REPO, Daemon

SLUICECTL = REPO / "bin" / "sluicectl"


def ctl(d: Daemon | Path, *args: str) -> subprocess.CompletedProcess[str]:
    sock = d.socket if isinstance(d, Daemon) else d
    return subprocess.run([str(SLUICECTL), "--socket", str(sock), *args], capture_output=True,
                          text=True, timeout=30)


def ok(d: Daemon, *args: str) -> str:
    r = ctl(d, *args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def test_readme_session(daemon: Daemon, workdir: Path) -> None:
    ok(daemon, "add-switch", "br0", "--mode", "patch")
    ok(daemon, "add-port", "br0", "vm1", f"vhost-user:server,path={workdir}/vm1.sock")
    ok(daemon, "add-port", "br0", "vm2", f"vhost-user:server,path={workdir}/vm2.sock")
    ok(daemon, "patch", "br0", "vm1", "vm2")
    show = ok(daemon, "show")
    for word in ("br0", "patch", "vm1", "vm2", "vhost-user", "down"):
        assert word in show, show
    stats = json.loads(ok(daemon, "stats", "br0", "--json"))
    ports = {p["name"]: p for p in stats["switches"][0]["ports"]}
    assert set(ports) == {"vm1", "vm2"} and ports["vm1"]["rx_packets"] == 0
    human = ok(daemon, "stats", "br0")
    assert "vm1" in human and "vm2" in human
    ok(daemon, "del-port", "br0", "vm2")
    assert [p["name"] for p in json.loads(ok(daemon, "list-ports", "--json"))] == ["vm1"]
    ok(daemon, "del-switch", "br0")
    assert json.loads(ok(daemon, "--json", "list-switches")) == []


def test_learn_session(daemon: Daemon, workdir: Path) -> None:
    ok(daemon, "add-switch", "br1", "--mode", "learn", "--aging", "60", "--max-entries", "1024")
    ok(daemon, "add-port", "br1", "vm1", f"vhost-user:server,path={workdir}/vm1.sock")
    ok(daemon, "add-port", "br1", "up", f"vhost-user:server,path={workdir}/up.sock")
    ok(daemon, "set-port", "br1", "vm1", "vlan-mode=access", "tag=10")
    ok(daemon, "set-port", "br1", "up", "vlan-mode=trunk", "trunks=10,20", "learn-limit=100")
    ok(daemon, "set-switch", "br1", "--aging", "30")
    ok(daemon, "fdb-add", "br1", "02:00:00:00:00:01", "vm1", "vlan", "10")
    ok(daemon, "fdb-add", "br1", "02:00:00:00:00:02", "up", "vlan", "20")
    fdb = ok(daemon, "fdb-show", "br1")
    assert "02:00:00:00:00:01" in fdb and "static" in fdb and "vm1" in fdb, fdb
    entries = json.loads(ok(daemon, "fdb-show", "br1", "--json"))["entries"]
    assert {(e["port"], e["vlan"], e["type"]) for e in entries} == {
        ("vm1", 10, "static"), ("up", 20, "static")}
    show = ok(daemon, "show")
    for words in ("mode learn", "aging 30 s", "2 of 1024", "access 10", "trunk 10,20", "100"):
        assert words in show, (words, show)
    stats = ok(daemon, "stats", "br1")
    assert "learning: 2 addresses" in stats, stats
    assert "0 learned entries deleted" in ok(daemon, "fdb-flush", "br1")
    ok(daemon, "fdb-del", "br1", "02:00:00:00:00:02", "vlan", "20")
    r = ctl(daemon, "fdb-del", "br1", "02:00:00:00:00:02", "vlan", "20")
    assert r.returncode == 1 and "no entry" in r.stderr
    r = ctl(daemon, "set-port", "br1", "vm1", "vlan-mode=access", "tag=5000")
    assert r.returncode == 1 and "tag" in r.stderr
    r = ctl(daemon, "set-port", "br1", "vm1", "colour=blue")    # usage error
    assert r.returncode == 2 and "usage" in r.stderr


def test_traffic_counters_in_human_stats(daemon: Daemon) -> None:
    ok(daemon, "add-switch", "sw")
    ok(daemon, "add-port", "sw", "src", "null:rx=1")
    ok(daemon, "add-port", "sw", "sink", "null")
    ok(daemon, "patch", "sw", "src", "sink")
    ok(daemon, "unpatch", "sw", "src")
    out = ok(daemon, "stats", "sw")
    assert "unpatched=" in out, out


def test_errors_and_exit_statuses(daemon: Daemon, workdir: Path) -> None:
    r = ctl(daemon, "del-switch", "nope")
    assert r.returncode == 1
    assert "no switch named 'nope'" in r.stderr and "-32000" in r.stderr
    ok(daemon, "add-switch", "br0")
    r = ctl(daemon, "add-port", "br0", "p", "vhost-user:serv,path=/tmp/x.sock")
    assert r.returncode == 1 and "'role' must be server or client" in r.stderr
    r = ctl(daemon, "add-switch")                       # usage error
    assert r.returncode == 2
    r = ctl(workdir / "no-daemon-here.sock", "show")     # nobody listening
    assert r.returncode == 3 and "no-daemon-here.sock" in r.stderr


def test_help_everywhere() -> None:
    top = subprocess.run([str(SLUICECTL), "--help"], capture_output=True, text=True)
    assert top.returncode == 0
    verbs = ["version", "add-switch", "del-switch", "list-switches", "add-port", "del-port",
             "patch", "unpatch", "list-ports", "show", "stats", "clear-stats"]
    for verb in verbs:
        assert verb in top.stdout
        r = subprocess.run([str(SLUICECTL), verb, "--help"], capture_output=True, text=True)
        assert r.returncode == 0 and "usage" in r.stdout.lower(), verb
