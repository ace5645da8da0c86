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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.bench import program
from sluice.bench.stats import Sample
from sluice.bench.switches.base import Switch


def gen_path(repo: Path) -> Path:
    """sluice-gen as `make build` leaves it, else the installed one."""
    return program(repo, "build/tools/gen/sluice-gen", "sluice-gen")


@functools.lru_cache(maxsize=4)
def help_text(gen: Path) -> str:
    """sluice-gen --help, for feature checks."""
    r = subprocess.run([str(gen), "--help"], capture_output=True, text=True, timeout=10)
    return r.stdout + r.stderr


def has_inline_vnfs(gen: Path) -> bool:
    """Whether this sluice-gen serves inline VNFs (--vnf-in/--vnf-out/--vnf-dst-mac)."""
    return gen.exists() and "--vnf-in" in help_text(gen)


def has_vnf_kinds(gen: Path) -> bool:
    """Whether this sluice-gen has --vnf-kind (the inline L3 VNF)."""
    return gen.exists() and "--vnf-kind" in help_text(gen)


def link_mac(index: int) -> str:
    """The MAC the generator's end of a topology's INDEX-th link takes in a learning chain."""
    return f"02:5b:00:00:{index >> 8 & 0xff:02x}:{index & 0xff:02x}"


@dataclass
class PortArgs:
    """One switch's part of a sluice-gen command: its ports and VNFs, and the destination
    MACs of its sending streams (forward: the pairs' first ports; reverse: with --bidir)."""

    args: list[str]
    forward_dst: list[str]
    reverse_dst: list[str]


def steer_by_mac(sw: Switch, inline_vnfs: bool) -> bool:
    """Whether SW's chain is steered by MAC: a learning switch, inline VNFs, one bridge for
    every port (kernel switches bridge each segment apart and keep the kernel's MACs)."""
    assert sw.topology is not None
    return (sw.learns and inline_vnfs and not sw.veth_only
            and any(link.role == "vnf" for link in sw.topology.links))


def port_args(sw: Switch, inline_kinds: Sequence[str] | None = None) -> PortArgs:
    """--port for the switch's phy links, --sink-port for its fan-out sinks, --vnf-in/--vnf-out
    for its VNFs, which rewrite
    the destination MAC as DPDK's l2fwd does (sluice-gen's default: 02:00:00:00:00:0P).
    INLINE_KINDS: sluice-gen's --vnf-kind of each VNF in chain order (None: every one l2,
    the option left out); () when the VNFs are processes of their own (vnfs.py): phy ports
    only.

    A learning switch's chain is steered by MAC instead (steer_by_mac): every generator end
    gets a MAC of ours (link_mac), the first port of a pair sends to the first VNF's in
    port, each VNF sends to the next hop's port (and back to the previous one), and the last
    VNF to the pair's second port; sluice-gen's --announce has the switch learn them all."""
    assert sw.topology is not None
    links = sw.topology.links
    inline_vnfs = inline_kinds is None or len(inline_kinds) > 0
    by_mac = steer_by_mac(sw, inline_vnfs)

    def spec(i: int) -> str:
        return sw.gen_spec(links[i]) + (f",mac={link_mac(i)}" if by_mac else "")

    out = PortArgs([], [], [])
    phys = [i for i, link in enumerate(links) if link.role == "phy"]
    for i in phys:
        out.args += ["--port", spec(i)]
    for i, link in enumerate(links):
        if link.role == "sink":                     # fan-out: receive-only ports
            out.args += ["--sink-port", spec(i)]
    vnf = [i for i, link in enumerate(links) if link.role == "vnf" and inline_vnfs]
    for k in range(0, len(vnf), 2):
        a, b = vnf[k], vnf[k + 1]
        # Links run phy, v1a, v1b, ..., vNb, phy per pair: the next hop of b is b + 1, the
        # previous hop of a is a - 1. --vnf-dst-mac goes with every VNF, since sluice-gen
        # gives the k-th to the k-th VNF whichever switch it serves (alternation puts
        # either switch first).
        out.args += ["--vnf-in", spec(a), "--vnf-out", spec(b), "--vnf-dst-mac",
                     f"{link_mac(b + 1)},{link_mac(a - 1)}" if by_mac else "l2fwd"]
    if inline_kinds and set(inline_kinds) != {"l2"}:
        if len(inline_kinds) != len(vnf) // 2:
            raise ValueError(f"{len(inline_kinds)} VNF kinds for {len(vnf) // 2} VNFs")
        for kind in inline_kinds:
            out.args += ["--vnf-kind", kind]
    # Pairs of phy ports (a fan-out's one sender has none: its frames are broadcast).
    for first, second in zip(phys[::2], phys[1::2], strict=False):
        out.forward_dst.append(link_mac(first + 1) if by_mac else "default")
        out.reverse_dst.append(link_mac(second - 1) if by_mac else "default")
    return out


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
