"""sluice-bench idle: what an idle switch costs, and what sluiced's idle sleep adds (issue 15).

Two measurements, written under OUT/idle/:

- **Idle CPU** (`cpu.jsonl`): each switch started with two vhost-user ports (the v2v
  topology) and no traffic, alone on the machine (the others SIGSTOPped, as in every trial),
  its processes' CPU time (utime + stime from /proc/PID/stat, and per thread from
  /proc/PID/task/*/stat, so the forwarding thread's share shows) over SECONDS, as % of one
  core. Trials go round-robin over the switches.
- **Idle-sleep latency** (`results.jsonl`, the runner's rows): p2p/memif at 64 B, one
  alternating throughput trial of sluiced with its default idle sleep (`sluice:patch+idle`)
  against sluiced busy-polling (`sluice:patch`) for each one's R+, then a latency trial of
  each at LOAD of its R+, in one run and one placement where the monitor allows.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.bench import scenarios
from sluice.bench.plan import round_robin
from sluice.bench.runner import Live, Runner, Settings

CPU_FILE = "cpu.jsonl"
SUBDIR = "idle"
DEFAULT_CPU_SWITCHES = ("sluice:patch+idle", "testpmd:io", "ovs-dpdk:normal")
IDLE_KEY, BUSY_KEY = "sluice:patch+idle", "sluice:patch"
CPU_GOAL_PCT = 5.0       # issue 15: an idle sluiced uses under 5 % of a core
LATENCY_GOAL_US = 10.0   # ... and its idle sleep adds under 10 us at 0.10 of R+


@dataclass(frozen=True)
class Reading:
    """CPU ticks (utime + stime) of some processes at one moment: in all and per thread."""

    t_mono: float
    ticks: int
    threads: dict[int, tuple[str, int]]    # tid -> (name, ticks)


def stat_fields(text: str) -> tuple[str, list[str]]:
    """The name and the fields after it of one /proc/.../stat line. The name sits in
    parentheses and may hold spaces and parentheses itself: it ends at the last ')'."""
    head, _, rest = text.rpartition(")")
    if not head or "(" not in head:
        raise ValueError(f"not a /proc stat line: {text[:60]!r}")
    return head.split("(", 1)[1], rest.split()


def stat_ticks(text: str) -> tuple[str, int]:
    """The name and utime + stime (clock ticks) of one /proc/.../stat line; fields 14 and
    15 of proc(5), the 12th and 13th after the name."""
    name, fields = stat_fields(text)
    if len(fields) < 13:
        raise ValueError(f"short /proc stat line: {text[:60]!r}")
    return name, int(fields[11]) + int(fields[12])


def read(pids: Iterable[int], proc: Path = Path("/proc")) -> Reading | None:
    """The ticks of PIDS now (None when one is gone). A process's own line counts its
    exited threads too; a thread that ends between the two reads is left out of THREADS."""
    total, threads = 0, {}
    t = time.monotonic()
    for pid in pids:
        try:
            total += stat_ticks((proc / str(pid) / "stat").read_text())[1]
            tasks = list((proc / str(pid) / "task").iterdir())
        except (OSError, ValueError):
            return None
        for task in tasks:
            try:
                threads[int(task.name)] = stat_ticks((task / "stat").read_text())
            except (OSError, ValueError):
                continue
    return Reading(t, total, threads)


def percent(ticks: int, wall_s: float, tck: int) -> float:
    """TICKS of CPU time over WALL_S seconds as % of one core (100: one busy CPU)."""
    return 100.0 * ticks / tck / wall_s if wall_s > 0 else 0.0


def cpu_between(before: Reading, after: Reading, tck: int) -> dict[str, Any]:
    """CPU time between two readings: seconds, % of a core, and per thread (busiest first);
    a thread born between them counts from zero."""
    wall = after.t_mono - before.t_mono
    threads = []
    for tid, (name, ticks) in after.threads.items():
        d = ticks - before.threads.get(tid, (name, 0))[1]
        threads.append({"tid": tid, "name": name, "cpu_s": d / tck,
                        "percent": round(percent(d, wall, tck), 2)})
    threads.sort(key=lambda th: (-th["percent"], th["tid"]))
    d = after.ticks - before.ticks
    return {"wall_s": round(wall, 3), "cpu_s": d / tck,
            "percent": round(percent(d, wall, tck), 2), "threads": threads}


def by_name(threads: Sequence[dict[str, Any]]) -> dict[str, float]:
    """% of a core per thread name (threads of one name summed: OVS's handlers)."""
    out: dict[str, float] = defaultdict(float)
    for th in threads:
        out[th["name"]] += float(th["percent"])
    return dict(out)


def summarize(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per switch, in the order first seen: the median, least and most % of a core over its
    trials, and each thread name's median % (busiest first)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(r["switch"], []).append(r)
    out = []
    for key, rs in groups.items():
        pcts = [float(r["percent"]) for r in rs]
        names: dict[str, list[float]] = defaultdict(list)
        for r in rs:
            for name, p in by_name(r["threads"]).items():
                names[name].append(p)
        threads = sorted(((n, statistics.median(v + [0.0] * (len(rs) - len(v))))
                          for n, v in names.items()), key=lambda t: (-t[1], t[0]))
        out.append({"switch": key, "median": statistics.median(pcts), "min": min(pcts),
                    "max": max(pcts), "trials": len(rs),
                    "seconds": statistics.fmean(float(r["wall_s"]) for r in rs),
                    "threads": threads, "steering": rs[0].get("steering", "")})
    return out


@dataclass(frozen=True)
class IdleSettings:
    """What `sluice-bench idle` (or `run --idle-trials N`) measures."""

    cpu_switches: tuple[str, ...] = DEFAULT_CPU_SWITCHES
    seconds: float = 10.0           # one idle-CPU trial
    trials: int = 3                 # per switch, round-robin
    settle: float = 1.0             # after SIGCONT, before a trial counts
    latency: bool = True
    load: float = 0.10              # of each variant's R+
    latency_duration: float = 4.0   # seconds per latency trial, the first 1 not counted
    latency_trials: int = 1         # per variant, round-robin
    rplus_duration: float = 5.0     # the alternating trial that finds R+


def stage_settings(base: Settings, idle: IdleSettings) -> Settings:
    """The runner's settings for the latency part: p2p/memif at 64 B, the two sluice
    variants, one alternating trial for R+ and latency at IDLE.load of it; CPUs, tools and
    switch options as BASE's; rows under BASE.out/idle."""
    p2p = scenarios.parse("p2p", "memif", "uni")
    return Settings(units=((p2p, (64,)),), switches=(IDLE_KEY, BUSY_KEY), trials=1,
                    duration=idle.rplus_duration, window=1.0, settle=0.3, warmup=1.0,
                    cooldown=0.0, switch_cpu=base.switch_cpu, gen_cpu=base.gen_cpu,
                    allow_shared_cpu=False, baseline=BUSY_KEY, out=base.out / SUBDIR,
                    repo=base.repo, gen=base.gen, monitor=base.monitor,
                    latency=("loads",) if idle.latency else (),
                    latency_scenarios=("p2p",), latency_duration=idle.latency_duration,
                    latency_trials=idle.latency_trials, loads=(idle.load,),
                    switch_options=base.switch_options)


def measure(live: Live, key: str, seconds: float, settle: float,
            sleep: Callable[[float], None] = time.sleep) -> dict[str, Any] | None:
    """Continues KEY alone, waits SETTLE, measures its CPU over SECONDS, stops it again;
    None when its process is gone."""
    pids = live.pids([key])
    live.signal([key], signal.SIGCONT)
    try:
        sleep(settle)
        before = read(pids)
        sleep(seconds)
        after = read(pids)
    finally:
        live.signal([key], signal.SIGSTOP)
    if before is None or after is None:
        return None
    return cpu_between(before, after, os.sysconf("SC_CLK_TCK"))


def cpu_stage(runner: Runner, idle: IdleSettings, path: Path,
              say: Callable[[str], None]) -> list[dict[str, Any]]:
    """The idle-CPU trials; each record appended to PATH as it ends."""
    scn = scenarios.parse("v2v", "memif", "uni")
    keys = runner.usable_keys(scn, idle.cpu_switches)
    out: list[dict[str, Any]] = []
    with runner.scenario(scn, keys) as live:
        for t, key in round_robin([k for k in keys if k in live.switches], idle.trials):
            got = measure(live, key, idle.seconds, idle.settle)
            if got is None:
                runner.skip(key, scn, "its process ended during an idle-CPU trial")
                continue
            sw = live.switches[key]
            rec = {"switch": key, "trial": t, "scenario": "v2v (2 vhost-user ports, idle)",
                   "steering": sw.steering(), "switch_cpu": runner.s.switch_cpu,
                   "ctl_cpu": runner.s.gen_cpu, **got}
            with path.open("a") as f:
                f.write(json.dumps(rec, sort_keys=True) + "\n")
            out.append(rec)
            say(f"idle CPU {key} trial {t}: {got['percent']:.2f} % of a core over "
                f"{got['wall_s']:.1f} s")
    return out


def run(base: Settings, idle: IdleSettings, say: Callable[[str], None]) -> Path:
    """Both measurements; returns BASE.out/idle (cpu.jsonl, results.jsonl, manifest.json)."""
    s = stage_settings(base, idle)
    s.out.mkdir(parents=True, exist_ok=True)
    runner = Runner(s, lambda _s, what: say(what), say)
    try:
        cpu_stage(runner, idle, s.out / CPU_FILE, say)
    except BaseException:
        runner.write_manifest()
        runner.cleanup_work()
        raise
    if idle.latency:
        runner.run()             # writes the manifest and removes its work directory
    else:
        runner.write_manifest()
        runner.cleanup_work()
    return s.out


def load_cpu(d: Path) -> list[dict[str, Any]]:
    """The idle-CPU records of a results directory D ([] without any)."""
    path = d / SUBDIR / CPU_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
