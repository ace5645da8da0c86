"""The pure parts of `sluicectl metrics`: the metric families made from `stats` and `show`
answers (read back with prometheus_client's parser), sluice_up 0, --listen's format. No
daemon: tests/functional/test_metrics.py runs the real thing."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sluice.metrics import families, parse_listen, run
from sluice.rpc import ConnectError

REASONS = ["tx_full", "link_down", "unpatched"]
STATS: dict[str, Any] = {
    "switches": [
        {"name": "br0", "mode": "patch", "rx_packets": 15, "tx_packets": 12, "forwarded": 12,
         "dropped": 3, "drops": {"tx_full": 0, "link_down": 0, "unpatched": 3},
         "flood_tx_dropped": 0,
         "ports": [{"name": "a", "rx_packets": 10, "rx_bytes": 600, "tx_packets": 5,
                    "tx_bytes": 300, "forwarded": 7, "dropped": 3,
                    "drops": {"tx_full": 0, "link_down": 0, "unpatched": 3},
                    "flood_tx_dropped": 0, "rx_missed": 4},
                   {"name": "b", "rx_packets": 5, "rx_bytes": 300, "tx_packets": 7,
                    "tx_bytes": 420, "forwarded": 5, "dropped": 0,
                    "drops": {"tx_full": 0, "link_down": 0, "unpatched": 0},
                    "flood_tx_dropped": 0, "rx_missed": 0}]},
        {"name": "l2", "mode": "learn", "rx_packets": 0, "tx_packets": 0, "forwarded": 0,
         "dropped": 0, "drops": {}, "flood_tx_dropped": 2, "ports": [], "entries": 3,
         "learn": {"learned": 9, "moved": 1}}],
    "workers": [{"id": 0, "lcore": 1, "cpu": 1, "loops": 100, "busy_cycles": 70,
                 "idle_cycles": 30, "packets": 15, "sleeps": 4, "rx_queues": 2}],
    "drop_reasons": REASONS, "monotonic_ns": 1}
SHOW: dict[str, Any] = {
    "version": {"version": "0.1.0", "dpdk": "DPDK 22.11.11", "protocol": 1},
    "switches": [{"name": "br0", "mode": "patch",
                  "ports": [{"name": "a", "kind": "tap", "link": "up"},
                            {"name": "b", "kind": "tap", "link": "down"}]},
                 {"name": "l2", "mode": "learn", "ports": [], "aging": 300,
                  "max_entries": 1024}]}


def samples(stats: dict[str, Any], show: dict[str, Any]) -> dict[tuple[str, frozenset[Any]],
                                                                 float]:
    """Every sample, by name and labels, after a round trip through the text format."""
    out = StringIO()
    run(None, lambda method, params: {"stats": stats, "show": show}[method], out)
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(out.getvalue()) for s in fam.samples}


def test_metric_families() -> None:
    got = samples(STATS, SHOW)
    ab = frozenset({("switch", "br0"), ("port", "a")})
    assert got[("sluice_up", frozenset())] == 1
    assert got[("sluice_port_rx_packets_total", ab)] == 10
    assert got[("sluice_port_rx_bytes_total", ab)] == 600
    assert got[("sluice_port_tx_bytes_total", ab)] == 300
    assert got[("sluice_port_forwarded_packets_total", ab)] == 7
    assert got[("sluice_port_rx_missed_packets_total", ab)] == 4
    for reason in REASONS:
        assert got[("sluice_port_dropped_packets_total", ab | {("reason", reason)})] == (
            3 if reason == "unpatched" else 0)
    assert got[("sluice_port_link_up", ab | {("kind", "tap")})] == 1
    sw = frozenset({("switch", "br0"), ("mode", "patch")})
    assert got[("sluice_switch_rx_packets_total", sw)] == 15
    assert got[("sluice_switch_dropped_packets_total", sw | {("reason", "unpatched")})] == 3
    l2 = frozenset({("switch", "l2")})
    assert got[("sluice_switch_flood_tx_dropped_packets_total",
                frozenset({("switch", "l2"), ("mode", "learn")}))] == 2
    assert got[("sluice_learn_entries", l2)] == 3
    assert got[("sluice_learn_max_entries", l2)] == 1024
    assert got[("sluice_learn_aging_seconds", l2)] == 300
    assert got[("sluice_learn_learned_total", l2)] == 9
    w = frozenset({("worker", "0"), ("lcore", "1"), ("cpu", "1")})
    assert got[("sluice_worker_busy_cycles_total", w)] == 70
    assert got[("sluice_worker_idle_cycles_total", w)] == 30
    assert got[("sluice_worker_packets_total", w)] == 15
    assert got[("sluice_info", frozenset({("version", "0.1.0"), ("dpdk", "DPDK 22.11.11"),
                                          ("protocol", "1")}))] == 1
    assert not any(name.startswith("sluice_pool_") for name, _ in got)


def test_pools_when_show_has_them() -> None:
    show = {**SHOW, "pools": [{"name": "mbuf_pool_0", "size": 32767, "in_use": 1100,
                               "alloc_failures": 2}, {"size": 8}]}
    got = samples(STATS, show)
    p0 = frozenset({("pool", "mbuf_pool_0")})
    assert got[("sluice_pool_size_mbufs", p0)] == 32767
    assert got[("sluice_pool_in_use_mbufs", p0)] == 1100
    assert got[("sluice_pool_alloc_failures_total", p0)] == 2
    assert got[("sluice_pool_size_mbufs", frozenset({("pool", "1")}))] == 8


def test_daemon_down_is_up_0() -> None:
    def down(method: str, params: Any) -> Any:
        raise ConnectError("no such socket", "/x.sock")

    out = StringIO()
    assert run(None, down, out) == 0
    fams = list(text_string_to_metric_families(out.getvalue()))
    assert [(f.name, [s.value for s in f.samples]) for f in fams] == [("sluice_up", [0.0])]


def test_families_tolerate_missing_fields() -> None:
    # No switches, no workers, no pools: only the info family, no empty ones.
    assert [f.name for f in families({}, {})] == ["sluice"]


@pytest.mark.parametrize(("text", "want"), [
    ("127.0.0.1:9410", ("127.0.0.1", 9410)), (":9411", ("0.0.0.0", 9411)),
    ("localhost:80", ("localhost", 80))])
def test_parse_listen(text: str, want: tuple[str, int]) -> None:
    assert parse_listen(text) == want


@pytest.mark.parametrize("text", ["9410", "host:", "host:port", "h:70000", "h:0"])
def test_parse_listen_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="ADDR:PORT"):
        parse_listen(text)
