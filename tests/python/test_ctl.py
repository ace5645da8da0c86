"""sluicectl's and the RPC client's pure parts: argv to JSON-RPC request, request and answer
lines, the text people read, and the exit statuses. No daemon: the end-to-end tests are in
tests/functional/."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from sluice.ctl import (
    VERBS,
    Exit,
    accounting_check,
    build_request,
    execute,
    format_learn_settings,
    format_ports,
    format_result,
    format_show,
    format_stats,
    format_switches,
    main,
    make_parser,
    nonzero_drops,
    resolve_socket,
    table,
)
from sluice.rpc import (
    DEFAULT_SOCKET,
    ConnectError,
    ProtocolError,
    RpcClient,
    RpcError,
    decode_answer,
    default_socket,
    encode_request,
)

REASONS = ["tx_full", "link_down", "unpatched", "port_removed", "malformed", "hairpin", "vlan",
           "no_match", "action_drop", "reserved_multicast", "storm", "meter", "ttl_expired",
           "controller_queue_full", "group_no_live_bucket", "mtu_exceeded", "vxlan_no_tunnel",
           "port_down", "port_no_recv", "port_no_fwd", "port_no_packet_in"]
REPO = Path(__file__).resolve().parents[2]

# ---- argv -> (method, params) ----

REQUESTS: list[tuple[list[str], str, dict[str, Any]]] = [
    (["version"], "version", {}),
    (["add-switch", "br0"], "add-switch", {"name": "br0", "mode": "patch"}),
    (["add-switch", "br0", "--mode", "learn"], "add-switch", {"name": "br0", "mode": "learn"}),
    (["add-switch", "--mode", "no-such-mode", "br0"], "add-switch",
     {"name": "br0", "mode": "no-such-mode"}),                    # the daemon validates
    (["del-switch", "br0"], "del-switch", {"name": "br0"}),
    (["list-switches"], "list-switches", {}),
    (["add-port", "br0", "vm1", "vhost-user:server,path=/tmp/vm1.sock"], "add-port",
     {"switch": "br0", "name": "vm1", "spec": "vhost-user:server,path=/tmp/vm1.sock"}),
    (["add-port", "br0", "nic0", "pci:0000:03:00.0"], "add-port",
     {"switch": "br0", "name": "nic0", "spec": "pci:0000:03:00.0"}),
    (["del-port", "br0", "vm1"], "del-port", {"switch": "br0", "name": "vm1"}),
    (["patch", "br0", "a", "b"], "patch", {"switch": "br0", "port1": "a", "port2": "b"}),
    (["unpatch", "br0", "a"], "unpatch", {"switch": "br0", "port": "a"}),
    (["list-ports"], "list-ports", {}),
    (["list-ports", "br0"], "list-ports", {"switch": "br0"}),
    (["show"], "show", {}),
    (["stats"], "stats", {}),
    (["stats", "br0"], "stats", {"switch": "br0"}),
    (["stats", "--port", "a"], "stats", {"port": "a"}),
    (["stats", "br0", "--port", "a"], "stats", {"switch": "br0", "port": "a"}),
    (["get-stats", "br0"], "stats", {"switch": "br0"}),
    (["clear-stats"], "clear-stats", {}),
    (["clear-stats", "br0"], "clear-stats", {"switch": "br0"}),
    (["add-switch", "br1", "--mode", "learn", "--aging", "60", "--max-entries", "1024"],
     "add-switch", {"name": "br1", "mode": "learn", "aging": 60, "max_entries": 1024}),
    (["set-switch", "br0", "--aging", "0"], "set-switch", {"switch": "br0", "aging": 0}),
    (["set-switch", "br0", "--forward-reserved", "yes"], "set-switch",
     {"switch": "br0", "forward_reserved": True}),
    (["set-switch", "br0", "--forward-reserved", "off", "--aging", "5"], "set-switch",
     {"switch": "br0", "forward_reserved": False, "aging": 5}),
    (["set-port", "br0", "vm1", "mtu=9000"], "set-port",
     {"switch": "br0", "name": "vm1", "mtu": 9000}),
    (["set-port", "br0", "vm1", "storm-pps=1000"], "set-port",
     {"switch": "br0", "name": "vm1", "storm_pps": 1000}),
    (["set-port", "br0", "vm1", "storm_pps=0", "learn_limit=2"], "set-port",
     {"switch": "br0", "name": "vm1", "storm_pps": 0, "learn_limit": 2}),
    (["set-port", "br0", "vm1", "vlan-mode=access", "tag=10"], "set-port",
     {"switch": "br0", "name": "vm1", "vlan_mode": "access", "tag": 10}),
    (["set-port", "br0", "up", "vlan-mode=trunk", "trunks=0,10,100-200", "learn-limit=5"],
     "set-port", {"switch": "br0", "name": "up", "vlan_mode": "trunk",
                  "trunks": "0,10,100-200", "learn_limit": 5}),
    (["fdb-show", "br0"], "fdb-show", {"switch": "br0"}),
    (["fdb-add", "br0", "02:00:00:00:00:01", "vm1"], "fdb-add",
     {"switch": "br0", "mac": "02:00:00:00:00:01", "port": "vm1"}),
    (["fdb-add", "br0", "02:00:00:00:00:01", "vm1", "vlan", "10"], "fdb-add",
     {"switch": "br0", "mac": "02:00:00:00:00:01", "port": "vm1", "vlan": 10}),
    (["fdb-del", "br0", "02:00:00:00:00:01", "vlan", "10"], "fdb-del",
     {"switch": "br0", "mac": "02:00:00:00:00:01", "vlan": 10}),
    (["fdb-flush", "br0"], "fdb-flush", {"switch": "br0"}),
    (["fdb-flush", "br0", "vm1"], "fdb-flush", {"switch": "br0", "port": "vm1"}),
    (["capture", "br0", "vm1", "-w", "/tmp/x.pcapng"], "capture",
     {"switch": "br0", "port": "vm1", "file": "/tmp/x.pcapng", "count": 1000,
      "direction": "both"}),
    (["capture", "br0", "vm1", "-w", "x", "--count", "0", "--duration", "2.5", "--direction",
      "rx"], "capture", {"switch": "br0", "port": "vm1", "file": "x", "count": 0,
                         "duration": 2.5, "direction": "rx"}),
    (["metrics"], "metrics", {}),
    (["metrics", "--listen", "127.0.0.1:9410"], "metrics", {"listen": "127.0.0.1:9410"}),
    (["add-switch", "br2", "--mode", "flow"], "add-switch", {"name": "br2", "mode": "flow"}),
    (["add-flow", "br2", "priority=1,in_port=a,actions=output:b"], "add-flow",
     {"switch": "br2", "flow": "priority=1,in_port=a,actions=output:b"}),
    (["mod-flows", "br2", "in_port=a,actions=drop"], "mod-flows",
     {"switch": "br2", "flow": "in_port=a,actions=drop"}),
    (["mod-flows", "br2", "--strict", "priority=1,in_port=a,actions=drop"], "mod-flows",
     {"switch": "br2", "flow": "priority=1,in_port=a,actions=drop", "strict": True}),
    (["del-flows", "br2"], "del-flows", {"switch": "br2"}),
    (["del-flows", "br2", "in_port=a", "--strict"], "del-flows",
     {"switch": "br2", "flow": "in_port=a", "strict": True}),
    (["dump-flows", "br2", "table=1"], "dump-flows", {"switch": "br2", "flow": "table=1"}),
    (["add-group", "br2", "group_id=1,type=all,bucket=output:a"], "add-group",
     {"switch": "br2", "group": "group_id=1,type=all,bucket=output:a"}),
    (["mod-group", "br2", "group_id=1,type=all,bucket=output:b"], "mod-group",
     {"switch": "br2", "group": "group_id=1,type=all,bucket=output:b"}),
    (["del-groups", "br2", "group_id=1"], "del-groups", {"switch": "br2", "group": "group_id=1"}),
    (["dump-groups", "br2"], "dump-groups", {"switch": "br2"}),
    (["add-meter", "br2", "meter=1,pktps,bands=type=drop,rate=10"], "add-meter",
     {"switch": "br2", "meter": "meter=1,pktps,bands=type=drop,rate=10"}),
    (["mod-meter", "br2", "meter=1,pktps,bands=type=drop,rate=20"], "mod-meter",
     {"switch": "br2", "meter": "meter=1,pktps,bands=type=drop,rate=20"}),
    (["del-meters", "br2"], "del-meters", {"switch": "br2"}),
    (["dump-meters", "br2"], "dump-meters", {"switch": "br2"}),
    (["trace", "br2", "in_port=a,tcp,tp_dst=80"], "trace",
     {"switch": "br2", "packet": "in_port=a,tcp,tp_dst=80"}),
    (["packet-ins", "br2", "--max", "3"], "packet-ins", {"switch": "br2", "max": 3}),
    (["flows-removed", "br2"], "flows-removed", {"switch": "br2"}),
    (["set-controller", "br2", "tcp:127.0.0.1:6653", "tcp:10.0.0.1"], "set-controller",
     {"switch": "br2", "targets": ["tcp:127.0.0.1:6653", "tcp:10.0.0.1"]}),
    (["set-controller", "br2", "ssl:10.0.0.1", "--ssl-key", "k", "--ssl-cert", "c",
      "--ssl-ca", "a"], "set-controller",
     {"switch": "br2", "targets": ["ssl:10.0.0.1"], "ssl_key": "k", "ssl_cert": "c",
      "ssl_ca": "a"}),
    (["set-controller", "br2"], "set-controller", {"switch": "br2", "targets": []}),
    (["del-controller", "br2"], "del-controller", {"switch": "br2"}),
    (["get-controller", "br2"], "get-controller", {"switch": "br2"}),
    (["set-datapath-id", "br2", "0xa1"], "set-datapath-id",
     {"switch": "br2", "datapath_id": "0xa1"}),
    (["set-fail-mode", "br2", "standalone"], "set-fail-mode",
     {"switch": "br2", "mode": "standalone"}),
    (["show-rxqs"], "show-rxqs", {}),
    (["show-rxqs", "vm1"], "show-rxqs", {"port": "vm1"}),
    (["set-rxq", "vm1", "1", "0", "--pin"], "set-rxq",
     {"port": "vm1", "queue": 1, "worker": 0, "pin": True}),
    (["rebalance", "--dry-run"], "rebalance", {"dry_run": True}),
    (["set-rebalance", "auto=yes", "interval=10"], "set-rebalance",
     {"auto": True, "interval": 10}),
    (["set-rebalance", "move-gap-us=200"], "set-rebalance", {"move_gap_us": 200}),
]


def test_rule_files_are_read_whole(tmp_path: Path) -> None:
    rules = tmp_path / "rules.txt"
    rules.write_text("# web\npriority=1,tcp,tp_dst=80,actions=output:b\n\n")
    for verb in ("add-flows", "replace-flows"):
        assert build_request(make_parser().parse_args([verb, "br2", str(rules)])) == (
            verb, {"switch": "br2", "flows": ["# web", "priority=1,tcp,tp_dst=80,"
                                              "actions=output:b", ""]})
    with pytest.raises(ValueError, match="cannot read"):
        build_request(make_parser().parse_args(["add-flows", "br2", str(tmp_path / "no")]))


@pytest.mark.parametrize(("argv", "method", "params"), REQUESTS)
def test_argv_to_request(argv: list[str], method: str, params: dict[str, str]) -> None:
    assert build_request(make_parser().parse_args(argv)) == (method, params)


def test_every_verb_has_a_request_test() -> None:
    tested = {argv[0] for argv, _, _ in REQUESTS} | {"add-flows", "replace-flows"}
    names = {v.name for v in VERBS} | {a for v in VERBS for a in v.aliases}
    assert tested == names
    assert {v.name for v in VERBS} == {
        "version", "add-switch", "del-switch", "list-switches", "add-port", "del-port",
        "patch", "unpatch", "list-ports", "show", "stats", "clear-stats", "set-switch",
        "set-port", "fdb-show", "fdb-add", "fdb-del", "fdb-flush", "capture", "metrics",
        "add-flow", "add-flows", "replace-flows", "mod-flows", "del-flows", "dump-flows",
        "add-group", "mod-group", "del-groups", "dump-groups", "add-meter", "mod-meter",
        "del-meters", "dump-meters", "trace", "packet-ins", "flows-removed",
        "set-controller", "del-controller", "get-controller", "set-datapath-id",
        "set-fail-mode", "show-rxqs", "set-rxq", "rebalance", "set-rebalance"}


@pytest.mark.parametrize("argv", [
    ["--json", "show"], ["show", "--json"], ["--json", "stats", "br0", "--json"],
    ["stats", "br0", "--json", "--port", "a"], ["--json", "add-switch", "br0"],
])
def test_json_before_or_after_the_verb(argv: list[str]) -> None:
    assert make_parser().parse_args(argv).json is True


@pytest.mark.parametrize("argv", [["show"], ["stats", "br0"], ["add-port", "s", "p", "tap"]])
def test_no_json_by_default(argv: list[str]) -> None:
    assert make_parser().parse_args(argv).json is False


def test_global_options() -> None:
    args = make_parser().parse_args(["--socket", "/tmp/s.sock", "--timeout", "2.5", "show"])
    assert (args.socket, args.timeout) == ("/tmp/s.sock", 2.5)
    args = make_parser().parse_args(["show"])
    assert (args.socket, args.timeout) == (None, None)   # main() picks 30 or 120 s


@pytest.mark.parametrize("argv", [
    [], ["no-such-verb"], ["add-port", "br0"], ["add-port", "br0", "vm1", "tap", "extra"],
    ["add-switch"], ["del-port", "br0"], ["patch", "br0", "a"], ["unpatch", "br0"],
    ["version", "extra"], ["stats", "--no-such-option"], ["--timeout", "-1", "show"],
    ["--timeout", "soon", "show"], ["--timeout", "nan", "show"], ["--jso", "show"],
    ["add-switch", "br0", "--aging", "-1"], ["add-switch", "br0", "--max-entries", "many"],
    ["set-port", "br0", "vm1"], ["set-port", "br0", "vm1", "vlan=10"],
    ["set-port", "br0", "vm1", "tag=ten"], ["fdb-add", "br0", "02:00:00:00:00:01", "vm1", "10"],
    ["fdb-del", "br0", "02:00:00:00:00:01", "vlan", "x"], ["fdb-show"],
    ["set-switch", "br0", "--forward-reserved", "maybe"],
    ["set-port", "br0", "vm1", "storm-pps=fast"], ["set-port", "br0", "vm1", "storm-pps=-1"],
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == Exit.USAGE == 2
    captured = capsys.readouterr()
    assert "usage: sluicectl" in captured.err and captured.out == ""


@pytest.mark.parametrize("verb", [v.name for v in VERBS])
def test_help_on_every_verb(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([verb, "--help"]) == Exit.OK
    out = capsys.readouterr().out
    assert out.startswith(f"usage: sluicectl {verb}")
    assert f"examples:\n  sluicectl {verb}" in out


def test_help_on_the_tool(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == Exit.OK
    out = capsys.readouterr().out
    for verb in VERBS:
        assert re.search(rf"^    {re.escape(verb.name)}\b", out, re.M), verb.name
    assert "--socket PATH" in out and "exit status" in out


def test_socket_option_then_environment_then_default() -> None:
    env = {"SLUICE_SOCKET": "/env.sock"}
    assert resolve_socket("/opt.sock", env) == ("/opt.sock", "given by --socket")
    assert resolve_socket(None, env) == ("/env.sock", "from $SLUICE_SOCKET")
    assert resolve_socket(None, {}) == (DEFAULT_SOCKET, "the default socket")
    assert resolve_socket(None, {"SLUICE_SOCKET": ""})[0] == DEFAULT_SOCKET
    assert DEFAULT_SOCKET == "/run/sluice/sluiced.sock"
    assert default_socket(env) == "/env.sock" and default_socket({}) == DEFAULT_SOCKET


# ---- request and answer lines ----

def test_request_line() -> None:
    line = encode_request("add-port", {"switch": "br0", "name": "vm1",
                                       "spec": "tap:name=a\nb"}, 7)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"jsonrpc": "2.0", "id": 7, "method": "add-port",
                                "params": {"switch": "br0", "name": "vm1",
                                           "spec": "tap:name=a\nb"}}
    assert json.loads(encode_request("show", None, 1))["params"] == {}


def test_notification_line_has_no_id() -> None:
    assert "id" not in json.loads(encode_request("clear-stats", {}, None))


def test_answer_result() -> None:
    line = b'{"jsonrpc":"2.0","id":3,"result":{"name":"br0","mode":"patch"}}\n'
    assert decode_answer(line, 3) == {"name": "br0", "mode": "patch"}
    assert decode_answer(b'{"jsonrpc":"2.0","id":4,"result":null}\n', 4) is None


@pytest.mark.parametrize("answer_id", [5, None])
def test_answer_error(answer_id: int | None) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": answer_id,
                       "error": {"code": -32000, "message": "no switch named 'nope'"}})
    with pytest.raises(RpcError) as e:
        decode_answer(line.encode() + b"\n", 5)
    assert (e.value.code, e.value.message, e.value.name) == (
        -32000, "no switch named 'nope'", "not found")
    assert str(e.value) == "no switch named 'nope' (code -32000)"


@pytest.mark.parametrize(("line", "words"), [
    (b"", "without answering"),
    (b'{"jsonrpc":"2.0","id":1,"res', "middle of an answer (after 28 bytes)"),
])
def test_connection_closed_before_the_whole_answer(line: bytes, words: str) -> None:
    with pytest.raises(ConnectError) as e:
        decode_answer(line, 1, "/x.sock")
    assert not isinstance(e.value, ProtocolError)
    assert words in str(e.value) and "/x.sock" in str(e.value)
    assert e.value.stage == "lost"


@pytest.mark.parametrize("line", [
    b"hello\n", b"\xff\xfe\n", b"[1,2]\n", b'{"id":1,"result":{}}\n',
    b'{"jsonrpc":"2.0","id":2,"result":{}}\n', b'{"jsonrpc":"2.0","id":1}\n',
    b'{"jsonrpc":"2.0","id":1,"error":"bad"}\n',
    b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}\n',
    b'{"jsonrpc":"2.0","id":9,"error":{"code":-32000,"message":"m"}}\n',
])
def test_answers_that_make_no_sense(line: bytes) -> None:
    with pytest.raises(ProtocolError) as e:
        decode_answer(line, 1)
    assert e.value.stage == "answer"


def test_client_without_daemon(tmp_path: Path) -> None:
    path = tmp_path / "nobody.sock"
    with pytest.raises(ConnectError) as e:
        RpcClient(path, timeout=1.0)
    assert str(path) in str(e.value) and "no such socket" in str(e.value)
    assert e.value.stage == "connect" and e.value.socket_path == str(path)


# ---- text for people ----

def test_table_aligns_numbers_right() -> None:
    text = table(["port", "rx"], [["a", 5], ["bb", 12345], ["c", None]], {1})
    assert text.splitlines() == ["port     rx", "a         5", "bb    12345", "c         -"]


def port_stats(name: str, rx: int, forwarded: int, drops: Mapping[str, int], tx: int = 0,
               missed: int = 0, flood_lost: int = 0, flood_gone: int = 0) -> dict[str, Any]:
    all_drops = {r: drops.get(r, 0) for r in REASONS}
    return {"name": name, "rx_packets": rx, "rx_bytes": rx * 64, "tx_packets": tx,
            "tx_bytes": tx * 64, "forwarded": forwarded, "dropped": sum(all_drops.values()),
            "drops": all_drops, "rx_missed": missed, "flood_tx_dropped": flood_lost,
            "flood_to_removed": flood_gone}


def stats_result(*switches: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"switches": [{"name": n, "mode": "patch", "ports": ports} for n, ports in switches],
            "workers": [], "drop_reasons": REASONS, "monotonic_ns": 1}


def test_stats_table() -> None:
    result = stats_result(("br0", [
        port_stats("vm1", 1000, 988, {"tx_full": 12}),
        port_stats("vm2", 20, 17, {"link_down": 1, "unpatched": 2}, tx=988, missed=4,
                   flood_lost=5, flood_gone=1)]))
    lines = format_stats(result).splitlines()
    assert lines[0] == "switch br0 (mode patch)"
    header, vm1, vm2, total, check = lines[1:]
    assert header.split() == ["port", "rx", "pkts", "rx", "bytes", "tx", "pkts", "tx", "bytes",
                              "forwarded", "dropped", "rx", "missed", "flood", "lost", "flood",
                              "to", "gone", "drops"]
    assert vm1.split() == ["vm1", "1000", "64000", "0", "0", "988", "12", "0", "0", "0",
                           "tx_full=12"]
    assert vm2.split() == ["vm2", "20", "1280", "988", "63232", "17", "3", "4", "5", "1",
                           "link_down=1", "unpatched=2"]
    assert total.split() == ["(total)", "1020", "65280", "988", "63232", "1005", "15", "4",
                             "5", "1", "tx_full=12", "link_down=1", "unpatched=2"]
    # Numbers are right-aligned: each number column ends where its header ends.
    for title in ("rx pkts", "rx bytes", "tx pkts", "tx bytes", "forwarded", "dropped",
                  "rx missed", "flood lost", "flood to gone"):
        end = header.index(title) + len(title)
        for row in (vm1, vm2, total):
            assert row[end - 1] != " " and row[end] == " ", (title, row)
    assert check == "accounting br0: rx 1020 = forwarded 1005 + dropped 15: OK"


def test_stats_accounting_shows_the_difference() -> None:
    result = stats_result(("br0", [port_stats("vm1", 1000, 900, {"tx_full": 68}),
                                   port_stats("vm2", 10, 10, {})]))
    check = format_stats(result).splitlines()[-1]
    assert check.startswith("accounting br0: rx 1010 != forwarded 910 + dropped 68: ")
    assert "differs by +32 (vm1 +32)" in check and "OK" not in check


def test_accounting_flags_drop_reasons_that_do_not_add_up() -> None:
    port = port_stats("vm1", 10, 5, {"malformed": 5})
    assert "do not add up" not in accounting_check("br0", [port])
    port["dropped"] = 5
    port["drops"]["malformed"] = 4
    assert accounting_check("br0", [port]).endswith(
        ": OK; drop reasons do not add up to dropped on vm1")


def test_stats_one_table_per_switch() -> None:
    text = format_stats(stats_result(("br0", [port_stats("a", 1, 1, {})]), ("br1", [])))
    assert text.count("switch br") == 2
    assert "switch br1 (mode patch)\nno ports" in text
    assert text.count("accounting ") == 1
    assert format_stats(stats_result()) == "no switches"


def test_drop_reasons_are_the_same_everywhere() -> None:
    """The daemon's list (src/stats.h), the protocol's table and the CLI reference name the
    same reasons in the same order, and the stats table prints each one."""
    header = (REPO / "src" / "stats.h").read_text()
    assert re.findall(r'X\(\w+, "(\w+)"\)', header) == REASONS
    protocol = (REPO / "docs" / "protocol.md").read_text().split("## Drop reasons", 1)[1]
    assert re.findall(r"^\| `(\w+)` \|", protocol, re.M)[:len(REASONS)] == REASONS
    cli = " ".join((REPO / "docs" / "cli.md").read_text().split())
    assert all(f"`{r}`" in cli for r in REASONS)
    every = {r: i + 1 for i, r in enumerate(REASONS)}
    row = format_stats(stats_result(("br0", [port_stats("a", 99, 33, every)]))).splitlines()[2]
    assert row.split()[10:] == [f"{r}={n}" for r, n in every.items()]


def test_learn_settings_in_show() -> None:
    lines = "\n".join(format_learn_settings({
        "aging": 300, "entries": 2, "max_entries": 1024, "forward_reserved": False,
        "port_settings": {"vm1": {"vlan_mode": "trunk", "trunks": "all", "learn_limit": 0,
                                  "storm_pps": 500, "entries": 2}}})).splitlines()
    assert lines[0] == "    aging 300 s, 2 of 1024 addresses, reserved multicast dropped"
    assert lines[1].split() == ["port", "vlans", "learn", "limit", "storm", "pps", "learned"]
    assert lines[2].split() == ["vm1", "trunk", "all", "-", "500", "2"]


def test_drop_reasons_nonzero_only_in_protocol_order() -> None:
    drops = {"vlan": 2, "tx_full": 1, "link_down": 0, "new_reason": 3}
    assert nonzero_drops(drops, REASONS) == "tx_full=1 vlan=2 new_reason=3"
    assert nonzero_drops({"tx_full": 0}, REASONS) == "-"


def port_object(name: str, peer: str | None, number: int) -> dict[str, Any]:
    return {"name": name, "switch": "br0", "id": number, "generation": 1,
            "spec": f"vhost-user:server,path=/tmp/{name}.sock", "kind": "vhost-user",
            "device": f"net_vhost_p{number}", "ethdev": number - 1, "link": "down",
            "peer": peer, "mac": f"02:00:00:00:00:0{number}", "worker": 0, "mtu": 1500,
            "mtu_set": False}


def test_show() -> None:
    result = {"version": {"version": "0.1.0", "dpdk": "DPDK 22.11.11", "protocol": 1},
              "workers": [{"id": 0, "lcore": 1, "loops": 9, "busy_cycles": 1,
                           "idle_cycles": 3, "packets": 7}],
              "switches": [{"name": "br0", "mode": "patch", "links": [["vm1", "vm2"]],
                            "ports": [port_object("vm1", "vm2", 1),
                                      port_object("vm2", "vm1", 2)]},
                           {"name": "br1", "mode": "patch", "ports": [], "links": []}]}
    lines = format_show(result).splitlines()
    assert lines[0] == "sluiced 0.1.0 (DPDK 22.11.11, protocol 1)"
    assert lines[1] == "switch br0: mode patch, 2 ports"
    assert lines[2].split() == ["port", "id", "kind", "link", "mtu", "peer", "worker", "spec"]
    assert lines[3].split() == ["vm1", "1", "vhost-user", "down", "1500", "vm2", "0",
                                "vhost-user:server,path=/tmp/vm1.sock"]
    assert lines[3].startswith("    vm1")
    assert lines[5] == "    links: vm1 <-> vm2"
    assert lines[6] == "switch br1: mode patch, no ports"
    assert lines[7].split() == ["worker", "lcore", "packets", "loops", "busy", "stalls",
                                "stuck"]
    assert lines[8].split() == ["0", "1", "7", "9", "25.0%", "0", "-"]


def test_show_tunnels() -> None:
    vx = port_object("vx", None, 3) | {
        "kind": "vxlan", "spec": "vxlan:underlay=ul,local_ip=10.0.0.1,remote_ip=10.0.0.2,vni=7",
        "tunnel": {"underlay": "ul", "vni": 7, "remote_mac": "02:00:00:00:00:09",
                   "remote_mac_from": "learned"}}
    waiting = port_object("vy", None, 4) | {
        "kind": "vxlan", "tunnel": {"underlay": "ul", "vni": 8, "remote_mac": None,
                                    "remote_mac_from": "learned"}}
    result = {"workers": [], "switches": [{"name": "br0", "mode": "learn",
                                           "ports": [vx, waiting]}]}
    lines = format_show(result).splitlines()
    assert "    tunnel vx: over ul, VNI 7, next hop 02:00:00:00:00:09 (learned)" in lines
    assert ("    tunnel vy: over ul, VNI 8, next hop unknown (asking by ARP: link down)"
            in lines)


def test_lists() -> None:
    switches = [{"name": "br0", "mode": "patch", "ports": ["vm1", "vm2"]},
                {"name": "br1", "mode": "patch", "ports": []}]
    assert format_switches(switches).splitlines() == [
        "switch  mode   ports", "br0     patch  vm1,vm2", "br1     patch  -"]
    assert format_switches([]) == "no switches"
    lines = format_ports([port_object("vm1", None, 1)]).splitlines()
    assert lines[0].split() == ["port", "switch", "id", "kind", "link", "peer", "worker",
                                "mac", "spec"]
    assert lines[1].split() == ["vm1", "br0", "1", "vhost-user", "down", "-", "0",
                                "02:00:00:00:00:01", "vhost-user:server,path=/tmp/vm1.sock"]
    assert format_ports([]) == "no ports"


@pytest.mark.parametrize(("verb", "result", "text"), [
    ("version", {"version": "0.1.0", "dpdk": "DPDK 22.11.11", "protocol": 1},
     "sluiced 0.1.0 (DPDK 22.11.11, protocol 1)"),
    ("add-switch", {"name": "br0", "mode": "patch"}, "switch br0: created, mode patch"),
    ("add-port", port_object("vm1", None, 1),
     "port vm1: created on br0, number 1, vhost-user, link down"),
    ("del-switch", {}, ""), ("del-port", {}, ""), ("patch", {}, ""), ("unpatch", {}, ""),
    ("clear-stats", {}, ""), ("get-stats", stats_result(), "no switches"),
])
def test_result_text(verb: str, result: Any, text: str) -> None:
    assert format_result(verb, result) == text


# ---- exit statuses ----

def run(argv: list[str], outcome: Any) -> tuple[int, str, str, list[tuple[str, Any]]]:
    """Runs ARGV through execute() with a transport that returns OUTCOME, or raises it."""
    sent: list[tuple[str, Any]] = []

    def transport(method: str, params: Mapping[str, Any]) -> Any:
        sent.append((method, dict(params)))
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    out, err = StringIO(), StringIO()
    args: argparse.Namespace = make_parser().parse_args(argv)
    status = execute(args, transport, "given by --socket", out, err)
    return status, out.getvalue(), err.getvalue(), sent


def test_success_prints_text() -> None:
    status, out, err, sent = run(["add-switch", "br0"], {"name": "br0", "mode": "patch"})
    assert (status, out, err) == (Exit.OK, "switch br0: created, mode patch\n", "")
    assert sent == [("add-switch", {"name": "br0", "mode": "patch"})]


def test_success_with_nothing_to_say_prints_nothing() -> None:
    assert run(["del-switch", "br0"], {})[:3] == (Exit.OK, "", "")


@pytest.mark.parametrize("argv", [["--json", "list-switches"], ["list-switches", "--json"]])
def test_json_prints_the_raw_result(argv: list[str]) -> None:
    result = [{"name": "br0", "mode": "patch", "ports": ["vm1"]}]
    status, out, _, _ = run(argv, result)
    assert status == Exit.OK and out == json.dumps(result, indent=2) + "\n"
    assert run(["--json", "del-switch", "br0"], {})[1] == "{}\n"


def test_daemon_error_exits_1() -> None:
    status, out, err, _ = run(["del-switch", "nope"],
                              RpcError(-32000, "no switch named 'nope'"))
    assert (status, out) == (Exit.ERROR, "")
    assert err == "sluicectl: error: no switch named 'nope' (code -32000)\n"


def test_unreachable_exits_3_and_says_which_socket() -> None:
    e = ConnectError("cannot reach sluiced at /x.sock: no such socket", "/x.sock")
    status, out, err, _ = run(["show"], e)
    assert (status, out) == (Exit.UNREACHABLE, "")
    assert err.startswith("sluicectl: cannot reach sluiced at /x.sock: no such socket; ")
    assert "given by --socket" in err and "--socket PATH" in err and "running" in err


@pytest.mark.parametrize(("error", "words"), [
    (ConnectError("sluiced at /x.sock closed the connection in the middle of an answer",
                  "/x.sock", "lost"), "did sluiced stop or crash"),
    (ConnectError("sluiced at /x.sock did not answer 'show' within 1 s", "/x.sock",
                  "timeout"), "--timeout"),
    (ProtocolError("sluiced at /x.sock answered with a line that is not JSON", "/x.sock"),
     "is that sluiced's socket"),
])
def test_no_usable_answer_exits_3(error: ConnectError, words: str) -> None:
    status, out, err, _ = run(["show"], error)
    assert (status, out) == (Exit.UNREACHABLE, "")
    assert str(error) in err and words in err


def test_unexpected_answer_shape_falls_back_to_json() -> None:
    status, out, err, _ = run(["list-ports"], {"not": "a list"})
    assert status == Exit.OK
    assert json.loads(out) == {"not": "a list"} and "warning" in err


def test_main_without_daemon_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_SOCKET", str(tmp_path / "env.sock"))
    assert main(["show"]) == Exit.UNREACHABLE == 3
    assert f"{tmp_path}/env.sock" in capsys.readouterr().err
    assert main(["--socket", str(tmp_path / "opt.sock"), "version"]) == Exit.UNREACHABLE
    assert f"{tmp_path}/opt.sock" in capsys.readouterr().err


def test_show_lists_pools() -> None:
    result = {"version": {"version": "0.1.0", "dpdk": "DPDK 22.11.11", "protocol": 1},
              "workers": [], "switches": [],
              "pools": [{"name": "sluice_mbuf_s0_0", "socket": 0, "size": 32767,
                         "in_use": 2048, "reserved": 4608, "alloc_failures": 3}]}
    lines = format_show(result).splitlines()
    assert lines[-2].split() == ["pool", "socket", "size", "in", "use", "reserved", "alloc",
                                 "failures"]
    assert lines[-1].split() == ["sluice_mbuf_s0_0", "0", "32767", "2048", "4608", "3"]
