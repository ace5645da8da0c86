"""`sluicectl metrics`: sluiced's counters for Prometheus, through prometheus_client.

A custom collector asks the daemon for `stats` and `show` on every scrape and turns the
answers into metric families, so the exporter keeps no state that could drift from the
daemon's; a daemon that cannot be reached gives `sluice_up 0` and nothing else, not an
error page. Names follow Prometheus' conventions: `sluice_` first, the unit, `_total` on
counters (docs/operations.md lists them all).

`families(stats, show)` is pure and tested without a daemon; `SluiceCollector` and `run` do
the asking and the serving.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import generate_latest, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from sluice.rpc import ConnectError, RpcError

Json = Any
Transport = Callable[[str, Mapping[str, Any]], Json]

# Port and switch counters of `stats`: (key, metric name without sluice_<scope>_, help).
TRAFFIC = (
    ("rx_packets", "rx_packets", "Packets received"),
    ("rx_bytes", "rx_bytes", "Bytes received (frames without FCS)"),
    ("tx_packets", "tx_packets", "Packets sent"),
    ("tx_bytes", "tx_bytes", "Bytes sent (frames without FCS)"),
    ("forwarded", "forwarded_packets", "Received packets the switch forwarded"),
    ("flood_tx_dropped", "flood_tx_dropped_packets",
     "Flood copies the port could not send (outside rx = forwarded + dropped)"),
)
WORKER_COUNTERS = (
    ("busy_cycles", "busy_cycles", "TSC cycles spent on loops that moved packets"),
    ("idle_cycles", "idle_cycles", "TSC cycles spent on empty loops and sleeping"),
    ("packets", "packets", "Packets the worker received"),
    ("loops", "loops", "Poll loops"),
    ("sleeps", "sleeps", "Times the worker slept for want of packets"),
)
POOL_GAUGES = (("size", "size_mbufs", "Mbufs in the pool"),
               ("in_use", "in_use_mbufs", "Mbufs taken from the pool"))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _port_families(switches: Sequence[Mapping[str, Any]],
                   reasons: Sequence[str]) -> Iterator[Metric]:
    labels = ["switch", "port"]
    fams = {key: CounterMetricFamily(f"sluice_port_{name}", text, labels=labels)
            for key, name, text in TRAFFIC}
    missed = CounterMetricFamily("sluice_port_rx_missed_packets",
                                 "Packets the device could not take in (never in rx_packets)",
                                 labels=labels)
    dropped = CounterMetricFamily("sluice_port_dropped_packets",
                                  "Received packets dropped, by reason (docs/protocol.md)",
                                  labels=[*labels, "reason"])
    for s in switches:
        for p in s.get("ports") or []:
            ids = [str(s.get("name")), str(p.get("name"))]
            for key, fam in fams.items():
                fam.add_metric(ids, _int(p.get(key)))
            missed.add_metric(ids, _int(p.get("rx_missed")))
            drops = p.get("drops") or {}
            for reason in [*reasons, *(r for r in drops if r not in reasons)]:
                dropped.add_metric([*ids, reason], _int(drops.get(reason)))
    yield from fams.values()
    yield missed
    yield dropped


def _switch_families(switches: Sequence[Mapping[str, Any]],
                     reasons: Sequence[str]) -> Iterator[Metric]:
    labels = ["switch", "mode"]
    keys = [(k, n, t) for k, n, t in TRAFFIC if "bytes" not in k]   # `stats` sums no bytes
    fams = {key: CounterMetricFamily(f"sluice_switch_{name}", text + " (sum of its ports)",
                                     labels=labels) for key, name, text in keys}
    dropped = CounterMetricFamily("sluice_switch_dropped_packets",
                                  "Received packets dropped, by reason (sum of its ports)",
                                  labels=[*labels, "reason"])
    ports = GaugeMetricFamily("sluice_switch_ports", "Ports on the switch", labels=labels)
    for s in switches:
        ids = [str(s.get("name")), str(s.get("mode"))]
        for key, fam in fams.items():
            fam.add_metric(ids, _int(s.get(key)))
        drops = s.get("drops") or {}
        for reason in [*reasons, *(r for r in drops if r not in reasons)]:
            dropped.add_metric([*ids, reason], _int(drops.get(reason)))
        ports.add_metric(ids, len(s.get("ports") or []))
    yield from fams.values()
    yield dropped
    yield ports


def _learn_families(switches: Sequence[Mapping[str, Any]],
                    shown: Mapping[str, Mapping[str, Any]]) -> Iterator[Metric]:
    """Learn switches' table: its size, its limit and aging (from `show`), and each of its
    event counters (learned, moved, aged, ...) as sluice_learn_<event>_total."""
    entries = GaugeMetricFamily("sluice_learn_entries", "Addresses in the table",
                                labels=["switch"])
    limit = GaugeMetricFamily("sluice_learn_max_entries", "Size of the table",
                              labels=["switch"])
    aging = GaugeMetricFamily("sluice_learn_aging_seconds",
                              "How long an unseen address is kept (0: for ever)",
                              labels=["switch"])
    events: dict[str, CounterMetricFamily] = {}
    for s in switches:
        learn = s.get("learn")
        if not isinstance(learn, Mapping):
            continue
        name = str(s.get("name"))
        entries.add_metric([name], _int(s.get("entries")))
        described = shown.get(name, {})
        if "max_entries" in described:
            limit.add_metric([name], _int(described.get("max_entries")))
        if "aging" in described:
            aging.add_metric([name], _int(described.get("aging")))
        for event, value in learn.items():
            fam = events.setdefault(event, CounterMetricFamily(
                f"sluice_learn_{event}", f"Learn-table events: {event} (docs/learn.md)",
                labels=["switch"]))
            fam.add_metric([name], _int(value))
    yield from (entries, limit, aging, *events.values())


def _worker_families(workers: Sequence[Mapping[str, Any]]) -> Iterator[Metric]:
    labels = ["worker", "lcore", "cpu"]
    fams = [CounterMetricFamily(f"sluice_worker_{name}", text, labels=labels)
            for _, name, text in WORKER_COUNTERS]
    queues = GaugeMetricFamily("sluice_worker_rx_queues", "Receive queues the worker polls",
                               labels=labels)
    for w in workers:
        ids = [str(w.get("id")), str(w.get("lcore")), str(w.get("cpu"))]
        for (key, _, _), fam in zip(WORKER_COUNTERS, fams, strict=True):
            fam.add_metric(ids, _int(w.get(key)))
        queues.add_metric(ids, _int(w.get("rx_queues")))
    yield from fams
    yield queues


def _pool_families(pools: Iterable[Any]) -> Iterator[Metric]:
    """Mbuf pools, when `show` has a `pools` list: each pool's size, mbufs in use and failed
    allocations; a pool is labelled by its name (else its place in the list)."""
    gauges = [GaugeMetricFamily(f"sluice_pool_{name}", text, labels=["pool"])
              for _, name, text in POOL_GAUGES]
    failures = CounterMetricFamily("sluice_pool_alloc_failures",
                                   "Mbuf allocations the pool could not serve", labels=["pool"])
    for i, pool in enumerate(pools):
        if not isinstance(pool, Mapping):
            continue
        ids = [str(pool.get("name", i))]
        for (key, _, _), fam in zip(POOL_GAUGES, gauges, strict=True):
            if key in pool:
                fam.add_metric(ids, _int(pool.get(key)))
        if "alloc_failures" in pool:
            failures.add_metric(ids, _int(pool.get("alloc_failures")))
    yield from gauges
    yield failures


def _link_family(shown: Mapping[str, Mapping[str, Any]]) -> Metric:
    link = GaugeMetricFamily("sluice_port_link_up", "1 when the port's link is up",
                             labels=["switch", "port", "kind"])
    for name, s in shown.items():
        for p in s.get("ports") or []:
            if isinstance(p, Mapping):
                link.add_metric([name, str(p.get("name")), str(p.get("kind"))],
                                1 if p.get("link") == "up" else 0)
    return link


def families(stats: Mapping[str, Any], show: Mapping[str, Any]) -> list[Metric]:
    """Every metric family for one scrape, from a `stats` and a `show` answer (not sluice_up,
    which the collector adds)."""
    switches = stats.get("switches") or []
    reasons = [str(r) for r in stats.get("drop_reasons") or []]
    shown = {str(s.get("name")): s for s in show.get("switches") or []
             if isinstance(s, Mapping)}
    version = show.get("version") or {}
    info = InfoMetricFamily("sluice", "Versions of sluiced, its DPDK and its protocol")
    info.add_metric([], {"version": str(version.get("version", "")),
                         "dpdk": str(version.get("dpdk", "")),
                         "protocol": str(version.get("protocol", ""))})
    made = [info, *_port_families(switches, reasons), _link_family(shown),
            *_switch_families(switches, reasons), *_learn_families(switches, shown),
            *_worker_families(stats.get("workers") or []),
            *_pool_families(show.get("pools") or [])]
    # A family with no samples (no learn switch, no `pools` in this daemon's answer) is left
    # out rather than described empty.
    return [f for f in made if f.samples]


class SluiceCollector(Collector):
    """Asks the daemon through TRANSPORT on every collect(); keeps nothing between them."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("sluice_up", "1 when sluiced answered this scrape")
        try:
            stats = self.transport("stats", {})
            show = self.transport("show", {})
        except (ConnectError, RpcError) as e:
            print(f"sluicectl metrics: no answer from sluiced: {e}", file=sys.stderr)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families(stats, show)


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr for every scrape."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass


def parse_listen(text: str) -> tuple[str, int]:
    """'127.0.0.1:9410' -> ('127.0.0.1', 9410); ':9410' listens on every address;
    ValueError when it is not ADDR:PORT (IPv4 or a host name)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen must be ADDR:PORT, e.g. 127.0.0.1:9410, not {text!r}")
    return host or "0.0.0.0", int(port)


def run(listen: str | None, transport: Transport, out: TextIO) -> int:
    """Prints the metrics once on OUT (LISTEN None) or serves them on LISTEN until Ctrl-C."""
    registry = CollectorRegistry()
    registry.register(SluiceCollector(transport))
    if listen is None:
        out.write(generate_latest(registry).decode())
        return 0
    host, port = parse_listen(listen)
    server: WSGIServer = make_server(host, port, make_wsgi_app(registry),
                                     handler_class=_QuietHandler)
    print(f"serving sluiced's metrics on http://{listen}/metrics; Ctrl-C stops", file=out,
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
