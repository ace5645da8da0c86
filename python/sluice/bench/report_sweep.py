"""The sweep part of the report: a curve per switch against the swept value.

Throughput rows give R+ against the value; latency rows (rate sweeps) give the mean and p99
round trip against the rate. A fanout sweep (one sender flooded to N sinks) draws two curves
per switch: the copies received per second (every sink's, R+ of the fan-out) and the frames
sent per second, against N, with the share of the N x sent copies that arrived. Each point
uses the best placement label its rows have (near first), as every other table of the report
does.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from sluice.bench.report_latency import Section, pick_best, save_figure, switch_key
from sluice.bench.schema import Row


def _order(value: str) -> tuple[int, float, str]:
    """Numeric values in numeric order, words (imix) after them."""
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def points(rows: Sequence[Row]) -> list[dict[str, object]]:
    """Per (scenario, switch, value, kind): the figure of the best placement."""
    groups: dict[tuple[str, str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        if r.sweep_param and not r.oversubscribed:
            kind = "latency" if r.method == "latency" else "throughput"
            # A fan-out's scenario names its N (fanout-4): one curve over every N.
            name = "fanout" if r.sweep_param == "fanout" else r.scenario
            scn = f"{name}{'/' + r.phy if r.phy else ''}"
            groups[(scn, switch_key(r), r.sweep_value, kind)].append(r)
    out = []
    for (scn, key, value, kind), rs in groups.items():
        lab, use = pick_best(rs)
        out.append({"scenario": scn, "switch": key, "value": value, "kind": kind,
                    "placement": lab, "rx_mpps": statistics.fmean(r.rx_pps for r in use) / 1e6,
                    "tx_mpps": statistics.fmean(r.tx_pps for r in use) / 1e6,
                    "delivered": _delivered(use),
                    "mean_us": _lat(use, "mean"), "p99_us": _lat(use, "p99"),
                    "n": len(use)})
    return sorted(out, key=lambda p: (p["kind"], p["scenario"], p["switch"],
                                      _order(str(p["value"]))))


# The references of the classifier sweep (issue 14): each point's ratio to these switches.
REFERENCES = ("ovs-dpdk:flows", "sluice:patch")


def _groups(rows: Sequence[Row]) -> dict[tuple[str, str, str], list[Row]]:
    """Throughput rows by (scenario, value, switch key)."""
    out: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        if r.sweep_param and not r.oversubscribed and r.method != "latency":
            scn = f"{r.scenario}{'/' + r.phy if r.phy else ''}"
            out[(scn, r.sweep_value, switch_key(r))].append(r)
    return out


def _window_ratio(rs: Sequence[Row], other: str) -> float | None:
    """The median of the window ratios of RS against OTHER (alternating rows), None if
    none alternated with it."""
    vals = [r.ratio_median for r in rs if r.ratio_vs == other and r.ratio_median is not None]
    return statistics.median(vals) if vals else None


def ratio_value(groups: dict[tuple[str, str, str], list[Row]], scn: str, value: str,
                key: str, ref: str) -> tuple[float | None, str]:
    """KEY's figure over REF's at one point and how it was found: 'w' from alternating
    windows against REF itself, 'via B' from both switches' window ratios against the same
    B (x/B over REF/B), 'R+' from the mean R+ of the best placement each had (with both
    labels when they differ); (None, '') when REF did not run there."""
    if key == ref:
        return 1.0, ""
    mine, theirs = groups.get((scn, value, key), []), groups.get((scn, value, ref), [])
    if not mine or not theirs:
        return None, ""
    lab_m, use_m = pick_best(mine)
    lab_t, use_t = pick_best(theirs)
    direct = _window_ratio(use_m, ref)
    if direct is not None:
        return direct, "w"
    for base in sorted({r.ratio_vs for r in use_m if r.ratio_vs}):
        a, b = _window_ratio(use_m, base), _window_ratio(use_t, base)
        if a is not None and b:
            return a / b, f"via {base}"
    ref_rx = statistics.fmean(r.rx_pps for r in use_t)
    if ref_rx <= 0:
        return None, ""
    labels = "" if lab_m == lab_t else f", {lab_m}/{lab_t}"
    return statistics.fmean(r.rx_pps for r in use_m) / ref_rx, f"R+{labels}"


def ratio_to(groups: dict[tuple[str, str, str], list[Row]], scn: str, value: str, key: str,
             ref: str) -> str:
    """ratio_value as a cell: '1.52 (w)'; '1' for REF itself, '' where REF did not run."""
    v, how = ratio_value(groups, scn, value, key, ref)
    if key == ref:
        return "1"
    return "" if v is None else f"{v:.2f} ({how})"


# Issue 14's goals for sluice:flow at each point of the classifier sweep.
GOAL_KEY = "sluice:flow"
GOAL_OVS, GOAL_OVS_THRASH, GOAL_PATCH, THRASH_FLOWS = 1.3, 2.0, 0.5, 100_000


def goal(groups: dict[tuple[str, str, str], list[Row]], scn: str, value: str,
         flows: int) -> str:
    """Whether sluice:flow met issue 14's goals at one point: at least 1.3x ovs-dpdk:flows
    (2x from 100,000 flows, where OVS's exact-match cache thrashes) and at least 0.5x
    sluice:patch; '' where a reference is missing."""
    ovs, _ = ratio_value(groups, scn, value, GOAL_KEY, "ovs-dpdk:flows")
    patch, _ = ratio_value(groups, scn, value, GOAL_KEY, "sluice:patch")
    want = GOAL_OVS_THRASH if flows >= THRASH_FLOWS else GOAL_OVS
    parts = []
    if ovs is not None:
        parts.append(f"{'met' if ovs >= want else 'NOT met'} >= {want:g}x OVS")
    if patch is not None:
        parts.append(f"{'met' if patch >= GOAL_PATCH else 'NOT met'} >= {GOAL_PATCH:g}x patch")
    return "; ".join(parts)


def _delivered(rs: Sequence[Row]) -> float | None:
    """The mean share of a fan-out's copies that arrived (None outside fanout rows)."""
    vals = [r.delivered_fraction for r in rs if r.delivered_fraction is not None]
    return statistics.fmean(vals) if vals else None


def _panels(param: str, kinds: Sequence[str]) -> list[tuple[str, str, str]]:
    """(kind, figure of a point, y label) per panel: a fanout's throughput has two panels,
    copies and frames per second."""
    out = []
    for kind in kinds:
        if kind == "latency":
            out.append((kind, "mean_us", "mean RTT (us)"))
        elif param == "fanout":
            out += [(kind, "rx_mpps", "copies received (Mpps)"),
                    (kind, "tx_mpps", "frames sent (Mpps)")]
        else:
            out.append((kind, "rx_mpps", "R+ (Mpps)"))
    return out


def _lat(rs: Sequence[Row], field: str) -> float | None:
    """Latency of latency trials only: a throughput row's histogram is taken at saturation
    (and in alternating runs covers both switches)."""
    vals = [r.latency_ns[field] for r in rs if field in r.latency_ns and r.method == "latency"]
    return statistics.fmean(vals) / 1e3 if vals else None


def figure(rows: Sequence[Row], dest: Path) -> str | None:
    """R+ (and, for latency rows, mean RTT) against the swept value, a line per switch and
    scenario; writes DEST/sweep.png/.svg and returns the base name."""
    pts = points(rows)
    if not pts:
        return None
    param = next(r.sweep_param for r in rows if r.sweep_param)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(param, sorted({str(p["kind"]) for p in pts}, reverse=True))
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.5 * len(panels)), squeeze=False)
    for ax, (kind, what, ylabel) in zip(axes[:, 0], panels, strict=True):
        lines: dict[tuple[str, str], list[dict[str, object]]] = defaultdict(list)
        for p in pts:
            if p["kind"] == kind:
                lines[(str(p["scenario"]), str(p["switch"]))].append(p)
        values = sorted({str(p["value"]) for p in pts if p["kind"] == kind}, key=_order)
        for (scn, sw), ps in sorted(lines.items()):
            xs = [values.index(str(p["value"])) for p in ps]
            ys = [p[what] for p in ps]
            ax.plot(xs, ys, marker="o", label=f"{sw} ({scn})")
        ax.set_xticks(range(len(values)), values)
        ax.set_xlabel("destinations (N)" if param == "fanout" else param)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, dest, "sweep")


def sections(rows: Sequence[Row]) -> list[Section]:
    """The sweep table (none without sweep rows)."""
    pts = points(rows)
    if not pts:
        return []
    param = next(r.sweep_param for r in rows if r.sweep_param)
    if param == "fanout":
        return [fanout_section(pts)]
    groups = _groups(rows)
    refs = [ref for ref in REFERENCES if any(k[2] == ref for k in groups)]
    rules_of = _rules_of(rows)
    flows_of = {(scn, v, k): rs[0].flows for (scn, v, k), rs in groups.items()}
    goals = bool(refs) and any(k[2] == GOAL_KEY for k in groups)
    lines = [[str(p["kind"]), str(p["scenario"]), str(p["switch"]), str(p["value"]),
              rules_of.get((str(p["scenario"]), str(p["value"]), str(p["switch"])), ""),
              f"{p['rx_mpps']:.3f}",
              *(ratio_to(groups, str(p["scenario"]), str(p["value"]), str(p["switch"]), ref)
                if p["kind"] == "throughput" else "" for ref in refs),
              "" if p["mean_us"] is None else f"{p['mean_us']:.1f}",
              "" if p["p99_us"] is None else f"{p['p99_us']:.1f}",
              str(p["placement"]), str(p["n"]),
              *([goal(groups, str(p["scenario"]), str(p["value"]), flows_of.get(
                  (str(p["scenario"]), str(p["value"]), GOAL_KEY), 1))
                 if p["switch"] == GOAL_KEY and p["kind"] == "throughput" else ""]
                if goals else [])] for p in pts]
    ratio_text = (" Ratios to " + " and ".join(refs) + " per point: (w) the median window "
                  "ratio against that switch, (via B) both switches' window ratios against "
                  "the same B divided, (R+) the quotient of mean R+ (placement labels "
                  "named when they differ). Issue 14's goals for sluice:flow: at least 1.3x "
                  "ovs-dpdk:flows at every point (2x from 100,000 flows) and at least 0.5x "
                  "sluice:patch; read them in near rows, from window ratios." if refs else "")
    return [(f"Sweep: {param}",
             "Each value ran with the same scenarios and switches; per point the best "
             "placement label its rows have (near first) and how many rows it rests on. "
             "Latency points are trials at the swept rate (sluice-gen's round trip). "
             "`rules/flows`: the ACL rules the switch had loaded above its steering (0: none; "
             "rules.py) and sluice-gen's distinct 5-tuples." + ratio_text,
             ["kind", "scenario", "switch", param, "rules/flows", "R+ / received Mpps",
              *(f"/ {ref}" for ref in refs), "mean RTT us", "p99 us", "placement", "rows",
              *(["issue 14 goal"] if goals else [])],
             lines)]


def _rules_of(rows: Sequence[Row]) -> dict[tuple[str, str, str], str]:
    """'rules/flows' per (scenario, value, switch key), e.g. '1000 (16 masks)/100000'."""
    out: dict[tuple[str, str, str], str] = {}
    for r in rows:
        if r.sweep_param:
            scn = f"{r.scenario}{'/' + r.phy if r.phy else ''}"
            masks = f" ({r.rule_masks} masks)" if r.rules else ""
            out[(scn, r.sweep_value, switch_key(r))] = f"{r.rules}{masks}/{r.flows}"
    return out


def fanout_section(pts: Sequence[dict[str, object]]) -> Section:
    """The fanout sweep's table: per switch and N, copies and frames per second."""
    lines = [[str(p["switch"]), str(p["value"]), f"{p['rx_mpps']:.3f}",
              f"{p['tx_mpps']:.3f}",
              "" if p["delivered"] is None else f"{p['delivered']:.4f}",
              str(p["placement"]), str(p["n"])] for p in pts if p["kind"] == "throughput"]
    return ("Sweep: fanout",
            "One sender's broadcast frames flooded by the switch to N sink ports (vhost-user; "
            "sluice-gen --sink-port), as in VALE's forwarding rate against the number of "
            "destinations: copies received per second over all sinks (R+ of the fan-out), "
            "frames sent per second, and the share of the N x sent copies that arrived. Per "
            "point the best placement label its rows have (near first). Switches whose mode "
            "cannot flood are listed as skipped.",
            ["switch", "N", "copies Mpps", "frames Mpps", "delivered", "placement", "rows"],
            lines)
