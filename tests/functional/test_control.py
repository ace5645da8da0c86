"""The control socket against bad input: every kind of malformed request and bad port spec
gets the right JSON-RPC error, and the daemon answers normally afterwards."""

from __future__ import annotations

import glob
import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import SLUICED, Daemon, Rpc, RpcError, stop_process

PARSE, INVALID_REQUEST, NO_METHOD, INVALID_PARAMS = -32700, -32600, -32601, -32602
NOT_FOUND, EXISTS, BAD_SPEC, DEVICE, WRONG_STATE = -32000, -32001, -32002, -32003, -32005


def error_of(rpc: Rpc, line: bytes) -> dict:
    answer = rpc.raw(line)
    assert "error" in answer, answer
    return answer["error"]


@pytest.mark.parametrize(("line", "code"), [
    (b"{not json", PARSE),
    (b"[1, 2, 3]", INVALID_REQUEST),
    (b'"just a string"', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 1}', INVALID_REQUEST),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "version"}', INVALID_REQUEST),
    (b'{"id": 1, "method": "version"}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 1, "method": 42}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "version", "params": [1]}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "version"}', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "no-such-verb"}', NO_METHOD),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "version", "method": "show"}', PARSE),
])
def test_malformed_requests(daemon: Daemon, line: bytes, code: int) -> None:
    assert error_of(daemon.rpc, line)["code"] == code
    assert daemon.call("version")["protocol"] == 1


@pytest.mark.parametrize(("method", "params", "code", "words"), [
    ("add-switch", {}, INVALID_PARAMS, "missing parameter 'name'"),
    ("add-switch", {"name": 7}, INVALID_PARAMS, "'name' must be a string"),
    ("add-switch", {"name": "br0", "colour": "red"}, INVALID_PARAMS, "unknown parameter"),
    ("add-switch", {"name": "bad name"}, INVALID_PARAMS, "may hold only"),
    ("add-switch", {"name": "x" * 40}, INVALID_PARAMS, "1 to 31 characters"),
    ("add-switch", {"name": "br9", "mode": "warp"}, INVALID_PARAMS, "unknown mode 'warp'"),
    ("del-switch", {"name": "nope"}, NOT_FOUND, "no switch named 'nope'"),
    ("add-port", {"switch": "nope", "name": "p", "spec": "null"}, NOT_FOUND, "no switch"),
    ("del-port", {"switch": "sw", "name": "nope"}, NOT_FOUND, "no port named 'nope'"),
    ("patch", {"switch": "sw", "port1": "a", "port2": "nope"}, NOT_FOUND, "'nope'"),
    ("patch", {"switch": "sw", "port1": "a", "port2": "a"}, WRONG_STATE, "itself"),
    ("unpatch", {"switch": "sw", "port": "a"}, WRONG_STATE, "not patched"),
    ("stats", {"port": "nope"}, NOT_FOUND, "no port named"),
    ("add-port", {"switch": "sw", "name": "a", "spec": "null"}, EXISTS, "exists"),
    ("add-switch", {"name": "sw"}, EXISTS, "exists"),
])
def test_bad_params(daemon: Daemon, method: str, params: dict, code: int, words: str) -> None:
    daemon.call("add-switch", name="sw")
    daemon.call("add-port", switch="sw", name="a", spec="null")
    with pytest.raises(RpcError) as e:
        daemon.call(method, **params)
    assert e.value.code == code
    assert words in e.value.message
    assert [s["name"] for s in daemon.call("list-switches")] == ["sw"]


@pytest.mark.parametrize(("spec", "code", "words"), [
    ("bogus:x=1", BAD_SPEC, "unknown port kind 'bogus'"),
    ("vhost-user:serv,path=/tmp/x.sock", BAD_SPEC, "'role' must be server or client"),
    ("vhost-user:server", BAD_SPEC, "missing 'path'"),
    ("tap:name=t0,colour=red", BAD_SPEC, "unknown key 'colour'"),
    ("memif:socket=/tmp/m.sock", BAD_SPEC, "missing 'role'"),
    ("memif:client,socket=/tmp/m.sock,rx_queues=2,queues=2", BAD_SPEC,
     "give 'queues' or 'rx_queues'"),
    ("af_packet:iface=nosuchif0", DEVICE, "'iface': no network interface"),
    ("pcap:rx=/nonexistent/in.pcap", DEVICE, "'rx': cannot read"),
    ("pci:zz", BAD_SPEC, "not a PCI address"),
])
def test_bad_specs(daemon: Daemon, spec: str, code: int, words: str) -> None:
    daemon.call("add-switch", name="sw")
    with pytest.raises(RpcError) as e:
        daemon.call("add-port", switch="sw", name="p", spec=spec)
    assert e.value.code == code
    assert words in e.value.message
    assert daemon.call("list-ports") == []
    # The refused spec left nothing behind: the name is free and a good spec works.
    assert daemon.call("add-port", switch="sw", name="p", spec="null")["name"] == "p"


def test_oversized_line_and_notification(daemon: Daemon) -> None:
    rpc = daemon.rpc
    rpc.sock.sendall(b'{"jsonrpc": "2.0", "method": "add-switch", "params": {"name": "n"}}\n')
    assert daemon.call("list-switches")[0]["name"] == "n"   # notification ran, no answer
    other = Rpc(daemon.socket)
    # Long requests are fine (add-flows of many rules): 70 KiB of garbage is a parse error.
    answer = other.raw(b"x" * (70 * 1024))
    assert answer["error"]["code"] == -32700
    # 64 MiB without a newline is too long: an answer, and the connection is closed.
    other.sock.sendall(b"x" * (64 * 1024 * 1024))
    answer = json.loads(other.reader.readline())
    assert answer["error"]["code"] == INVALID_REQUEST
    assert "64 MiB" in answer["error"]["message"]
    assert other.reader.readline() == b""
    other.close()
    assert daemon.call("version")["version"]


def test_pipelined_requests_answered_in_order(daemon: Daemon) -> None:
    lines = b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"add-switch","params":{"name":"s%d"}}\n' % (i, i)
        for i in range(20))
    daemon.rpc.sock.sendall(lines)
    ids = [__import__("json").loads(daemon.rpc.reader.readline())["id"] for _ in range(20)]
    assert ids == list(range(20))
    assert len(daemon.call("list-switches")) == 20


def test_client_vanishing_mid_request(daemon: Daemon) -> None:
    for _ in range(5):
        r = Rpc(daemon.socket)
        r.sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"sh')
        r.close()
    assert daemon.call("version")["protocol"] == 1


def test_socket_mode_and_clean_shutdown(workdir: Path) -> None:
    d = Daemon(workdir, "s").start()
    mode = stat.S_IMODE(os.stat(d.socket).st_mode)
    assert mode == 0o660
    d.call("add-switch", name="br0")
    d.call("add-port", switch="br0", name="vm1",
           spec=f"vhost-user:server,path={workdir}/vm1.sock")
    assert (workdir / "vm1.sock").exists()
    d.call("add-port", switch="br0", name="src", spec="null:rx=1")   # some traffic first
    d.call("add-port", switch="br0", name="sink", spec="null")
    d.call("patch", switch="br0", port1="src", port2="sink")
    time.sleep(0.3)
    assert d.proc is not None
    # The daemon's own clean-up, checked before the fixture's safety net removes anything.
    assert stop_process(d.proc) == 0
    assert glob.glob(f"/dev/hugepages/{d.prefix}*") == []
    assert not d.socket.exists()
    assert not (workdir / "vm1.sock").exists()
    d.stop()


def test_second_daemon_on_same_socket_refused(daemon: Daemon, workdir: Path) -> None:
    second = Daemon(workdir, "d")           # same socket path as the fixture's
    second.prefix += "b"
    second.args[second.args.index("--file-prefix") + 1] = second.prefix
    second.start(wait=False)
    assert second.proc is not None
    assert second.proc.wait(30) != 0
    assert "another sluiced answers" in second.log.read_text()
    second.stop()
    assert daemon.call("version")


def test_config_file(workdir: Path) -> None:
    cfg = workdir / "sluiced.conf"
    cfg.write_text(
        "# two ports patched at start\n"
        '{"method": "add-switch", "params": {"name": "br0"}}\n'
        "\n"
        '{"method": "add-port", "params": {"switch": "br0", "name": "a", "spec": "null"}}\n'
        '{"method": "add-port", "params": {"switch": "br0", "name": "b", "spec": "null"}}\n'
        '{"method": "patch", "params": {"switch": "br0", "port1": "a", "port2": "b"}}\n')
    d = Daemon(workdir, "c", ["--config", str(cfg)]).start()
    try:
        show = d.call("show")
        assert show["switches"][0]["links"] == [["a", "b"]]
    finally:
        assert d.stop() == 0


def test_bad_config_file_stops_with_line_number(workdir: Path) -> None:
    cfg = workdir / "bad.conf"
    cfg.write_text('{"method": "add-switch", "params": {"name": "br0"}}\n'
                   '{"method": "add-port", "params": {"switch": "nope", "name": "a", '
                   '"spec": "null"}}\n')
    d = Daemon(workdir, "b", ["--config", str(cfg)]).start(wait=False)
    assert d.proc is not None
    assert d.proc.wait(30) == 1
    assert "bad.conf:2: no switch named 'nope'" in d.log.read_text()
    d.stop()
    assert not d.socket.exists()


def test_help_and_bad_options() -> None:
    out = subprocess.run([str(SLUICED), "--help"], capture_output=True, text=True, check=True)
    assert "--socket PATH" in out.stdout and "--worker-cpus" in out.stdout
    bad = subprocess.run([str(SLUICED), "--burst", "0"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "--burst must be an integer from 1 to 256" in bad.stderr


def test_long_multibyte_error_gets_one_answer(daemon: Daemon) -> None:
    """An error message cut at its 511-byte limit in the middle of a UTF-8 character still
    makes an answer, and pipelined requests keep one answer each, in order (issue 15)."""
    # "no switch named '" is 17 bytes; one ASCII byte more leaves an odd number of bytes
    # for two-byte characters, so a byte-wise cut would split one.
    name = "x" + "\u00e9" * 300
    lines = b"".join([
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "del-switch",
                    "params": {"name": name}}).encode() + b"\n",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "add-port",
                    "params": {"switch": name, "name": "p", "spec": "null"}}).encode() + b"\n",
        b'{"jsonrpc":"2.0","id":3,"method":"version"}\n'])
    rpc = daemon.rpc
    rpc.sock.sendall(lines)
    answers = [json.loads(rpc.reader.readline()) for _ in range(3)]
    assert [a["id"] for a in answers] == [1, 2, 3]
    message = answers[0]["error"]["message"]
    assert answers[0]["error"]["code"] == NOT_FOUND
    assert message.startswith("no switch named 'x\u00e9\u00e9")
    assert len(message.encode()) <= 511
    assert answers[2]["result"]["protocol"] == 1
