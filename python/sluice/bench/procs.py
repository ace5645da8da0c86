"""Processes the harness starts: started with a log, waited for, stopped by PID only."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def start(cmd: list[str], log: Path, env: dict[str, str] | None = None,
          stdin: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """Starts CMD with stdout and stderr into LOG and stdin closed (or STDIN, e.g. PIPE for
    a program driven by commands)."""
    with log.open("ab") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=stdin, env=env)


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen[bytes] | None, what: str,
               log: Path | None = None, timeout: float = 30.0) -> None:
    """Polls READY until it holds; RuntimeError when PROC exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited with {proc.returncode}"
                               + (f"; log: {tail(log)}" if log else ""))
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready after {timeout:.0f} s"
                               + (f"; log: {tail(log)}" if log else ""))
        time.sleep(0.1)


def tail(log: Path | None, lines: int = 5) -> str:
    """The last LINES lines of LOG, on one line."""
    if log is None or not log.exists():
        return ""
    return " | ".join(log.read_text(errors="replace").splitlines()[-lines:])


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGINT, timeout: float = 15.0) -> None:
    """Continues PROC (in case it was left stopped), sends SIG, kills it after TIMEOUT."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def remove_hugepage_files(prefix: str) -> None:
    """Removes the hugepage files of our own DPDK file PREFIX (never anyone else's)."""
    for f in glob.glob(f"/dev/hugepages/{prefix}map_*"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f)


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of PID so far (None when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_busy() -> dict[str, float]:
    """Busy seconds per CPU so far, from /proc/stat (all but idle and iowait)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *vals = line.split()
        if name.startswith("cpu") and name != "cpu":
            v = [int(x) for x in vals]
            out[name] = (sum(v[:8]) - v[3] - v[4]) / tick
    return out


def gone(pid: int) -> bool:
    """True when PID has exited (a zombie not yet waited for counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def exit_status(proc: object) -> str:
    """How PROC (a Popen, or anything else when unknown) ended, in words."""
    if not isinstance(proc, subprocess.Popen) or proc.poll() is None:
        return "exited"
    rc = proc.returncode
    if rc < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-rc).name}"
        return f"was killed by signal {-rc}"
    return f"exited with status {rc}"
