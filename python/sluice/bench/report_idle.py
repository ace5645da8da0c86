"""The report's 'Idle CPU and idle-sleep latency' section, from OUT/idle/ (bench/idle.py).

Two tables: each switch's CPU with no traffic (median of its trials, least and most, the
threads that used it), and round-trip latency at 0.10 of R+ through sluiced with its idle
sleep against sluiced busy-polling, with the difference of the two.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sluice.bench import idle
from sluice.bench.report_latency import Section, latency_rows, pick_best, switch_key
from sluice.bench.schema import Row, load_rows

HEADING = "Idle CPU and idle-sleep latency"


def _goal(key: str, median: float) -> str:
    if not key.startswith("sluice:") or not key.endswith("+idle"):
        return ""
    met = "met" if median < idle.CPU_GOAL_PCT else "not met"
    return f"< {idle.CPU_GOAL_PCT:g} %: {met}"


def cpu_table(records: Sequence[dict[str, Any]], skipped: Sequence[dict[str, str]] = ()
              ) -> tuple[list[str], list[list[str]]]:
    """A line per switch: median % of a core, least-most, trials, threads; then the
    switches that did not run, and why."""
    headers = ["switch", "CPU % of a core (median)", "least-most %", "trials x s",
               "threads (median %)", "goal"]
    lines = []
    for t in idle.summarize(records):
        threads = ", ".join(f"{n} {p:.2f}" for n, p in t["threads"][:3] if p > 0) or "-"
        lines.append([t["switch"], f"{t['median']:.2f}", f"{t['min']:.2f}-{t['max']:.2f}",
                      f"{t['trials']} x {t['seconds']:.0f}", threads,
                      _goal(t["switch"], t["median"])])
    lines += [[s["switch"], "", "", "", f"not measured: {s['reason']}", ""]
              for s in skipped]
    return headers, lines


def _pct(rs: Sequence[Row], field: str) -> float:
    return statistics.median(r.latency_ns.get(field, 0.0) for r in rs)


def latency_table(rows: Sequence[Row], load: float = 0.10
                  ) -> tuple[list[str], list[list[str]]]:
    """A line per sluice variant at LOAD of its R+ (median over its trials of each trial's
    p50, p99 and mean), then the idle variant's excess over the busy one."""
    at = [r for r in latency_rows(rows) if r.latency_kind == "loads"
          and r.latency_load is not None and abs(r.latency_load - load) < 1e-9]
    headers = ["switch", "worker", "asked Mpps", "received Mpps", "loss", "p50 us", "p99 us",
               "mean us", "placement", "trials"]
    lines, got = [], {}
    for key in (idle.IDLE_KEY, idle.BUSY_KEY):
        lab, use = pick_best([r for r in at if switch_key(r) == key])
        if not use:
            continue
        got[key] = (lab, use)
        lines.append([key, "sleeps when idle" if key == idle.IDLE_KEY else "busy-polls",
                      f"{statistics.median(r.asked_pps or 0.0 for r in use) / 1e6:.3f}",
                      f"{statistics.median(r.rx_pps for r in use) / 1e6:.3f}",
                      f"{100 * statistics.median(r.loss for r in use):.2f} %",
                      f"{_pct(use, 'p50') / 1e3:.1f}", f"{_pct(use, 'p99') / 1e3:.1f}",
                      f"{_pct(use, 'mean') / 1e3:.1f}", lab, str(len(use))])
    if len(got) == 2:
        (li, ui), (lb, ub) = got[idle.IDLE_KEY], got[idle.BUSY_KEY]
        d50 = (_pct(ui, "p50") - _pct(ub, "p50")) / 1e3
        met = "met" if d50 < idle.LATENCY_GOAL_US else "not met"
        lines.append(["added by the idle sleep", f"goal < {idle.LATENCY_GOAL_US:g} us at "
                      f"p50: {met}", "", "", "", f"{d50:+.1f}",
                      f"{(_pct(ui, 'p99') - _pct(ub, 'p99')) / 1e3:+.1f}",
                      f"{(_pct(ui, 'mean') - _pct(ub, 'mean')) / 1e3:+.1f}",
                      li if li == lb else f"{li} / {lb}", ""])
    return headers, lines


CPU_TEXT = (
    "Each switch with two vhost-user ports and no traffic, alone on the machine (the others "
    "SIGSTOPped): the CPU time of its processes (utime + stime from /proc/PID/stat) over "
    "each trial, as % of one core (100: one CPU busy all the time), and per thread from "
    "/proc/PID/task/*/stat (DPDK 22.11 names a forwarding lcore rte-worker-N, sluiced's "
    "and testpmd's alike; OVS's is pmd-c01/...). Trials take the switches in turn. "
    "sluice:patch+idle is sluiced with its "
    "default adaptive idle sleep (--idle-sleep-us 50: spin 200 us after the last packet, "
    "then sleep 1 us, doubling up to 50 us, and up to 1 ms after 100 ms without a packet); "
    "the goal is under 5 % of a core. Busy-polling "
    "peers use about 100 %.")

LATENCY_TEXT = (
    "Round-trip time of 64 B frames in p2p/memif at 0.10 of each variant's R+ (both R+ from "
    "one alternating trial of the two, the latency trials one after the other in the same "
    "run): sluiced with its idle sleep against sluiced busy-polling (--idle-sleep-us 0, what "
    "the other tables measure). At 0.10 of R+ frames arrive far more often than every "
    "200 us, the worker's spin after its last packet, so it should not sleep between "
    "them; the excess is what the idle sleep still costs there. Each figure is the median "
    "over trials of that "
    "trial's p50, p99 or mean; the goal is under 10 us added at p50. Near placement is "
    "preferred; two labels mean the variants ran in different placements. A trial that "
    "received much less than it asked (loss) measured a stalled switch CPU, not the idle "
    "sleep: read its figures as the host's.")


def sections(d: Path) -> list[Section]:
    """The idle sections of results directory D (none when it has no OUT/idle)."""
    sub = d / idle.SUBDIR
    if not sub.is_dir():
        return []
    records = idle.load_cpu(d)
    rows = load_rows(sub / "results.jsonl") if (sub / "results.jsonl").exists() else []
    skipped = [s for s in manifest(d).get("skipped", []) if s.get("scenario", "")
               .startswith("v2v")]
    out: list[Section] = []
    h, lines = cpu_table(records, skipped)
    out.append((HEADING, CPU_TEXT, h, lines))
    h, lines = latency_table(rows)
    out.append((f"{HEADING}: latency at 0.10 of R+", LATENCY_TEXT, h, lines))
    return out


def manifest(d: Path) -> dict[str, Any]:
    """OUT/idle/manifest.json ({} without it)."""
    path = d / idle.SUBDIR / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {}
