"""Per-hop packet counts of a loopback-N chain, so a loss is located, not only counted.

A chain's frames pass a fixed sequence of counters, each the count of one party (issue 8,
section 4): the generator's sending port (`port_stats` of sluice-gen: ethdev counters), the
switch's input port (rx), the switch's port toward VNF 1 (tx), VNF 1's receive and transmit
counters (sluice-gen's `vnfs`, per direction), the switch again, ..., and the generator's
receiving port. Every counter covers the same interval: the whole generator run, warm-up,
cool-down and final drain included (the switch's counters are read before the generator
starts and after it ends). A hop is the way from one counter to the next; its loss is the
first count less the second. Where a party has no counters (a switch adapter whose
`port_counters()` is None) its points are left out and the hop spans it.

In the switch's topology a loopback-N chain's links are p0, v1a, v1b, ..., vNa, vNb, p1,
joined pair by pair (p0-v1a, v1b-v2a, ..., vNb-p1): the forward direction enters at p0 and
leaves at p1, the reverse one (bidir) the other way. Every port counts one direction as rx
and the other as tx, so both directions' hops come apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sluice.bench.plan import TrialSpec
    from sluice.bench.switches import Switch

PortCounters = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Point:
    """One counter on the way: who counts (LABEL) and how many frames it counted."""

    label: str
    count: int | None
    drops: Mapping[str, int] | None = None   # the switch's drop reasons at an input port
    missed: Mapping[str, int] | None = None  # frames its input port missed or dropped
                                             # before counting them (rx_missed, rx_dropped)


MISSED = ("rx_missed", "rx_dropped")


def _count(d: Mapping[str, Any] | None, key: str) -> int | None:
    v = d.get(key) if d else None
    return int(v) if isinstance(v, int | float) else None


def _switch_point(switch: PortCounters | None, name: str, side: str) -> Point:
    c = switch.get(name) if switch is not None else None
    if not c or side != "rx":
        return Point(f"switch {name} {side}", _count(c, side))
    drops = c.get("drops")
    missed = {k: int(c[k]) for k in MISSED if isinstance(c.get(k), int) and c[k]}
    return Point(f"switch {name} {side}", _count(c, side),
                 dict(drops) if isinstance(drops, Mapping) and drops else None,
                 missed or None)


def chain_points(chain: int, gen_ports: Sequence[Mapping[str, Any]],
                 vnfs: Sequence[Mapping[str, Any]], switch: PortCounters | None,
                 reverse: bool = False) -> list[Point]:
    """The counters a frame of a loopback-CHAIN passes, in order. GEN_PORTS: sluice-gen's
    `port_stats` of the chain's two ports (sender first); VNFS: its `vnfs` of the chain's
    VNFs, in chain order; SWITCH: the switch's port counters over the same interval (by link
    name), or None. REVERSE: the bidir direction, from p1 back to p0."""
    if len(gen_ports) != 2 or len(vnfs) != chain:
        raise ValueError(f"a loopback-{chain} chain has 2 generator ports and {chain} VNFs; "
                         f"got {len(gen_ports)} and {len(vnfs)}")
    src, dst = (1, 0) if reverse else (0, 1)
    first, last = (f"p{src}", f"p{dst}")
    order = range(chain, 0, -1) if reverse else range(1, chain + 1)
    way = "out_to_in" if reverse else "in_to_out"
    into, out_of = ("b", "a") if reverse else ("a", "b")
    pts = [Point(f"gen {first} tx", _count(gen_ports[src], "tx")),
           _switch_point(switch, first, "rx")]
    for v in order:
        d = vnfs[v - 1].get(way)
        pts += [_switch_point(switch, f"v{v}{into}", "tx"),
                Point(f"VNF{v} rx", _count(d, "rx")),
                Point(f"VNF{v} tx", _count(d, "tx")),
                _switch_point(switch, f"v{v}{out_of}", "rx")]
    pts += [_switch_point(switch, last, "tx"),
            Point(f"gen {last} rx", _count(gen_ports[dst], "rx"))]
    return pts


def hops_of(points: Sequence[Point]) -> list[dict[str, Any]]:
    """The hops between consecutive known counters: from, to, sent, received, lost (sent
    less received: negative when more arrived than left, e.g. a flood's copies or frames
    a kernel bridge sent of its own), the switch's drop reasons where the hop starts at one
    of its input ports (`switch_drops`), and what that input port missed where the hop ends
    at it (`switch_missed`: rx_missed, rx_dropped)."""
    known = [p for p in points if p.count is not None]
    hops = []
    for a, b in zip(known, known[1:], strict=False):
        assert a.count is not None and b.count is not None
        hop: dict[str, Any] = {"from": a.label, "to": b.label, "sent": a.count,
                               "received": b.count, "lost": a.count - b.count}
        if a.drops:
            hop["switch_drops"] = dict(a.drops)
        if b.missed:
            hop["switch_missed"] = dict(b.missed)
        hops.append(hop)
    return hops


def worst_hop(hops: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The hop that lost the most frames (the first of equals); None when none lost any."""
    lossy = [h for h in hops if int(h["lost"]) > 0]
    return max(lossy, key=lambda h: int(h["lost"])) if lossy else None


def hop_name(hop: Mapping[str, Any]) -> str:
    """'switch p0 rx -> switch v1a tx', the way a report names a hop."""
    return f"{hop['from']} -> {hop['to']}"


def chain_hops(chain: int, gen_ports: Sequence[Mapping[str, Any]],
               vnfs: Sequence[Mapping[str, Any]], switch: PortCounters | None,
               bidir: bool) -> dict[str, Any]:
    """The `hops` field of a loopback row: per direction the hop list, the generator's own
    sent and received totals (the first and last counters), and the hop that lost most."""
    out: dict[str, Any] = {"switch_counters": switch is not None}
    for direction, reverse in (("forward", False), ("reverse", True))[: 2 if bidir else 1]:
        hops = hops_of(chain_points(chain, gen_ports, vnfs, switch, reverse))
        worst = worst_hop(hops)
        out[direction] = {
            "hops": hops,
            "sent": hops[0]["sent"] if hops else None,
            "received": hops[-1]["received"] if hops else None,
            "worst": hop_name(worst) if worst else None,
        }
    return out


def counter_delta(after: PortCounters | None, before: PortCounters | None
                  ) -> dict[str, dict[str, Any]] | None:
    """AFTER less BEFORE, port by port and counter by counter (drop reasons too), for the
    ports both readings have (a port missing from either is unknown: its points are left
    out); None when either reading is missing or a counter went backwards (the switch
    restarted)."""
    if after is None or before is None:
        return None
    out: dict[str, dict[str, Any]] = {}
    for name, a in after.items():
        if name not in before:
            continue
        b = before[name]
        d: dict[str, Any] = {}
        for key, v in a.items():
            if isinstance(v, Mapping):
                reasons = {r: int(n) - int(b.get(key, {}).get(r, 0)) for r, n in v.items()}
                d[key] = {r: n for r, n in reasons.items() if n}
            elif isinstance(v, int):
                d[key] = v - int(b.get(key, 0) or 0)
                if d[key] < 0:
                    return None
        out[name] = d
    return out


def switch_counters(spec: TrialSpec, switches: Mapping[str, Switch], keys: Sequence[str]
                    ) -> dict[str, dict[str, dict[str, Any]] | None]:
    """The port counters of the switches KEYS of a trial, for loopback chains only (the
    runner reads them before the generator starts and after it ends)."""
    if spec.scenario.family != "loopback" or spec.latency_kind == "echo":
        return {}
    return {k: switches[k].port_counters() for k in keys}


def trial_hops(spec: TrialSpec, keys: Sequence[str], summary: Mapping[str, Any],
               before: Mapping[str, PortCounters | None],
               after: Mapping[str, PortCounters | None]) -> dict[str, Any]:
    """Per switch of the trial, the `hops` of its loopback chain: sluice-gen (its SUMMARY)
    lists each switch's two ports and (inline) VNFs in the order of KEYS."""
    if not before:
        return {}
    chain = spec.scenario.chain
    ports = summary.get("port_stats") or []
    inline = summary.get("vnfs") or []
    out = {}
    for j, key in enumerate(keys):
        # Counters a sluice-gen did not give (an older one, process VNFs) are unknown.
        gen_ports = ports[2 * j:2 * j + 2]
        gen_ports = gen_ports if len(gen_ports) == 2 else [{}, {}]
        vnf_counters = inline[chain * j:chain * (j + 1)]
        vnf_counters = vnf_counters if len(vnf_counters) == chain else [{}] * chain
        out[key] = chain_hops(chain, gen_ports, vnf_counters,
                              counter_delta(after.get(key), before.get(key)),
                              spec.scenario.direction == "bidir")
    return out
