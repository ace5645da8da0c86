"""The CPU-arrangement rule: two busy pollers never share a CPU at the same time.

On a 2-CPU machine two busy-polling processes on one CPU take turns a few milliseconds at a
time and measure the kernel's scheduler, not the switch (../shared/PLATFORM.md). The harness
lists, for each phase of a run, the pollers that run at once; in alternating windows a
stopped switch is not running, so switches whose forwarding threads share a CPU are allowed
when only one of them runs at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Poller:
    """A busy-polling thread: who owns it and the CPU it is pinned to."""

    owner: str
    cpu: int


class SharedCpuError(RuntimeError):
    """Two busy pollers would run on one CPU at once."""


def conflicts(running_together: Iterable[Poller]) -> list[str]:
    """One sentence per CPU that has more than one of the pollers that run together."""
    by_cpu: dict[int, list[str]] = defaultdict(list)
    for p in running_together:
        by_cpu[p.cpu].append(p.owner)
    return [f"CPU {cpu}: {' and '.join(owners)} would busy-poll on the same CPU"
            for cpu, owners in sorted(by_cpu.items()) if len(owners) > 1]


def check(phases: Iterable[Iterable[Poller]], allow_shared_cpu: bool) -> bool:
    """Checks every phase (a set of pollers that run at once).

    Returns True when the arrangement is oversubscribed but allowed (rows are then marked
    `oversubscribed`), False when it is clean; raises SharedCpuError when it is
    oversubscribed and not allowed."""
    found = [c for phase in phases for c in conflicts(phase)]
    if found and not allow_shared_cpu:
        raise SharedCpuError("; ".join(found) + " (measures the scheduler, not the switch; "
                             "use other CPUs, or --allow-shared-cpu to run and mark the rows "
                             "oversubscribed)")
    return bool(found)
