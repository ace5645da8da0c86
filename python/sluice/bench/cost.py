"""Cost per packet: what forwarding one packet costs each switch's forwarding thread.

A rate here is often set by the generator, not the switch; cycles per packet are not (issue
17, section 2). Two figures per switch, taken in every trial:

- **its own**: the busy cycles its forwarding thread counts with the TSC over the packets it
  received, read from the switch itself (`Switch.cost_meter()`): sluiced's worker counters
  (`stats`), testpmd's `--record-core-cycles` (`show fwd stats all`), OVS's
  `dpif-netdev/pmd-perf-show`, VPP's `show runtime`. Each counts a little differently (the
  adapters say how), so compare a switch with itself across runs, and switches by ratio.
- **the cross-check, the same for every switch**: the CPU time of its forwarding threads
  (the threads pinned to the switch CPU alone) from /proc/PID/task/TID/schedstat (ns;
  /proc/PID/task/TID/stat's clock ticks where schedstat is missing), over exactly the
  seconds sluice-gen counted, divided by the frames the sink received in them, in ns and in
  TSC cycles (sluice-gen's `tsc_hz`). A busy poller uses its CPU all the time, so this is
  the whole CPU the switch spent per frame, idle polls included.

A switch's figures cover only time it ran: in alternating windows a `Sampler` notes when
each switch is stopped and continued (/proc/PID/stat), opens its own reading after the
window's settling time and closes it before the window ends, so a SIGSTOP never falls
inside one; CPU time is read every few milliseconds and interpolated at the boundaries of
each window's counted part, when the stopped switch accrues none anyway. Window by window,
each switch's cost is compared with its two neighbours of the other switch, as rates are
(windows.py): the cost ratio comes with quartiles and the number of windows.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sluice.bench.stats import Sample

if TYPE_CHECKING:
    from sluice.bench.switches.base import Switch

POLL_S = 0.01          # how often the sampler reads states and CPU times
MARGIN_S = 0.05        # an own reading starts this long after the settling time, ends before
SPAN_S = 0.5           # own readings' length where the switch runs throughout (interleaved)
MAX_GAP_S = 0.05       # CPU samples must lie this close to a boundary to interpolate there
PROC = Path("/proc")


@dataclass(frozen=True)
class Own:
    """A switch's own count over one interval: busy TSC cycles and packets received."""

    busy_cycles: float
    packets: int


class Meter(Protocol):
    """A switch's own cycle counters (Switch.cost_meter). `begin` starts an interval (reads
    the counters, or clears them where the switch clears its own: OVS, VPP) and returns a
    token, None when the switch did not answer; `end` returns the interval's count."""

    source: str

    def begin(self) -> object | None: ...

    def end(self, token: object) -> Own | None: ...


class CumulativeMeter:
    """A Meter over counters that only grow: READ gives (busy cycles, packets) so far."""

    def __init__(self, source: str, read: Callable[[], tuple[float, int] | None]) -> None:
        self.source = source
        self.read = read

    def begin(self) -> object | None:
        return self.read()

    def end(self, token: object) -> Own | None:
        now = self.read()
        if now is None or not isinstance(token, tuple):
            return None
        return Own(now[0] - token[0], now[1] - token[1])


class ClearingMeter:
    """A Meter over counters the switch clears on request (OVS's pmd-stats-clear, VPP's
    clear runtime): CLEAR returns whether it worked, READ the counts since."""

    def __init__(self, source: str, clear: Callable[[], bool],
                 read: Callable[[], tuple[float, int] | None]) -> None:
        self.source = source
        self.clear = clear
        self.read = read

    def begin(self) -> object | None:
        return True if self.clear() else None

    def end(self, token: object) -> Own | None:
        now = self.read()
        return None if now is None else Own(now[0], now[1])


@dataclass(frozen=True)
class Interval:
    """One own reading: its counters cover time between T0 (begin asked) and T1 (end answered)."""

    t0: float
    t1: float
    own: Own


@dataclass
class Trace:
    """What the sampler saw of one switch during one trial."""

    threads: list[str] = field(default_factory=list)      # forwarding threads read
    cpu: list[tuple[float, int]] = field(default_factory=list)   # (monotonic s, CPU ns)
    intervals: list[Interval] = field(default_factory=list)
    source: str = ""                                      # the meter's, "" without one


# -- /proc ---------------------------------------------------------------------------------

def allowed_cpus(status: str) -> set[int]:
    """The CPUs of a /proc/.../status text's Cpus_allowed_list ('0-2,5' -> {0, 1, 2, 5})."""
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            out: set[int] = set()
            for part in line.split(":", 1)[1].strip().split(","):
                lo, _, hi = part.partition("-")
                if lo:
                    out.update(range(int(lo), int(hi or lo) + 1))
            return out
    return set()


def pinned_threads(pids: Sequence[int], cpu: int, proc: Path = PROC
                   ) -> list[tuple[int, int, str]]:
    """(pid, tid, name) of the threads of PIDS that may run on CPU alone: a switch's
    forwarding threads (its control threads are pinned to the generator's CPU)."""
    out = []
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in sorted((proc / str(pid) / "task").iterdir(), key=lambda p: int(p.name)):
                with contextlib.suppress(OSError, ValueError):
                    if allowed_cpus((task / "status").read_text()) == {cpu}:
                        out.append((pid, int(task.name), (task / "comm").read_text().strip()))
    return out


def thread_cpu_ns(pid: int, tid: int, proc: Path = PROC) -> int | None:
    """CPU time of thread TID of PID so far, ns: schedstat's first field, else utime + stime
    of its stat in clock ticks (10 ms here); None when it is gone."""
    task = proc / str(pid) / "task" / str(tid)
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((task / "schedstat").read_text().split()[0])
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    return None


def stopped(pid: int, proc: Path = PROC) -> bool:
    """Whether PID is stopped by a signal (state T) or gone."""
    try:
        return (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] in "TtZX"
    except (OSError, IndexError):
        return True


# -- the sampler ---------------------------------------------------------------------------

@dataclass
class _Run:
    """A switch's state as the poll thread last saw it."""

    running: bool = False
    since: float = 0.0          # when it was last seen continued (or first seen running)
    run_id: int = 0             # counts the stretches it ran


class Sampler:
    """During one trial: each switch's forwarding threads' CPU time every POLL_S, and its own
    readings (Meter) placed inside each stretch it runs. ALTERNATING: one reading per
    stretch, from SETTLE_S + MARGIN_S after it was continued to MARGIN_S before WINDOW_S
    ends; otherwise back-to-back readings of SPAN_S. Use as a context manager around the
    generator's run; `traces` holds what was seen, by key."""

    def __init__(self, switches: Mapping[str, Switch], cpu: int, *, alternating: bool,
                 settle_s: float, window_s: float, span_s: float = SPAN_S) -> None:
        self.alternating = alternating
        self.settle_s, self.window_s, self.span_s = settle_s, window_s, span_s
        self.pid = {k: sw.pids()[0] for k, sw in switches.items() if sw.pids()}
        self.threads = {k: pinned_threads(sw.pids(), cpu) for k, sw in switches.items()
                        if k in self.pid}
        self.meters: dict[str, Meter] = {}
        for k, sw in switches.items():
            m = sw.cost_meter() if k in self.pid else None
            if m is not None:
                self.meters[k] = m
        self.traces = {k: Trace(threads=[n for _, _, n in self.threads[k]],
                                source=self.meters[k].source if k in self.meters else "")
                       for k in self.pid}
        self.runs = {k: _Run() for k in self.pid}
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []

    def __enter__(self) -> Sampler:
        self.poll_once()
        self._workers = [threading.Thread(target=self._poll_loop, daemon=True),
                         threading.Thread(target=self._meter_loop, daemon=True)]
        for t in self._workers:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._workers:
            t.join(timeout=30)
        self.poll_once()

    def poll_once(self) -> None:
        """One reading of every switch's state and forwarding threads' CPU time."""
        for k, pid in self.pid.items():
            now = time.monotonic()
            run = self.runs[k]
            if stopped(pid):
                run.running = False
            elif not run.running:
                run.running, run.since, run.run_id = True, now, run.run_id + 1
            vals = [thread_cpu_ns(p, t) for p, t, _ in self.threads[k]]
            if vals and all(v is not None for v in vals):
                self.traces[k].cpu.append((now, sum(v for v in vals if v is not None)))

    def _poll_loop(self) -> None:
        while not self._stop.wait(POLL_S):
            self.poll_once()

    def _meter_loop(self) -> None:
        # key -> (run_id, token, t0) of the reading in progress; run ids already measured
        open_: dict[str, tuple[int, object, float]] = {}
        done: dict[str, int] = defaultdict(int)
        while not self._stop.wait(POLL_S / 2):
            for k, meter in self.meters.items():
                self._meter_step(k, meter, open_, done)

    def _meter_step(self, k: str, meter: Meter, open_: dict[str, tuple[int, object, float]],
                    done: dict[str, int]) -> None:
        run, now = self.runs[k], time.monotonic()
        cur = open_.get(k)
        if cur is not None and (cur[0] != run.run_id or not run.running):
            del open_[k]                            # a stop fell inside: nothing to keep
            cur = None
        if self.alternating:
            end_at = run.since + self.window_s - MARGIN_S
            if cur is not None and now >= end_at:
                self._finish(k, meter, open_.pop(k))
            elif (cur is None and run.running and done[k] != run.run_id
                  and run.since + self.settle_s + MARGIN_S <= now < end_at - 2 * MARGIN_S):
                done[k] = run.run_id
                self._start(k, meter, open_, run.run_id)
        elif run.running:
            if cur is not None and now >= cur[2] + self.span_s:
                self._finish(k, meter, open_.pop(k))
                cur = None
            if cur is None:
                self._start(k, meter, open_, run.run_id)

    @staticmethod
    def _start(k: str, meter: Meter, open_: dict[str, tuple[int, object, float]],
               run_id: int) -> None:
        t0 = time.monotonic()
        token = meter.begin()
        if token is not None:
            open_[k] = (run_id, token, t0)

    def _finish(self, k: str, meter: Meter, cur: tuple[int, object, float]) -> None:
        own = meter.end(cur[1])
        t1 = time.monotonic()
        if own is not None and self.runs[k].run_id == cur[0]:
            self.traces[k].intervals.append(Interval(cur[2], t1, own))


# -- from traces to figures ----------------------------------------------------------------

def cpu_ns_at(cpu: Sequence[tuple[float, int]], t: float) -> float | None:
    """The CPU ns at time T, interpolated between the samples around it (None when no
    samples lie within MAX_GAP_S on both sides)."""
    before = [s for s in cpu if s[0] <= t]
    after = [s for s in cpu if s[0] >= t]
    if not before or not after:
        return None
    (ta, va), (tb, vb) = before[-1], after[0]
    if t - ta > MAX_GAP_S or tb - t > MAX_GAP_S:
        return None
    return float(va) if tb == ta else va + (vb - va) * (t - ta) / (tb - ta)


def cpu_ns_between(cpu: Sequence[tuple[float, int]], a: float, b: float) -> float | None:
    """CPU ns spent from A to B (None when either end cannot be interpolated)."""
    va, vb = cpu_ns_at(cpu, a), cpu_ns_at(cpu, b)
    return None if va is None or vb is None else vb - va


def own_within(intervals: Sequence[Interval], a: float, b: float) -> Own | None:
    """The sum of the own readings lying wholly within [A, B] (None: none does)."""
    inside = [i.own for i in intervals if i.t0 >= a and i.t1 <= b]
    pkts = sum(o.packets for o in inside)
    if not inside or pkts <= 0:
        return None
    return Own(sum(o.busy_cycles for o in inside), pkts)


@dataclass(frozen=True)
class Span:
    """One counted stretch of one switch: a window (alternating) or a second (interleaved)."""

    side: str             # A or B ('' for interleaved)
    label: str            # placement
    start: float          # counted part, CLOCK_MONOTONIC
    end: float
    rx_packets: float     # frames the sink received in it
    own_lo: float = 0.0   # where own readings may lie (the whole stretch the switch ran)
    own_hi: float = 0.0


@dataclass(frozen=True)
class SpanCost:
    """One span's cost per packet: own (cycles) and /proc (ns and cycles); None: unknown."""

    side: str
    label: str
    own_cpp: float | None
    proc_nspp: float | None
    proc_cpp: float | None


def span_cost(span: Span, trace: Trace | None, tsc_hz: float | None) -> SpanCost:
    """SPAN's cost from TRACE."""
    own_cpp = proc_ns = None
    if trace is not None:
        own = own_within(trace.intervals, span.own_lo, span.own_hi)
        own_cpp = own.busy_cycles / own.packets if own else None
        ns = cpu_ns_between(trace.cpu, span.start, span.end)
        proc_ns = ns / span.rx_packets if ns is not None and span.rx_packets > 0 else None
    return SpanCost(span.side, span.label, own_cpp, proc_ns,
                    proc_ns * tsc_hz / 1e9 if proc_ns is not None and tsc_hz else None)


# One alternating window: (index, side A/B, start, counted_s, rx_packets, placement label).
WindowRecord = tuple[int, str, float, float, float, str]


def window_spans(windows: Sequence[WindowRecord], settle_s: float, window_s: float
                 ) -> list[Span]:
    """Spans of alternating WINDOWS, in index order. sluice-gen counts from the first pass
    after SETTLE_S to the window's close, which is the next window's start; own readings
    may lie anywhere from the settling time until the switch is stopped, at that close."""
    ws = sorted(windows)
    out = []
    for j, (_, side, start, counted, rx, label) in enumerate(ws):
        if j + 1 < len(ws):
            close = ws[j + 1][2]
        else:
            close = start + (settle_s + counted if counted > 0 else window_s)
        out.append(Span(side, label, close - counted, close, rx, start + settle_s, close))
    return out


def neighbour_ratios(costs: Sequence[SpanCost], attr: str) -> dict[str, list[float]]:
    """A/B cost ratios by placement label: each window's ATTR over the mean of its two
    neighbours' (of the other switch), filed under its label when both neighbours share it,
    else 'mixed'; windows without the figure, or beside one without it, give none."""
    out: dict[str, list[float]] = defaultdict(list)
    for i in range(1, len(costs) - 1):
        before, w, after = costs[i - 1], costs[i], costs[i + 1]
        if w.side in (before.side, after.side):
            continue
        v, b, a = getattr(w, attr), getattr(before, attr), getattr(after, attr)
        if not v or not b or not a:
            continue
        other = (a + b) / 2
        r = v / other if w.side == "A" else other / v
        out[w.label if w.label == before.label == after.label else "mixed"].append(r)
    return out


def _r(values: Sequence[float | None], digits: int = 1) -> list[float]:
    return [round(v, digits) for v in values if v is not None]


def row_cost(costs: Sequence[SpanCost], trace: Trace | None, tsc_hz: float | None,
             ratios: Mapping[str, list[float]] | None = None,
             own: Sequence[float] | None = None) -> dict[str, Any]:
    """A row's `cost` field from the spans COSTS of one switch in one placement: own cycles
    per packet (OWN when given, else the spans'), /proc ns and cycles per packet, and its
    cost over the other switch's, window by window (RATIOS: 'own_cpp' and 'proc_nspp' lists,
    this switch over the other). {} when nothing was measured."""
    own_vals = _r(own if own is not None else [c.own_cpp for c in costs])
    nspp = _r([c.proc_nspp for c in costs], 2)
    if not own_vals and not nspp:
        return {}
    return {"own_cpp": own_vals, "proc_cpp": _r([c.proc_cpp for c in costs]),
            "proc_nspp": nspp, "own_source": trace.source if trace else "",
            "proc_threads": trace.threads if trace else [],
            "tsc_hz": round(tsc_hz) if tsc_hz else None,
            "own_ratio": [round(v, 4) for v in (ratios or {}).get("own_cpp", [])],
            "proc_ratio": [round(v, 4) for v in (ratios or {}).get("proc_nspp", [])]}


def alternating(windows: Sequence[WindowRecord], traces: Mapping[str, Trace | None],
                settle_s: float, window_s: float, tsc_hz: float | None
                ) -> dict[tuple[str, str], dict[str, Any]]:
    """The `cost` field of each (side, label) of an alternating trial: WINDOWS as
    sluice-gen reported them (warm-up ones left out), TRACES by side (A, B)."""
    costs = [span_cost(s, traces.get(s.side), tsc_hz)
             for s in window_spans(windows, settle_s, window_s)]
    ratios = {a: neighbour_ratios(costs, a) for a in ("own_cpp", "proc_nspp")}
    out = {}
    for side, label in {(c.side, c.label) for c in costs}:
        mine = {a: [r if side == "A" else 1 / r for r in by.get(label, [])]
                for a, by in ratios.items()}
        out[(side, label)] = row_cost([c for c in costs if c.side == side and c.label == label],
                                      traces.get(side), tsc_hz, mine)
    return out


def interleaved(samples: Sequence[Sample], labels: Sequence[str], trace: Trace | None,
                tsc_hz: float | None) -> dict[str, dict[str, Any]]:
    """The `cost` field per placement label of a one-switch trial: /proc per counted second
    (SAMPLES, already trimmed, each with its label in LABELS), own per reading lying wholly
    within seconds of one label."""
    spans = [Span("", lab, s.monotonic_s - 1.0, s.monotonic_s, s.rx_pps)
             for s, lab in zip(samples, labels, strict=True)]
    costs = [span_cost(sp, trace, tsc_hz) for sp in spans]
    out = {}
    for label in set(labels):
        mine = [sp for sp in spans if sp.label == label]
        own = [i.own.busy_cycles / i.own.packets for i in (trace.intervals if trace else [])
               if i.own.packets > 0 and _within_label(i, spans, label)]
        out[label] = row_cost([c for c in costs if c.label == label], trace, tsc_hz,
                              own=own) if mine else {}
    return out


def _within_label(iv: Interval, spans: Sequence[Span], label: str) -> bool:
    """Whether interval IV lies wholly within counted seconds, all of them of LABEL."""
    touched = [sp for sp in spans if sp.start < iv.t1 and sp.end > iv.t0]
    if not touched or any(sp.label != label for sp in touched):
        return False
    return min(sp.start for sp in touched) <= iv.t0 and max(sp.end for sp in touched) >= iv.t1


def median_or_none(values: Sequence[float]) -> float | None:
    """The median of VALUES, None when there are none."""
    return statistics.median(values) if values else None
