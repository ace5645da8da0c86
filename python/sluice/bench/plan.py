"""The trial plan: which switches run in which order, and by which method.

Userspace switches are compared in alternating windows (one sluice-gen run = one trial of a
switch against the baseline; even trials put the measured switch first in the generator's
loop, odd trials the baseline, so a bias of position cancels). Kernel switches, every
switch in a `kernel_path` scenario and every switch with VNF processes (`--vnf l2fwd`, ...)
run in interleaved trials in round-robin order: each trial visits every switch once,
starting one further along each time. Latency trials run
one switch at a time at a set rate (a fraction of its R+ measured earlier in the run, or a
fixed rate) after the throughput trials of their scenario.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sluice.bench.scenarios import Scenario

# What a start-up or a trial costs beyond its measured seconds, for the ETA.
START_S = 6.0
GEN_OVERHEAD_S = 3.0
# The published comparison's loads, as fractions of R+.
LOADS = (0.10, 0.50, 0.99)
# Latency-at-loads scenarios of the published comparison: p2p and loopback-1..4.
MAX_LATENCY_CHAIN = 4


@dataclass(frozen=True)
class TrialSpec:
    """One generator run. SWITCHES: (measured, baseline) for alternating, (one,) else."""

    scenario: Scenario
    size: int
    trial: int
    method: str                       # alternating, interleaved or latency
    switches: tuple[str, ...]
    load: float | None = None         # latency at this fraction of R+ ...
    rate_pps: float | None = None     # ... or at this fixed rate (all senders together)
    burst: int | None = None          # ... or the echo test's bursts of this many frames

    @property
    def latency_kind(self) -> str:
        """loads, fixed or echo for latency trials, '' for throughput ones."""
        if self.method != "latency":
            return ""
        if self.burst is not None:
            return "echo"
        return "loads" if self.load is not None else "fixed"

    @property
    def gen_order(self) -> tuple[str, ...]:
        """The switches in the generator's pair order (first pair first)."""
        if self.method == "alternating" and self.trial % 2:
            return self.switches[::-1]
        return self.switches


def round_robin(items: Sequence[str], trials: int) -> list[tuple[int, str]]:
    """(trial, item) pairs: every trial visits every item, each trial starting one later."""
    n = len(items)
    return [(t, items[(t + k) % n]) for t in range(trials) for k in range(n)]


def choose_method(scn: Scenario, keys: Sequence[str], kernel: set[str]) -> str:
    """alternating when two or more userspace switches share a non-kernel path and the VNFs,
    if any, are sluice-gen's own: VNF processes are not stopped with their switch inside an
    alternating run, so each switch runs alone with its VNFs instead. A fan-out runs
    interleaved: sluice-gen --alternate takes two sender/receiver pairs, not 1+N ports; and
    bidir too: sluice-gen refuses --alternate with --bidir (exit status 2)."""
    user = [k for k in keys if k not in kernel]
    process_vnfs = scn.process_vnfs
    # sluice-gen alternates between two pairs; a fan-out is one sender and N sinks.
    if (scn.kernel_path or process_vnfs or scn.family == "fanout" or len(user) < 2
            or len(user) != len(keys) or scn.direction == "bidir"):
        return "interleaved"
    return "alternating"


def pick_baseline(keys: Sequence[str], wanted: str) -> str:
    """WANTED (a key or an adapter name) if present, else the first key."""
    for k in keys:
        if k == wanted or k.split(":")[0] == wanted:
            return k
    return keys[0]


def trials_for(scn: Scenario, sizes: Sequence[int], keys: Sequence[str], kernel: set[str],
               trials: int, baseline: str) -> list[TrialSpec]:
    """Every trial of one scenario, in the order they run."""
    method = choose_method(scn, keys, kernel)
    out: list[TrialSpec] = []
    for size in sizes:
        if method == "alternating":
            base = pick_baseline(keys, baseline)
            others = [k for k in keys if k != base]
            out += [TrialSpec(scn, size, t, method, (k, base))
                    for t, k in round_robin(others, trials)]
        else:
            out += [TrialSpec(scn, size, t, method, (k,)) for t, k in round_robin(keys, trials)]
    return out


def has_load_latency(scn: Scenario) -> bool:
    """Whether the published comparison measured latency at loads in SCN (p2p and
    loopback-1..4, one way)."""
    return (scn.family == "p2p" or (scn.family == "loopback"
                                    and 1 <= scn.chain <= MAX_LATENCY_CHAIN)) and not scn.rtt


def latency_for(scn: Scenario, sizes: Sequence[int], keys: Sequence[str],
                loads: Sequence[float] = (), rate_pps: float | None = None,
                trials: int = 1) -> list[TrialSpec]:
    """Latency trials of SCN: each switch at each load (or at RATE_PPS), TRIALS times, in
    round-robin order so a placement phase does not fall on one switch only."""
    out: list[TrialSpec] = []
    for size in sizes:
        for t, k in round_robin(keys, trials):
            if rate_pps is not None:
                out.append(TrialSpec(scn, size, t, "latency", (k,), rate_pps=rate_pps))
            out += [TrialSpec(scn, size, t, "latency", (k,), load=f) for f in loads]
    return out


def echo_for(scn: Scenario, sizes: Sequence[int], keys: Sequence[str],
             bursts: Sequence[int], trials: int = 1) -> list[TrialSpec]:
    """The container study's echo test in SCN: each switch, size and burst length."""
    return [TrialSpec(scn, size, t, "latency", (k,), burst=b)
            for size in sizes for t, k in round_robin(keys, trials) for b in bursts]


def expected_seconds(specs: Sequence[TrialSpec], duration: float, starts: int) -> float:
    """The plan's expected length, for the progress bar's ETA."""
    return starts * START_S + len(specs) * (duration + GEN_OVERHEAD_S)
