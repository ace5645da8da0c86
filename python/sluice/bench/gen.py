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


def port_args(sw: Switch) -> list[str]:
    """--port for the switch's phy links, --vnf-in/--vnf-out/--vnf-dst-mac for its VNFs.

    VNF k rewrites the destination MAC as DPDK's l2fwd does (02:00:00:00:00:<output port>)."""
    assert sw.topology is not None
    args: list[str] = []
    vnf_links = [link for link in sw.topology.links if link.role == "vnf"]
    for link in sw.topology.links:
        if link.role == "phy":
            args += ["--port", sw.gen_spec(link)]
    for k in range(0, len(vnf_links), 2):
        args += ["--vnf-in", sw.gen_spec(vnf_links[k]), "--vnf-out",
                 sw.gen_spec(vnf_links[k + 1]), "--vnf-dst-mac", f"02:00:00:00:00:{k + 1:02x}"]
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


def parse_lines(text: str) -> tuple[list[Sample], list[dict[str, Any]], dict[str, Any]]:
    """Per-second samples, window records and the summary from --json output."""
    samples: list[Sample] = []
    windows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if "window" in obj:
            windows.append(obj)
        elif "tx_packets" in obj and "streams" in obj:
            summary = obj
        elif "monotonic_s" in obj:
            samples.append(Sample(float(obj["t"]), float(obj["monotonic_s"]),
                                  float(obj["tx_pps"]), float(obj["rx_pps"])))
    return samples, windows, summary


def run(cmd: list[str], log: Path, out: Path, timeout: float) -> GenResult:
    """Runs CMD (a sluice-gen command with --json --out OUT) to its end.

    CPU seconds come from the children's rusage: the harness waits for one child at a time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - t0
    log.write_text(f"$ {' '.join(cmd)}\n# wall {wall:.2f} s\n{r.stdout}\n{r.stderr}")
    if r.returncode != 0:
        raise RuntimeError(f"sluice-gen exited with {r.returncode}: "
                           f"{' | '.join(r.stderr.strip().splitlines()[-3:])} (log {log})")
    samples, windows, summary = parse_lines(r.stdout)
    if out.exists():
        summary = json.loads(out.read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return GenResult(summary, samples, summary.get("windows", windows), t0, cpu, log)
