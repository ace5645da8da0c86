"""Driving sluice-gen: its command line for a scenario, and its output read back.

One sluice-gen process is the generator, the sink and every inline VNF, in one loop on one
CPU (docs/gen.md). With --json it writes one JSON object a line: per-second records (with
`monotonic_s`), window records with --alternate (with `window`), and the summary last.
"""

from __future__ import annotations

import functools
import json
import resource
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.bench.stats import Sample
from sluice.bench.switches.base import Switch


def gen_path(repo: Path) -> Path:
    """sluice-gen as `make build` leaves it."""
    return repo / "build" / "tools" / "gen" / "sluice-gen"


@functools.lru_cache(maxsize=4)
def help_text(gen: Path) -> str:
    """sluice-gen --help, for feature checks."""
    r = subprocess.run([str(gen), "--help"], capture_output=True, text=True, timeout=10)
    return r.stdout + r.stderr


def has_inline_vnfs(gen: Path) -> bool:
    """Whether this sluice-gen serves inline VNFs (--vnf-in/--vnf-out/--vnf-dst-mac)."""
    return gen.exists() and "--vnf-in" in help_text(gen)


def port_args(sw: Switch, inline_vnfs: bool = True) -> list[str]:
    """--port for the switch's phy links, --sink-port for its fan-out sinks, --vnf-in/--vnf-out
    for its VNFs, which rewrite the destination MAC as DPDK's l2fwd does (sluice-gen's
    default: 02:00:00:00:00:0P). Without INLINE_VNFS the VNFs are processes of their own
    (vnfs.py): phy ports only."""
    assert sw.topology is not None
    args: list[str] = []
    vnf_links = [link for link in sw.topology.links if link.role == "vnf" and inline_vnfs]
    for link in sw.topology.links:
        if link.role in ("phy", "sink"):
            args += ["--port" if link.role == "phy" else "--sink-port", sw.gen_spec(link)]
    for k in range(0, len(vnf_links), 2):
        args += ["--vnf-in", sw.gen_spec(vnf_links[k]), "--vnf-out",
                 sw.gen_spec(vnf_links[k + 1])]
    return args


@dataclass
class GenResult:
    """What one sluice-gen run produced."""

    summary: dict[str, Any]
    samples: list[Sample]
    windows: list[dict[str, Any]]
    started_monotonic: float
    cpu_s: float
    log: Path
    extra: dict[str, Any] = field(default_factory=dict)


def has_sink_ports(gen: Path) -> bool:
    """Whether this sluice-gen has receive-only fan-out ports (--sink-port)."""
    return gen.exists() and "--sink-port" in help_text(gen)


def sink_rates(obj: dict[str, Any], before: tuple[float, list[int]]) -> tuple[float, ...]:
    """Each sink port's received rate over one per-second record OBJ (sluice-gen counts
    copies per --sink-port so far); BEFORE is the previous record's (t, counts)."""
    counts = [int(n) for n in obj.get("sink_rx_packets", [])]
    t0, last = before
    dt = float(obj["t"]) - t0
    if not counts or dt <= 0:
        return ()
    last = last or [0] * len(counts)
    return tuple((n - p) / dt for n, p in zip(counts, last, strict=True))


def parse_lines(text: str) -> tuple[list[Sample], list[dict[str, Any]], dict[str, Any]]:
    """Per-second samples, window records and the summary from --json output."""
    samples: list[Sample] = []
    windows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    before: tuple[float, list[int]] = (0.0, [])
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if "window" in obj:
            windows.append(obj)
        elif "tx_packets" in obj and "streams" in obj:
            summary = obj
        elif "monotonic_s" in obj:
            sinks = sink_rates(obj, before)
            before = (float(obj["t"]), [int(n) for n in obj.get("sink_rx_packets", [])])
            samples.append(Sample(float(obj["t"]), float(obj["monotonic_s"]),
                                  float(obj["tx_pps"]), float(obj["rx_pps"]), sinks))
    return samples, windows, summary


def wait(proc: subprocess.Popen[bytes], out: Path, timeout: float,
         on_summary: Callable[[], None], marks: dict[str, float]) -> int:
    """Waits for PROC; calls ON_SUMMARY once, as soon as its summary file OUT exists (and
    notes when in MARKS)."""
    deadline = time.monotonic() + timeout
    called = False
    while True:
        try:
            return proc.wait(0.1)
        except subprocess.TimeoutExpired:
            if not called and out.exists():
                marks["summary_seen"] = time.monotonic()
                on_summary()
                called = True
            if time.monotonic() > deadline:
                raise


def run(cmd: list[str], log: Path, out: Path, timeout: float,
        on_summary: Callable[[], None] = lambda: None) -> GenResult:
    """Runs CMD (a sluice-gen command with --json --out OUT) to its end.

    Output goes to files, not pipes, and only the generator's own PID is waited for: its
    watchdog child (sluice-gen-wd) inherits stdout, and a pipe would stay open for as long
    as that lives. A generator that outlives TIMEOUT is killed (by PID); if it had written
    its summary by then, the run still counts and the log says so. ON_SUMMARY runs as soon
    as the summary is written (the runner continues every switch of the trial then: a
    vhost-user backend left stopped would hold the generator's device close). CPU seconds come from
    the children's rusage: the harness waits for one child at a time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    stdout, stderr = log.with_suffix(".stdout"), log.with_suffix(".stderr")
    note = ""
    marks: dict[str, float] = {"popen": t0}
    with stdout.open("w") as o, stderr.open("w") as e:
        proc = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        marks["started"] = time.monotonic()
        try:
            code = wait(proc, out, timeout, on_summary, marks)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            done = out.exists()
            note = f"# killed after {timeout:.0f} s, summary {'written' if done else 'missing'}\n"
            code = 0 if done else -9
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    marks["exited"] = time.monotonic()
    wall = marks["exited"] - t0
    text, err = stdout.read_text(errors="replace"), stderr.read_text(errors="replace")
    # CLOCK_MONOTONIC marks, comparable with the generator's monotonic_s: a slow start or
    # a slow exit shows which phase took the time.
    when = " ".join(f"{k}={v:.3f}" for k, v in marks.items())
    log.write_text(f"$ {' '.join(cmd)}\n# wall {wall:.2f} s\n# monotonic {when}\n"
                   f"{note}{text}\n{err}")
    stdout.unlink()
    stderr.unlink()
    if code != 0:
        raise RuntimeError(f"sluice-gen exited with {code}: "
                           f"{' | '.join(err.strip().splitlines()[-3:])} (log {log})")
    samples, windows, summary = parse_lines(text)
    if out.exists():
        summary = json.loads(out.read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return GenResult(summary, samples, summary.get("windows", windows), t0, cpu, log)
