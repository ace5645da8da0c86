"""Helpers for the sluice-gen tests: running it, memif pairs, stand-in processes to stop."""

from __future__ import annotations

import contextlib
import glob
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO, Daemon, stop_process

GEN = REPO / "build" / "tools" / "gen" / "sluice-gen"


def gen_cmd(args: list[str], cpu: int = 0) -> list[str]:
    return [str(GEN), "--cpu", str(cpu), *args]


def run_gen(workdir: Path, args: list[str], cpu: int = 0, timeout: float = 60,
            name: str = "gen.json") -> tuple[dict, subprocess.CompletedProcess[str]]:
    """Runs sluice-gen to the end; its --out summary and the finished process."""
    out = workdir / name
    cut = args.index("--") if "--" in args else len(args)     # EAL options stay last
    args = [*args[:cut], "--out", str(out), *args[cut:]]
    r = subprocess.run(gen_cmd(args, cpu), capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert_no_hugepage_files(r.args)
    return json.loads(out.read_text()), r


def assert_no_hugepage_files(_args: object = None) -> None:
    """sluice-gen runs --in-memory: none of its default prefixes may leave files behind."""
    left = glob.glob("/dev/hugepages/sluice-gen-*map_*")
    # Only files of processes that are gone are a leak; a running instance may own some.
    leaked = [f for f in left if not Path(f"/proc/{pid_of(f)}").exists()]
    assert not leaked, leaked


def pid_of(hugepage_file: str) -> str:
    return Path(hugepage_file).name.removeprefix("sluice-gen-").split("map_")[0]


def memif_pair(workdir: Path, name: str) -> list[str]:
    """A server and a client port on one socket: what one sends, the other receives."""
    sock = workdir / f"{name}.sock"
    return ["--port", f"memif:role=server,socket={sock}",
            "--port", f"memif:role=client,socket={sock}"]


def vhost_patch(daemon: Daemon, workdir: Path, names: tuple[str, str],
                socks: tuple[str, str] | None = None) -> list[Path]:
    """Switch br0 patching two vhost-user server ports NAMES, on sockets SOCKS (the names
    by default) in WORKDIR: the paths the generator's virtio-user ports connect to."""
    paths = [workdir / f"{s}.sock" for s in socks or names]
    daemon.call("add-switch", name="br0")
    for name, path in zip(names, paths, strict=True):
        daemon.call("add-port", switch="br0", name=name, spec=f"vhost-user:server,path={path}")
    daemon.call("patch", switch="br0", port1=names[0], port2=names[1])
    return paths


def proc_state(pid: int) -> str:
    """The one-letter state of PID from /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@contextlib.contextmanager
def stand_ins(n: int = 2) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes for --alternate to stop and continue where no switch is needed."""
    procs = [subprocess.Popen(["sleep", "120"]) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGCONT)    # in case a failed test left one stopped
            stop_process(p)
