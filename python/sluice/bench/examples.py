"""DPDK's example applications as sluice-bench runs them: l2fwd and l3fwd as VNFs, basicfwd
(skeleton) as the no-logic baseline switch.

They are built from the sources Debian's dpdk-doc ships (/usr/share/dpdk/examples) against the
installed DPDK, into build/dpdk-examples/, by scripts/dpdk-examples.sh (which
`scripts/setup.sh --peers` runs); nothing of DPDK is kept in the repository. l3fwd is built
without its request for Rx checksum offload, which virtio-user lacks (the script says why).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

# name -> (example directory, binary name)
EXAMPLES: dict[str, tuple[str, str]] = {
    "l2fwd": ("l2fwd", "l2fwd"),
    "l3fwd": ("l3fwd", "l3fwd"),
    "basicfwd": ("skeleton", "basicfwd"),
}
SOURCES = Path("/usr/share/dpdk/examples")


def build_dir(repo: Path) -> Path:
    """Where scripts/dpdk-examples.sh builds them."""
    return repo / "build" / "dpdk-examples"


def path(repo: Path, name: str) -> Path:
    """The binary of example NAME (it may not exist yet)."""
    directory, binary = EXAMPLES[name]
    return build_dir(repo) / directory / "build" / binary


def how_to_get(repo: Path) -> str:
    """The sentence that says how to build the examples."""
    how = "run scripts/setup.sh --peers (as root; installs dpdk-doc and builds them)"
    if SOURCES.is_dir():
        how = f"run scripts/dpdk-examples.sh (builds them from {SOURCES})"
    return f"{how}; they land in {build_dir(repo).relative_to(repo)}/"


def missing(repo: Path, name: str) -> str | None:
    """None when example NAME is built, else what is missing and how to get it."""
    exe = path(repo, name)
    if exe.exists():
        return None
    return f"DPDK's example {name} is not built ({exe} is missing): {how_to_get(repo)}"


def build(repo: Path, timeout: float = 600) -> str | None:
    """Builds every example (scripts/dpdk-examples.sh); None on success, else why it failed."""
    script = repo / "scripts" / "dpdk-examples.sh"
    try:
        r = subprocess.run([str(script)], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{script}: {e}"
    if r.returncode != 0:
        return (r.stderr.strip() or r.stdout.strip()).splitlines()[-1]
    return None


def version() -> str:
    """The DPDK whose examples these are (Debian's dpdk-doc version)."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpdk-doc"],
                       capture_output=True, text=True, timeout=20)
    return f"DPDK {r.stdout.strip() or 'unknown'} examples (dpdk-doc)"
