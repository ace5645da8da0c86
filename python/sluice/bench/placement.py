"""vCPU placement labels from the monitor `bin/sluice-placement`.

The monitor (from sluice-gen's tools) bounces one cache line between the two CPUs a few
times a second and prints JSON lines `{"t_mono": S, "rtt_ns": N, "label": "near"|"far"}`.
A stretch of time is `near` or `far` when every probe inside it says so, `mixed` when they
disagree, and `unlabelled` when no probe fell inside it (or the monitor is not installed).
Probes labelled `unknown` (a monitor thread was not scheduled in time) are left out.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sluice.bench import procs, program


@dataclass(frozen=True)
class Probe:
    """One reading of the monitor."""

    t_mono: float
    rtt_ns: float
    label: str


def monitor_path(repo: Path) -> Path:
    """Where the monitor is expected: the checkout's wrapper, else the installed one."""
    return program(repo, "bin/sluice-placement", "sluice-placement")


def parse(text: str) -> list[Probe]:
    """The probes in the monitor's output (lines that are not probes are skipped)."""
    out: list[Probe] = []
    for line in text.splitlines():
        try:
            obj = json.loads(line)
            out.append(Probe(float(obj["t_mono"]), float(obj["rtt_ns"]), str(obj["label"])))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def label(probes: Sequence[Probe], start: float, end: float) -> str:
    """The label of the interval [START, END] on CLOCK_MONOTONIC."""
    seen = {p.label for p in probes if start <= p.t_mono <= end and p.label in ("near", "far")}
    if not seen:
        return "unlabelled"
    return seen.pop() if len(seen) == 1 else "mixed"


class Monitor:
    """Runs the monitor for the length of a trial when it is installed."""

    def __init__(self, exe: Path, work: Path, cpus: tuple[int, int]) -> None:
        self.exe = exe
        self.cpus = cpus
        self.out = work / "placement.jsonl"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def available(self) -> bool:
        """Whether the monitor exists."""
        return self.exe.exists()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The monitor runs inside this block (nothing happens without it)."""
        if self.available:
            cpus = f"{self.cpus[0]},{self.cpus[1]}"
            self.proc = subprocess.Popen([str(self.exe), "--cpus", cpus],
                                         stdout=self.out.open("ab"),
                                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            yield
        finally:
            if self.proc is not None:
                procs.stop(self.proc, timeout=5)
                self.proc = None

    def probes(self) -> list[Probe]:
        """Every probe recorded so far."""
        return parse(self.out.read_text()) if self.out.exists() else []
