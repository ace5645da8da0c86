"""sluicectl's pure parts: argv to JSON-RPC request, and the tables people read."""

from __future__ import annotations

import pytest

from sluice.ctl import EXIT_USAGE, build_request, format_stats, main, make_parser, table


@pytest.mark.parametrize(("argv", "method", "params"), [
    (["version"], "version", {}),
    (["add-switch", "br0"], "add-switch", {"name": "br0", "mode": "patch"}),
    (["add-switch", "br0", "--mode", "learn"], "add-switch", {"name": "br0", "mode": "learn"}),
    (["del-switch", "br0"], "del-switch", {"name": "br0"}),
    (["add-port", "br0", "vm1", "tap:name=t0"], "add-port",
     {"switch": "br0", "name": "vm1", "spec": "tap:name=t0"}),
    (["del-port", "br0", "vm1"], "del-port", {"switch": "br0", "name": "vm1"}),
    (["patch", "br0", "a", "b"], "patch", {"switch": "br0", "port1": "a", "port2": "b"}),
    (["unpatch", "br0", "a"], "unpatch", {"switch": "br0", "port": "a"}),
    (["list-ports"], "list-ports", {}),
    (["list-ports", "br0"], "list-ports", {"switch": "br0"}),
    (["stats", "br0", "--port", "a"], "stats", {"switch": "br0", "port": "a"}),
    (["get-stats"], "stats", {}),
    (["clear-stats"], "clear-stats", {}),
    (["show"], "show", {}),
])
def test_requests(argv: list[str], method: str, params: dict[str, str]) -> None:
    assert build_request(make_parser().parse_args(argv)) == (method, params)


def test_json_flag_before_or_after_verb() -> None:
    assert make_parser().parse_args(["--json", "show"]).json
    assert make_parser().parse_args(["show", "--json"]).json
    assert not make_parser().parse_args(["show"]).json


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["add-port", "br0"]) == EXIT_USAGE
    assert main(["no-such-verb"]) == EXIT_USAGE
    assert "usage" in capsys.readouterr().err


def test_table_aligns_numbers_right() -> None:
    text = table(["port", "rx"], [["a", "5"], ["bb", "12345"]], {1})
    assert text.splitlines() == ["port     rx", "a         5", "bb    12345"]


def test_stats_table_checks_accounting() -> None:
    port = {"name": "vm1", "rx_packets": 10, "rx_bytes": 640, "tx_packets": 0, "tx_bytes": 0,
            "forwarded": 7, "dropped": 3, "rx_missed": 0,
            "drops": {"tx_full": 3, "link_down": 0}}
    sw = {"name": "br0", "mode": "patch", "rx_packets": 10, "tx_packets": 0, "forwarded": 7,
          "dropped": 3, "drops": {"tx_full": 3, "link_down": 0}, "ports": [port]}
    text = format_stats({"switches": [sw]})
    assert "tx_full=3" in text and "link_down" not in text
    assert "rx = forwarded + dropped: OK" in text
    sw["dropped"] = 1
    assert "differs by 2" in format_stats({"switches": [sw]})
