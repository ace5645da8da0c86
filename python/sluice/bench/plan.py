"""The trial plan: which switches run in which order, and by which method.

Userspace switches are compared in alternating windows (one sluice-gen run = one trial of a
switch against the baseline; even trials put the measured switch first in the generator's
loop, odd trials the baseline, so a bias of position cancels). Kernel switches, every
switch in a `kernel_path` scenario and every switch with VNF processes (`--vnf l2fwd`, ...)
run in interleaved trials in round-robin order: each trial visits every switch once,
starting one further along each time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sluice.bench.scenarios import Scenario

# What a start-up or a trial costs beyond its measured seconds, for the ETA.
START_S = 6.0
GEN_OVERHEAD_S = 3.0


@dataclass(frozen=True)
class TrialSpec:
    """One generator run. SWITCHES: (measured, baseline) for alternating, (one,) else."""

    scenario: Scenario
    size: int
    trial: int
    method: str
    switches: tuple[str, ...]

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
    alternating run, so each switch runs alone with its VNFs instead."""
    user = [k for k in keys if k not in kernel]
    process_vnfs = scn.vnf not in ("", "inline")
    if scn.kernel_path or process_vnfs or len(user) < 2 or len(user) != len(keys):
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


def expected_seconds(specs: Sequence[TrialSpec], duration: float, starts: int) -> float:
    """The plan's expected length, for the progress bar's ETA."""
    return starts * START_S + len(specs) * (duration + GEN_OVERHEAD_S)
