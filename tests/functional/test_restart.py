"""Restart without losing VNFs (issue 15): the state file, and traffic after kill -9.

sluiced keeps its configuration in a state file rewritten on every change and replays it at
start. With vhost-user ports in client mode (the VM side is the server, testpmd's
virtio-user with server=1 here), a daemon killed with SIGKILL and started again brings the
VNFs' traffic back by itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    TESTPMD,
    Daemon,
    RpcError,
    assert_accounting,
    remove_hugepage_files,
    stop_process,
    wait_for,
)


def configured(d: Daemon) -> dict[str, Any]:
    """What a restart must bring back: switches, ports, links, settings, static entries."""
    show = d.call("show")
    out: dict[str, Any] = {}
    for s in show["switches"]:
        keep = {k: s.get(k) for k in ("mode", "links", "aging", "max_entries",
                                      "forward_reserved")}
        keep["ports"] = sorted((p["name"], p["spec"]) for p in s["ports"])
        settings = s.get("port_settings") or {}
        keep["port_settings"] = {n: {k: v for k, v in p.items() if k != "entries"}
                                 for n, p in settings.items()}
        if s["mode"] == "learn":
            keep["static"] = sorted((e["mac"].lower(), e["port"], e.get("vlan", 0)) for e in
                                    d.call("fdb-show", switch=s["name"])["entries"]
                                    if e["type"] == "static")
        out[s["name"]] = keep
    return out


def test_state_file_brings_back_the_configuration(workdir: Path) -> None:
    state = workdir / "sluiced.state"
    d = Daemon(workdir, "st", ["--state", str(state)]).start()
    try:
        d.call("add-switch", name="br0", mode="learn", aging=120, max_entries=4096)
        for name in ("a", "b", "c"):
            d.call("add-port", switch="br0", name=name, spec=f"ring:name=st{name}{os.getpid()}")
        d.call("set-port", switch="br0", name="a", vlan_mode="access", tag=10,
               learn_limit=5, storm_pps=1000)
        d.call("set-port", switch="br0", name="b", vlan_mode="trunk", trunks="10,20-22")
        d.call("set-switch", switch="br0", forward_reserved=True)
        d.call("fdb-add", switch="br0", mac="02:00:00:00:00:0a", port="c", vlan=10)
        d.call("add-switch", name="p0", mode="patch")
        for name in ("x", "y", "z"):
            d.call("add-port", switch="p0", name=name, spec=f"ring:name=st{name}{os.getpid()}")
        d.call("patch", switch="p0", port1="x", port2="y")
        d.call("del-port", switch="p0", name="z")
        before = configured(d)
        lines = [x for x in state.read_text().splitlines() if not x.startswith("#")]
        assert not any('"z"' in x for x in lines), lines     # undone changes are not kept
        assert d.stop() == 0

        d.start()                       # after a clean stop
        assert configured(d) == before
        d.proc.kill()                   # type: ignore[union-attr]
        d.proc.wait()                   # type: ignore[union-attr]
        d._rpc = None
        d.start()                       # after SIGKILL
        assert configured(d) == before
        assert "restored" in d.log.read_text()
    finally:
        d.stop()


def test_no_state_without_the_default_socket(daemon: Daemon, workdir: Path) -> None:
    """A daemon on another socket keeps no state unless asked (tests and benchmarks run
    several daemons), and --config then applies as before."""
    daemon.call("add-switch", name="br0", mode="patch")
    assert list(workdir.glob("*.state")) == []


def test_state_wins_over_config(workdir: Path) -> None:
    state, config = workdir / "s.state", workdir / "c.jsonl"
    config.write_text('{"method":"add-switch","params":{"name":"fromcfg","mode":"patch"}}\n')
    d = Daemon(workdir, "sc", ["--state", str(state), "--config", str(config)]).start()
    try:
        assert [s["name"] for s in d.call("list-switches")] == ["fromcfg"]
        assert "fromcfg" in state.read_text()         # a first start: the config's result
        d.call("del-switch", name="fromcfg")
        d.call("add-switch", name="later", mode="patch")
        assert d.stop() == 0
        d.start()
        assert [s["name"] for s in d.call("list-switches")] == ["later"]
        assert "not --config" in d.log.read_text()
    finally:
        d.stop()


@pytest.fixture
def vnfs(workdir: Path) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Two testpmd VNFs, each the vhost-user *server* (virtio-user server=1): vm1 sends,
    vm2 receives. They outlive the switch's restarts."""
    started: dict[str, subprocess.Popen[bytes]] = {}
    prefixes = []
    for vm, mode in (("vm2", "rxonly"), ("vm1", "txonly")):
        prefix = f"slrs{os.getpid()}{vm}"
        prefixes.append(prefix)
        with open(workdir / f"{vm}.log", "wb") as log:
            started[vm] = subprocess.Popen(
                [TESTPMD, "--lcores", "0@0,1@0", "--no-pci", "--file-prefix", prefix,
                 "--single-file-segments", "--in-memory", "-m", "256",
                 "--vdev", f"net_virtio_user0,path={workdir}/{vm}.sock,server=1,queues=1",
                 "--log-level=*:warning", "--", f"--forward-mode={mode}",
                 "--stats-period", "1", "--nb-cores", "1", "--txd", "512", "--rxd", "512"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(lambda vm=vm: (workdir / f"{vm}.sock").exists(), 30)
    yield started
    for proc in started.values():
        stop_process(proc, sig=signal.SIGINT)
    for prefix in prefixes:
        remove_hugepage_files(prefix)


def delivered(d: Daemon) -> int:
    try:
        return int(d.port_stats("br0")["vm2"]["tx_packets"])
    except (ConnectionError, OSError):
        return 0


def test_kill9_restart_resumes_vnf_traffic(workdir: Path, vnfs: dict[str, Any]) -> None:
    """SIGKILL the switch under traffic, start it again with the same command: the ports
    come back from the state file, reconnect to the VNFs, and traffic flows with no step by
    anyone. The gap from the restart to the first forwarded packet is printed (make test
    shows it with -s; docs/operations.md gives the figures)."""
    d = Daemon(workdir, "rs", ["--state", str(workdir / "rs.state")]).start()
    try:
        d.call("add-switch", name="br0", mode="patch")
        for vm in ("vm1", "vm2"):
            d.call("add-port", switch="br0", name=vm,
                   spec=f"vhost-user:client,path={workdir}/{vm}.sock")
        d.call("patch", switch="br0", port1="vm1", port2="vm2")
        wait_for(lambda: delivered(d) > 100_000, 30)
        gaps = []
        for _ in range(3):
            d.proc.kill()               # type: ignore[union-attr]
            d.proc.wait()               # type: ignore[union-attr]
            d._rpc = None
            t0 = time.monotonic()
            d.start(wait=False)
            d.wait_ready()
            wait_for(lambda: delivered(d) > 0, 20)
            gaps.append(time.monotonic() - t0)
            assert_accounting(d.port_stats("br0"))
        print(f"\nrestart to traffic after SIGKILL: {', '.join(f'{g:.3f}' for g in gaps)} s")
        assert all(g < 10 for g in gaps), gaps
        assert all(p.poll() is None for p in vnfs.values()), "a VNF died with the switch"
    finally:
        d.stop()


def ofports(d: Daemon, switch: str) -> dict[str, int]:
    sw = next(s for s in d.call("show")["switches"] if s["name"] == switch)
    return {p["name"]: p["ofport"] for p in sw["ports"]}


def test_openflow_port_numbers_stay_with_their_ports(workdir: Path) -> None:
    """Rules and controllers name ports by OpenFlow number: a deleted port's number does not
    pass to a new port while others are free, comes back to a port of the same name, can be
    asked for, and survives a restart (with a gap before it)."""
    state = workdir / "sluiced.state"
    d = Daemon(workdir, "of", ["--state", str(state)]).start()
    try:
        d.call("add-switch", name="f", mode="flow")
        for name in ("a", "b", "c"):
            d.call("add-port", switch="f", name=name, spec="null:")
        d.call("add-flow", switch="f", flow="in_port=a,actions=output:2")   # to b
        d.call("del-port", switch="f", name="b")
        d.call("add-port", switch="f", name="d", spec="null:")
        assert ofports(d, "f") == {"a": 1, "c": 3, "d": 4}      # not b's 2
        d.call("add-port", switch="f", name="b", spec="null:")
        assert ofports(d, "f")["b"] == 2                      # b's own again
        d.call("add-port", switch="f", name="e", spec="null:", ofport=9)
        with pytest.raises(RpcError) as e:
            d.call("add-port", switch="f", name="g", spec="null:", ofport=9)
        assert e.value.code == -32001 and "'e'" in e.value.message
        with pytest.raises(RpcError) as e:
            d.call("add-port", switch="f", name="g", spec="null:", ofport=65)
        assert e.value.code == -32602
        d.call("del-port", switch="f", name="a")
        before = ofports(d, "f")
        assert d.stop() == 0
        d.start()
        assert ofports(d, "f") == before == {"b": 2, "c": 3, "d": 4, "e": 9}
    finally:
        d.stop()
