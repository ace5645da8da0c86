"""manifest.json: the environment a run measured in, read from the machine itself."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def _read(path: str) -> str | None:
    """The stripped text of PATH, or None when it cannot be read."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    """The first line of CMD's output, or None when it fails or is not installed."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (r.stdout or r.stderr).strip().splitlines()
    return out[0] if r.returncode == 0 and out else None


def cpu_model() -> str:
    """The first 'model name' of /proc/cpuinfo."""
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def governors() -> dict[str, str | None]:
    """The cpufreq governor of each CPU (None where the VM exposes none)."""
    return {f"cpu{c}": _read(f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")
            for c in range(os.cpu_count() or 1)}


def hugepages() -> dict[str, Any]:
    """2 MiB hugepages reserved and free, and whether hugetlbfs is mounted."""
    base = "/sys/kernel/mm/hugepages/hugepages-2048kB"
    return {"size_kb": 2048, "total": _read(f"{base}/nr_hugepages"),
            "free": _read(f"{base}/free_hugepages"),
            "mounted": " hugetlbfs " in (_read("/proc/mounts") or "")}


def git_state(repo: Path) -> dict[str, Any]:
    """The commit the harness ran from and whether the tree had changes."""
    commit = _run(["git", "rev-parse", "HEAD"], repo)
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], repo)
    return {"commit": commit, "dirty": bool(dirty)}


def collect(repo: Path, versions: dict[str, str], settings: dict[str, Any]) -> dict[str, Any]:
    """The manifest: machine, kernel, versions of every switch and tool, pinning, the run's
    settings. VERSIONS come from the adapters, SETTINGS from the command line."""
    return {
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "os": (_read("/etc/debian_version") or "unknown"),
        "governor": governors(),
        "hugepages": hugepages(),
        "git": git_state(repo),
        "dpdk": _run(["pkg-config", "--modversion", "libdpdk"]),
        "versions": versions,
        "pinning": {"switch_cpu": settings.get("switch_cpu"),
                    "gen_cpu": settings.get("gen_cpu"),
                    "control_threads": settings.get("gen_cpu")},
        "settings": settings,
    }


def write(path: Path, manifest: dict[str, Any]) -> None:
    """Writes MANIFEST as indented JSON to PATH."""
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
