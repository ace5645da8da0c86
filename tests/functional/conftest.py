"""Fixtures for functional tests: the real sluiced on its own socket and DPDK file prefix.

Every test that starts a process ends it by PID and removes the sockets, namespaces and
hugepage files of its own DPDK prefixes, so tests pass in any order and when run twice.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import pytest

from sluice.rpc import ConnectError, RpcClient, RpcError  # noqa: F401  (RpcError: for tests)

REPO = Path(__file__).resolve().parents[2]
SLUICED = REPO / "build" / "src" / "sluiced"
TESTPMD = "dpdk-testpmd"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--flow-diff-cases", type=int, default=None,
                     help="packets the differential test against OVS traces "
                          "(test_flow_ovs_diff.py; default 1000, or FLOW_DIFF_CASES)")


class Rpc(RpcClient):
    """The project's JSON-RPC client, plus raw lines for the malformed-request tests."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        super().__init__(str(path), timeout)

    def raw(self, line: bytes) -> dict[str, Any]:
        """Sends LINE (a newline is added) and returns the decoded answer."""
        self.sock.sendall(line + b"\n")
        answer = self.reader.readline()
        if not answer:
            raise ConnectionError("daemon closed the connection")
        return json.loads(answer)


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    """Polls PREDICATE until it holds; fails the test after TIMEOUT seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def remove_hugepage_files(prefix: str) -> None:
    """Removes what a DPDK process of PREFIX (ours, ended) leaves: its hugepage files and
    its runtime directory (/var/run/dpdk/PREFIX: config, sockets of the multi-process
    channel, telemetry)."""
    for f in glob.glob(f"/dev/hugepages/{prefix}map_*"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f)
    if prefix and "/" not in prefix:
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM,
                 timeout: float = 10.0) -> int:
    """Ends PROC (ours, by PID) and returns its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode

class PmdPeer:
    """A dpdk-testpmd on CPU 0 with one port, device VDEV (a container's virtio-user, a
    memif client, ...), forwarding in MODE: the real peer of a switch port in tests."""

    def __init__(self, workdir: Path, name: str, prefix: str, vdev: str, mode: str) -> None:
        self.prefix = f"{prefix}{os.getpid()}{name}"
        self.log = workdir / f"testpmd-{name}.log"
        self.cmd = [TESTPMD, "--lcores", "0@0,1@0", "--no-pci", "--file-prefix", self.prefix,
                    "--single-file-segments", "--in-memory", "-m", "256",
                    "--vdev", vdev, "--log-level=*:warning", "--",
                    f"--forward-mode={mode}", "--stats-period", "1", "--nb-cores", "1",
                    "--txd", "512", "--rxd", "512"]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self) -> int:
        rc = stop_process(self.proc, sig=2) if self.proc is not None else 0
        self.proc = None
        remove_hugepage_files(self.prefix)
        return rc

    def kill(self) -> None:
        """Ends it as a crash would: no goodbye on its socket."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.proc = None
        remove_hugepage_files(self.prefix)

    def wait_forwarding(self) -> None:
        """Until testpmd forwards: before that it reads and discards (uncounted) whatever
        is in its receive ring (flush_fwd_rx_queues)."""
        wait_for(lambda: "Rx-pps" in self.log.read_text(), 30)

    def counts(self) -> dict[str, int]:
        """The final 'Forward statistics for port 0' block."""
        text = self.log.read_text()
        block = text.rsplit("Forward statistics for port 0", 1)[-1]
        found = {}
        for key in ("RX-packets", "TX-packets"):
            m = re.search(key + r":\s+(\d+)", block)
            assert m, text[-3000:]
            found[key] = int(m.group(1))
        return found



def links(d: Daemon) -> dict[str, str]:
    """Each port's link, 'up' or 'down', by name."""
    return {p["name"]: p["link"] for p in d.call("list-ports")}


class Daemon:
    """A running sluiced with its own socket, file prefix and log."""

    def __init__(self, workdir: Path, name: str, extra: list[str] | None = None) -> None:
        self.workdir = workdir
        self.socket = workdir / f"{name}.sock"
        self.prefix = f"sltest{os.getpid()}{name}"
        self.log = workdir / f"{name}.log"
        self.args = [str(SLUICED), "--socket", str(self.socket), "--file-prefix", self.prefix,
                     "--main-cpu", "0", "--worker-cpus", "1", *(extra or [])]
        self.proc: subprocess.Popen[bytes] | None = None
        self._rpc: Rpc | None = None

    def start(self, wait: bool = True) -> Daemon:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sluiced exited ({self.proc.returncode}):\n"
                                   + self.log.read_text())
            if self.socket.exists():
                with contextlib.suppress(ConnectError):
                    Rpc(self.socket).close()
                    return
            time.sleep(0.05)
        raise RuntimeError("sluiced did not open its socket:\n" + self.log.read_text())

    @property
    def rpc(self) -> Rpc:
        if self._rpc is None:
            self._rpc = Rpc(self.socket)
        return self._rpc

    def call(self, method: str, **params: Any) -> Any:
        return self.rpc.call(method, **params)

    def port_stats(self, switch: str) -> dict[str, dict[str, Any]]:
        result = self.call("stats", switch=switch)
        return {p["name"]: p for p in result["switches"][0]["ports"]}

    def stop(self) -> int:
        if self._rpc is not None:
            self._rpc.close()
            self._rpc = None
        rc = stop_process(self.proc) if self.proc is not None else 0
        remove_hugepage_files(self.prefix)
        return rc


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    # Unix socket paths are limited to 107 bytes; pytest's tmp_path can be long.
    short = Path(f"/tmp/sluice-test-{os.getpid()}-{time.monotonic_ns() % 10**9}")
    short.mkdir()
    yield short
    for f in sorted(short.rglob("*"), reverse=True):
        with contextlib.suppress(OSError):
            f.unlink() if not f.is_dir() else f.rmdir()
    with contextlib.suppress(OSError):
        short.rmdir()


@pytest.fixture
def daemon(workdir: Path) -> Iterator[Daemon]:
    d = Daemon(workdir, "d").start()
    yield d
    rc = d.stop()
    assert rc == 0, "sluiced did not shut down cleanly:\n" + d.log.read_text()


def assert_accounting(stats: dict[str, dict[str, Any]]) -> None:
    """Every packet a port received was forwarded or dropped with exactly one reason."""
    for name, p in stats.items():
        assert p["rx_packets"] == p["forwarded"] + p["dropped"], (name, p)
        assert p["dropped"] == sum(p["drops"].values()), (name, p)
