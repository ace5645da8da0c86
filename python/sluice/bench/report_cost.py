"""The report's cost table: cycles per packet per switch, scenario and size (cost.py).

Each row of results.jsonl carries its windows' (or seconds') figures in `cost`; here they
are pooled over trials per scenario, size, switch and placement: the switch's own busy
cycles per packet, its forwarding threads' CPU cycles (and ns) per frame from /proc, and the
ratio of each to testpmd's: window by window where the switch alternated with testpmd (the
median of the window ratios, with quartiles and their number), else the quotient of the two
medians of the same placement, marked as such.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sluice.bench.report_latency import scenario_of, switch_key
from sluice.bench.schema import Row
from sluice.bench.stats import Spread, spread

Section = tuple[str, str, list[str], list[list[str]] | None]


def reference(rows: Sequence[Row], baseline: str = "") -> str:
    """The testpmd the ratios are to: the run's baseline when it is a testpmd (in `compare
    testpmd testpmd`, the second instance), else testpmd:io."""
    if baseline.startswith("testpmd"):
        keys = {switch_key(r) for r in rows}
        named = sorted(k for k in keys if k == baseline or k.split(":")[0] == baseline)
        if named:
            return named[0]
    return "testpmd:io"


@dataclass(frozen=True)
class CostLine:
    """One switch's pooled cost in one scenario, size and placement."""

    scenario: str
    size: int
    key: str
    placement: str
    own: Spread | None
    own_source: str
    proc: Spread | None           # cycles per frame
    proc_ns: Spread | None        # ns per frame
    own_ratio: Spread | None      # over the reference, window by window ...
    proc_ratio: Spread | None
    ratio_how: str                # "windows", "quotient", "reference" or ""


def load_text(r: Row) -> str:
    """How a latency row loaded the switch (' at 0.5 R+', ' at 1 Mpps', ' echo, bursts of
    4'); '' for a throughput row (saturated)."""
    if r.method != "latency":
        return ""
    if r.latency_kind == "echo":
        return f" echo, bursts of {r.burst}"
    if r.latency_load is not None:
        return f" at {r.latency_load:g} R+"
    return f" at {(r.asked_pps or 0) / 1e6:g} Mpps"


def _pool(rows: Sequence[Row], name: str) -> list[float]:
    return [float(v) for r in rows for v in (r.cost.get(name) or [])]


def _spread(values: Sequence[float]) -> Spread | None:
    return spread(values) if values else None


def _quotient(a: Spread | None, b: Spread | None) -> Spread | None:
    """A over B from two spreads of separate measurements: the medians' quotient, its
    quartiles the widest the quartiles allow, resting on the smaller count."""
    if a is None or b is None or b.median <= 0 or b.q1 <= 0:
        return None
    return Spread(a.median / b.median, a.q1 / b.q3, a.q3 / b.q1, min(a.n, b.n))


def cost_lines(rows: Sequence[Row], baseline: str = "") -> list[CostLine]:
    """Pooled cost per (scenario, size, switch, placement) of throughput and latency rows
    that carry one (oversubscribed rows left out)."""
    ref = reference(rows, baseline)
    groups: dict[tuple[str, int, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        if r.cost and not r.oversubscribed and r.method != "search":
            groups[(scenario_of(r) + load_text(r), r.size, switch_key(r), r.placement)].append(r)
    out = []
    for (scn, size, key, place), rs in sorted(groups.items()):
        own, proc = _spread(_pool(rs, "own_cpp")), _spread(_pool(rs, "proc_cpp"))
        ns = _spread(_pool(rs, "proc_nspp"))
        mine = [r for r in rs if r.ratio_vs == ref]
        how = ""
        own_r = proc_r = None
        if key == ref:
            how = "reference"
        elif mine:
            own_r = _spread(_pool(mine, "own_ratio"))
            proc_r = _spread(_pool(mine, "proc_ratio"))
            how = "windows"
        elif (scn, size, ref, place) in groups:
            refs = groups[(scn, size, ref, place)]
            own_r = _quotient(own, _spread(_pool(refs, "own_cpp")))
            proc_r = _quotient(ns, _spread(_pool(refs, "proc_nspp")))
            how = "quotient" if own_r or proc_r else ""
        sources = sorted({str(r.cost.get("own_source", "")) for r in rs} - {""})
        out.append(CostLine(scn, size, key, place, own, sources[0] if sources else "",
                            proc, ns, own_r, proc_r, how))
    return out


def _cell(s: Spread | None, digits: int = 0) -> str:
    if s is None:
        return ""
    return f"{s.median:.{digits}f} [{s.q1:.{digits}f}-{s.q3:.{digits}f}] ({s.n})"


def _ratio_cell(s: Spread | None, how: str) -> str:
    if how == "reference":
        return "1 (reference)"
    if s is None:
        return ""
    mark = "" if how == "windows" else " (quotient)"
    return f"{s.median:.3f} [{s.q1:.3f}-{s.q3:.3f}] ({s.n}){mark}"


def short_source(source: str) -> str:
    """The counter's name without its explanation ('sluiced stats', 'testpmd
    --record-core-cycles', ...)."""
    return source.split(":", 1)[0]


TEXT = (
    "Cycles per packet per switch: its own figure (the busy TSC cycles its forwarding thread "
    "counts over the packets it received: sluiced's worker counters, testpmd's "
    "--record-core-cycles, OVS's pmd-perf-show, VPP's show runtime, which counts its empty "
    "polls too) and the same cross-check for every switch (its forwarding threads' CPU time "
    "from /proc over the seconds sluice-gen counted, in TSC cycles, per frame the sink "
    "received; a busy poller's CPU time includes its empty polls, so this is the whole CPU "
    "a frame cost). Each cell is the median over the windows (alternating) or readings and "
    "seconds (interleaved) of all trials, [quartiles] and (their number). The ratios to "
    "testpmd are window by window where the switch alternated with it, else the quotient of "
    "the medians (separate trials, weaker). In loopback chains the own figures count every "
    "pass through the switch, the /proc figure every frame delivered. Only a stopped "
    "switch's time is left out: a host's preemption of the forwarding thread in a busy pass "
    "lands in the own figure (TSC) and not in /proc's.")


def sections(rows: Sequence[Row], baseline: str = "") -> list[Section]:
    """The cost table (nothing when no row carries a cost)."""
    lines = cost_lines(rows, baseline)
    if not lines:
        return []
    ref = reference(rows, baseline)
    return [(f"Cost per packet (ratio to {ref})", TEXT,
             ["scenario", "size", "switch", "placement", "own cycles/pkt", "counted by",
              "/proc cycles/pkt", "/proc ns/pkt", "own ratio", "/proc ratio"],
             [[c.scenario, f"{c.size} B", c.key, c.placement, _cell(c.own),
               short_source(c.own_source), _cell(c.proc), _cell(c.proc_ns, 1),
               _ratio_cell(c.own_ratio, c.ratio_how), _ratio_cell(c.proc_ratio, c.ratio_how)]
              for c in lines])]
