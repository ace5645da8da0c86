"""Port set-up that waits for a peer does not hold the control thread (issue 15, defect 3):
a virtio-user server port waits for its vhost-user peer, a virtio-user client waits on a
peer that never answers; meanwhile other requests are answered, SIGTERM shuts the daemon
down, and --port-setup-timeout ends the wait with a clear error."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from conftest import (
    TESTPMD,
    Daemon,
    Rpc,
    remove_hugepage_files,
    stop_process,
    wait_for,
)

DEVICE, WRONG_STATE = -32003, -32005


def send_request(rpc: Rpc, request_id: int, method: str, **params: object) -> None:
    rpc.sock.sendall(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                 "params": params}).encode() + b"\n")


def read_answer(rpc: Rpc) -> dict:
    line = rpc.reader.readline()
    assert line, "the daemon closed the connection"
    return json.loads(line)


def answer_time(d: Daemon, method: str) -> float:
    start = time.monotonic()
    with Rpc(d.socket, timeout=5.0) as rpc:
        rpc.call(method)
    return time.monotonic() - start


def test_virtio_server_waits_for_peer_without_holding_control(daemon: Daemon,
                                                              workdir: Path) -> None:
    sock = workdir / "vu.sock"
    daemon.call("add-switch", name="br0")
    waiter = Rpc(daemon.socket, timeout=60.0)
    send_request(waiter, 7, "add-port", switch="br0", name="vu",
                 spec=f"virtio-user:server,path={sock}")
    wait_for(sock.exists, 10)                  # the port listens, waiting for its peer
    time.sleep(0.3)
    for method in ("version", "show", "list-ports"):
        assert answer_time(daemon, method) < 1.0, method
    with Rpc(daemon.socket) as other:           # another add-port must wait its turn
        try:
            other.call("add-port", switch="br0", name="n", spec="null")
            raise AssertionError("a second set-up was accepted")
        except Exception as e:                  # noqa: BLE001
            assert getattr(e, "code", None) == WRONG_STATE and "busy" in str(e), e
    prefix = f"slps{os.getpid()}peer"
    log = workdir / "testpmd-peer.log"
    with open(log, "wb") as out:
        peer = subprocess.Popen(
            [TESTPMD, "--lcores", "0@0,1@0", "--no-pci", "--file-prefix", prefix,
             "--single-file-segments", "--in-memory", "-m", "256",
             "--vdev", f"net_vhost0,iface={sock},client=1", "--log-level=*:warning", "--",
             "--forward-mode=txonly", "--nb-cores", "1", "--stats-period", "1"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        answer = read_answer(waiter)
        assert answer["id"] == 7 and answer["result"]["name"] == "vu", answer
        assert [p["name"] for p in daemon.call("list-ports")] == ["vu"]
        daemon.call("del-port", switch="br0", name="vu")
    finally:
        stop_process(peer, sig=signal.SIGINT)
        remove_hugepage_files(prefix)
        waiter.close()


def test_sigterm_during_pending_setup(workdir: Path) -> None:
    d = Daemon(workdir, "t").start()
    sock = workdir / "vu.sock"
    try:
        d.call("add-switch", name="br0")
        waiter = Rpc(d.socket, timeout=10.0)
        send_request(waiter, 1, "add-port", switch="br0", name="vu",
                     spec=f"virtio-user:server,path={sock}")
        wait_for(sock.exists, 10)
        assert d.proc is not None
        start = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(10) == 0
        assert time.monotonic() - start < 5.0
        answer = read_answer(waiter)             # the waiting client is told, not left hanging
        assert answer["id"] == 1 and "shutting down" in answer["error"]["message"], answer
        waiter.close()
        assert not d.socket.exists()
    finally:
        d.stop()


def test_setup_timeout_gives_clear_error(workdir: Path) -> None:
    d = Daemon(workdir, "o", ["--port-setup-timeout", "2"]).start()
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)   # accepts, never answers
    silent.bind(str(workdir / "silent.sock"))
    silent.listen(4)
    try:
        d.call("add-switch", name="br0")
        waiter = Rpc(d.socket, timeout=20.0)
        start = time.monotonic()
        send_request(waiter, 3, "add-port", switch="br0", name="vc",
                     spec=f"virtio-user:client,path={workdir}/silent.sock")
        time.sleep(0.5)
        assert answer_time(d, "version") < 1.0
        answer = read_answer(waiter)
        took = time.monotonic() - start
        assert answer["id"] == 3, answer
        assert answer["error"]["code"] == DEVICE
        assert "did not finish within 2 s" in answer["error"]["message"], answer
        assert 1.5 < took < 6.0, took
        waiter.close()
        # The daemon goes on working, and the name is free again.
        assert d.call("version")["protocol"] == 1
        assert d.call("add-port", switch="br0", name="vc", spec="null")["name"] == "vc"
    finally:
        silent.close()
        assert d.stop() == 0


def test_del_switch_cancels_pending_setup(daemon: Daemon, workdir: Path) -> None:
    sock = workdir / "vu.sock"
    daemon.call("add-switch", name="br0")
    waiter = Rpc(daemon.socket, timeout=20.0)
    send_request(waiter, 5, "add-port", switch="br0", name="vu",
                 spec=f"virtio-user:server,path={sock}")
    wait_for(sock.exists, 10)
    daemon.call("del-switch", name="br0")
    answer = read_answer(waiter)
    assert answer["id"] == 5 and "cancelled" in answer["error"]["message"], answer
    waiter.close()
    assert daemon.call("list-switches") == [] and daemon.call("list-ports") == []
    daemon.call("add-switch", name="br0")
    assert daemon.call("add-port", switch="br0", name="vu", spec="null")["name"] == "vu"
