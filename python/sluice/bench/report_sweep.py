"""The sweep part of the report: a curve per switch against the swept value.

Throughput rows give R+ against the value; latency rows (rate sweeps) give the mean and p99
round trip against the rate. Each point uses the best placement label its rows have (near
first), as every other table of the report does.
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
            scn = f"{r.scenario}{'/' + r.phy if r.phy else ''}"
            groups[(scn, switch_key(r), r.sweep_value, kind)].append(r)
    out = []
    for (scn, key, value, kind), rs in groups.items():
        lab, use = pick_best(rs)
        out.append({"scenario": scn, "switch": key, "value": value, "kind": kind,
                    "placement": lab, "rx_mpps": statistics.fmean(r.rx_pps for r in use) / 1e6,
                    "mean_us": _lat(use, "mean"), "p99_us": _lat(use, "p99"),
                    "n": len(use)})
    return sorted(out, key=lambda p: (p["kind"], p["scenario"], p["switch"],
                                      _order(str(p["value"]))))


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

    kinds = sorted({str(p["kind"]) for p in pts}, reverse=True)
    fig, axes = plt.subplots(len(kinds), 1, figsize=(8, 3.5 * len(kinds)), squeeze=False)
    for ax, kind in zip(axes[:, 0], kinds, strict=True):
        lines: dict[tuple[str, str], list[dict[str, object]]] = defaultdict(list)
        for p in pts:
            if p["kind"] == kind:
                lines[(str(p["scenario"]), str(p["switch"]))].append(p)
        values = sorted({str(p["value"]) for p in pts if p["kind"] == kind}, key=_order)
        for (scn, sw), ps in sorted(lines.items()):
            xs = [values.index(str(p["value"])) for p in ps]
            ys = [p["mean_us"] if kind == "latency" else p["rx_mpps"] for p in ps]
            ax.plot(xs, ys, marker="o", label=f"{sw} ({scn})")
        ax.set_xticks(range(len(values)), values)
        ax.set_xlabel(param)
        ax.set_ylabel("mean RTT (us)" if kind == "latency" else "R+ (Mpps)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, dest, "sweep")


def sections(rows: Sequence[Row]) -> list[Section]:
    """The sweep table (none without sweep rows)."""
    pts = points(rows)
    if not pts:
        return []
    param = next(r.sweep_param for r in rows if r.sweep_param)
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
