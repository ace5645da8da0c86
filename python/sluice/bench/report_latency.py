"""The latency part of the report: the published comparison's RTT tables and CDF figures.

Rows of method `latency` are trials at a set rate: `loads` (a fraction of the switch's R+
from the same run, as the seven-switch comparison's table of RTTs for p2p and loopback-1..4)
or `fixed` (the four-port v2v round trip at a fixed rate, 1 Mpps in that study). The
latency is sluice-gen's: from the TSC written into the frame at sending to the TSC at
receipt in the same process, so every figure is a round trip through the whole path.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sluice.bench.schema import Row, best_label

Section = tuple[str, str, list[str], list[list[str]] | None]

TAILS_TEXT = (
    "On a shared 2-vCPU VM the tails measure the host as much as the switch: above p99.9 "
    "the host preempts a vCPU for tens of microseconds to milliseconds at a time, and a "
    "worker that sleeps when idle adds its wake-up delay to the first frame after a pause "
    "(here sluiced busy-polls, --idle-sleep-us 0, as its peers do). Means and medians "
    "compare switches; "
    "p99.9 and max describe the machine.")


def latency_rows(rows: Sequence[Row]) -> list[Row]:
    """The latency trials that may be compared (not oversubscribed)."""
    return [r for r in rows if r.method == "latency" and not r.oversubscribed
            and r.latency_ns.get("count", 0) > 0]


def switch_key(r: Row) -> str:
    """The switch and mode of a row, as the tables name it."""
    return r.key or f"{r.switch}:{r.mode}"


# Sweeps whose points every table already keeps apart: by frame size, and those whose
# scenario names the value (fanout-4, loopback-3/memif, v2v 4vs4).
SWEEPS_APART = ("size", "fanout", "chain", "pairs")


def scenario_of(r: Row) -> str:
    """v2v, p2p/memif, loopback-1/memif ... with the direction when not one-way, and a
    sweep's point (v2v flows=1000), so that no table pools the rows of different points."""
    name = f"{r.scenario}{'/' + r.phy if r.phy else ''}"
    if r.pairs > 1:
        name += f" {r.pairs}vs{r.pairs}"
    if r.direction != "uni":
        name += f" {r.direction}"
    if r.sweep_param and r.sweep_param not in SWEEPS_APART:
        name += f" {r.sweep_param}={r.sweep_value}"
    return name


def save_figure(fig: Any, dest: Path, name: str) -> str:
    """Writes FIG as DEST/NAME.png and .svg, closes it, returns NAME."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(dest / f"{name}.{ext}")
    plt.close(fig)
    return name


def _scn(r: Row) -> str:
    return f"{r.scenario}{'/' + r.phy if r.phy else ''}"


def _us(ns: float | None) -> str:
    return "" if ns is None else f"{ns / 1e3:.1f}"


def pick_best(rs: Sequence[Row]) -> tuple[str, list[Row]]:
    """The rows of the best placement label present (near first)."""
    lab = best_label(r.placement for r in rs)
    return lab, [r for r in rs if r.placement == lab]


def rplus_mismatch(at: Sequence[Row]) -> str:
    """A cell's mark when its R+ came from another placement than the trial ran in (R+ of
    near run far is an overload): ', R+ of near' and the like, else ''."""
    other = sorted({r.rplus_placement for r in at
                    if r.rplus_placement and r.rplus_placement != r.placement})
    return f", R+ of {'/'.join(other)}" if other else ""


def loads_table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    """Per scenario and switch: mean RTT (and p99) in us at each load, near rows first."""
    lat = [r for r in latency_rows(rows) if r.latency_kind == "loads"]
    loads = sorted({r.latency_load for r in lat if r.latency_load is not None})
    groups: dict[tuple[str, int, str], list[Row]] = defaultdict(list)
    for r in lat:
        groups[(_scn(r), r.size, switch_key(r))].append(r)
    headers = ["scenario", "size", "switch"]
    headers += [f"{f:g} R+: mean (p99) us" for f in loads] + ["trials"]
    lines = []
    for (scn, size, key), rs in sorted(groups.items()):
        cells = []
        for f in loads:
            lab, at = pick_best([r for r in rs if r.latency_load == f])
            if not at:
                cells.append("")
                continue
            mean = statistics.fmean(r.latency_ns["mean"] for r in at)
            p99 = statistics.fmean(r.latency_ns.get("p99", 0.0) for r in at)
            cells.append(f"{_us(mean)} ({_us(p99)}){'' if lab == 'near' else ' ' + lab}"
                         + rplus_mismatch(at))
        lines.append([scn, f"{size} B", key, *cells, str(len({r.trial for r in rs}))])
    return headers, lines


def fixed_table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    """Per fixed rate and switch: the round trip's statistics in us."""
    lat = [r for r in latency_rows(rows) if r.latency_kind == "fixed"]
    groups: dict[tuple[str, float, int, str], list[Row]] = defaultdict(list)
    for r in lat:
        groups[(_scn(r), r.asked_pps or 0.0, r.size, switch_key(r))].append(r)
    headers = ["scenario", "rate", "size", "switch", "mean us", "stdev us", "p50 us",
               "p99 us", "p99.9 us", "max us", "received Mpps", "loss", "placement",
               "trials"]
    lines = []
    for (scn, rate, size, key), rs in sorted(groups.items()):
        lab, use = pick_best(rs)

        def avg(field: str, use: list[Row] = use) -> float:
            return statistics.fmean(r.latency_ns.get(field, 0.0) for r in use)

        lines.append([f"{scn} round trip", f"{rate / 1e6:g} Mpps", f"{size} B", key,
                      _us(avg("mean")), _us(avg("stdev")), _us(avg("p50")), _us(avg("p99")),
                      _us(avg("p999")), _us(max(r.latency_ns.get("max", 0.0) for r in use)),
                      f"{statistics.fmean(r.rx_pps for r in use) / 1e6:.3f}",
                      f"{100 * statistics.fmean(r.loss for r in use):.3f} %", lab,
                      str(len(use))])
    return headers, lines


def read_hist(path: Path) -> list[tuple[float, float, int]] | None:
    """(low_ns, high_ns, count) buckets of a sluice-gen histogram file, None if unreadable."""
    try:
        obj: dict[str, Any] = json.loads(path.read_text())
        return [(float(lo), float(hi), int(n)) for lo, hi, n in obj["buckets"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cdf(buckets: Sequence[tuple[float, float, int]]) -> tuple[list[float], list[float]]:
    """Points of the cumulative distribution: bucket upper bounds (us) and fractions."""
    total = sum(n for _, _, n in buckets)
    xs, ys, run = [], [], 0
    for _, hi, n in sorted(buckets):
        run += n
        xs.append(hi / 1e3)
        ys.append(run / total if total else 0.0)
    return xs, ys


def cdf_figure(rows: Sequence[Row], results: Path, dest: Path) -> str | None:
    """One CDF panel per latency scenario (log-scale us), a curve per switch and load, from
    the kept histograms; writes DEST/latency-cdf.png/.svg and returns the base name."""
    lat = [r for r in latency_rows(rows) if r.hist]
    panels: dict[str, list[Row]] = defaultdict(list)
    for r in lat:
        what = f"{r.asked_pps / 1e6:g} Mpps" if r.latency_kind == "fixed" else "loads"
        panels[f"{_scn(r)} {r.size} B ({what})"].append(r)
    if not panels:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.2 * len(panels)), squeeze=False)
    for ax, (title, rs) in zip(axes[:, 0], sorted(panels.items()), strict=True):
        lab, use = pick_best(rs)
        for r in sorted(use, key=lambda r: (switch_key(r), r.latency_load or 0, r.trial)):
            buckets = read_hist(results / r.hist)
            if not buckets:
                continue
            xs, ys = cdf(buckets)
            at = f" @{r.latency_load:g} R+" if r.latency_load is not None else ""
            ax.step(xs, ys, where="post", label=f"{switch_key(r)}{at} t{r.trial}")
        ax.set_xscale("log")
        ax.set_xlabel("round-trip time (us, log scale)")
        ax.set_ylabel("fraction of frames")
        ax.set_title(f"{title}, {lab} placement")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, dest, "latency-cdf")


def sections(rows: Sequence[Row]) -> list[Section]:
    """The latency sections of the report (none when the run measured no latency)."""
    out: list[Section] = []
    h, lines = loads_table(rows)
    if lines:
        out.append(("Latency at 0.10, 0.50 and 0.99 of R+",
                    "Round-trip time of 64 B frames sent at a fraction of each switch's R+ "
                    "(measured earlier in the run, in the same placement where possible), as "
                    "the seven-switch comparison's table of RTTs for p2p and loopback chains. "
                    "Each cell: mean, with p99 in brackets, from near-placement trials, or else "
                    "labelled with the placement it ran in; 'R+ of near' (or far, any: all "
                    "rows) marks a trial whose R+ came from other rows than its own "
                    "placement's, when R+'s placement did not come back within 8 s or the "
                    "trial began at a moment labelled otherwise (in far placement, 0.99 of a "
                    "near R+ is an overload). "
                    + TAILS_TEXT, h, lines))
    h, lines = fixed_table(rows)
    if lines:
        out.append(("Latency at a fixed rate: the v2v round trip",
                    "Four vhost-user ports: the generator sends on one and receives on "
                    "another, an inline VNF forwards from its first port to its second, so "
                    "each round trip crosses the switch twice; one sluice-gen loop serves all "
                    "four ports, so both timestamps come from one TSC (the seven-switch "
                    "comparison's v2v latency at 1 Mpps).", h, lines))
    return out


def search_sections(rows: Sequence[Row]) -> list[Section]:
    """The NDR/PDR table (rows of method 'search'), PDR first."""
    found = [r for r in rows if r.method == "search" and not r.oversubscribed]
    if not found:
        return []
    found.sort(key=lambda r: (_scn(r), r.size, switch_key(r), r.search_goal != "pdr"))
    lines = [[_scn(r), f"{r.size} B", switch_key(r), r.search_goal.upper(),
              f"{r.loss * 100:g} %",
              f"{r.rx_pps / 1e6:.3f}" + (" (generator-bound)" if r.generator_bound else ""),
              f"{(r.search_lower_pps or 0) / 1e6:.3f}-{(r.search_upper_pps or 0) / 1e6:.3f}",
              r.placement, str(r.search_trials), str(r.search_repeated)] for r in found]
    rings = sorted({r.gen_ring for r in found if r.gen_ring})
    ring_text = (f" The generator's rings (memif rings, virtqueues) had "
                 f"{', '.join(map(str, rings))} slots, so a stall of the switch's vCPU is "
                 "buffered, not lost." if rings else
                 " The generator kept its default rings (1024 slots; virtio-user 256): "
                 "a stall of the switch's vCPU longer than a ring's worth is loss.")
    return [("NDR and PDR (MLRsearch)",
             "The highest offered rate with at most 0.5 % loss (PDR) and with none (NDR), found "
             "by FD.io CSIT's MLRsearch over open-loop sluice-gen trials (what a port refuses "
             "counts as loss). Each result rests on trials of one placement (named): a "
             "search waits for its placement before a trial, and starts again in the other "
             "when it does not come back, replaying that placement's earlier trials; 'trials "
             "repeated' ran in the other placement. 'bounds' are its relevant lower and upper "
             "bounds, the spread of the figure. PDR leads: NDR on a shared VM catches the "
             "host's rarest preemption. A generator that tried less than 99.5 % of the rate "
             "asked is charged the shortfall as loss, so it cannot be credited to the "
             "switch; a bound where that happened is marked generator-bound (the switch may "
             "do more). Searches ran one after another, so two switches' figures come from "
             "different minutes of a host whose speed drifts: compare them with care (the "
             "throughput tables' alternating windows are the comparison)." + ring_text,
             ["scenario", "size", "switch", "goal", "loss at most", "Mpps", "bounds Mpps",
              "placement", "trials kept", "trials repeated"], lines)]


def echo_table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    """Per scenario, size and switch: mean RTT per frame (p99) at each burst length."""
    lat = [r for r in latency_rows(rows) if r.latency_kind == "echo" and r.burst]
    bursts = sorted({r.burst for r in lat if r.burst})
    groups: dict[tuple[str, int, str], list[Row]] = defaultdict(list)
    for r in lat:
        groups[(_scn(r), r.size, switch_key(r))].append(r)
    headers = ["scenario", "size", "switch"] + [f"burst {b}: mean (p99) us" for b in bursts]
    lines = []
    for (scn, size, key), rs in sorted(groups.items()):
        cells = []
        for b in bursts:
            lab, at = pick_best([r for r in rs if r.burst == b])
            cells.append(f"{_us(statistics.fmean(r.latency_ns['mean'] for r in at))} "
                         f"({_us(statistics.fmean(r.latency_ns.get('p99', 0.0) for r in at))})"
                         f"{'' if lab == 'near' else ' ' + lab}" if at else "")
        lines.append([scn, f"{size} B", key, *cells])
    return headers, lines


def echo_sections(rows: Sequence[Row]) -> list[Section]:
    """The echo test's table (none without echo rows)."""
    h, lines = echo_table(rows)
    if not lines:
        return []
    return [("Latency: the echo test (container benchmark framework)",
             "A ping client on one container port and a reflector on the other, both in one "
             "sluice-gen loop, 1000 frames per second in bursts of the given length; every "
             "frame's round trip through the switch twice. At 1000 pps an idle-sleeping "
             "worker would wake for each burst; here every switch busy-polls (sluiced "
             "with --idle-sleep-us 0).", h, lines)]
