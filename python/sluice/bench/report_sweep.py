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
    lines = [[str(p["kind"]), str(p["scenario"]), str(p["switch"]), str(p["value"]),
              f"{p['rx_mpps']:.3f}",
              "" if p["mean_us"] is None else f"{p['mean_us']:.1f}",
              "" if p["p99_us"] is None else f"{p['p99_us']:.1f}",
              str(p["placement"]), str(p["n"])] for p in pts]
    return [(f"Sweep: {param}",
             "Each value ran with the same scenarios and switches; per point the best "
             "placement label its rows have (near first) and how many rows it rests on. "
             "Latency points are trials at the swept rate (sluice-gen's round trip).",
             ["kind", "scenario", "switch", param, "R+ / received Mpps", "mean RTT us",
              "p99 us", "placement", "rows"], lines)]


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
