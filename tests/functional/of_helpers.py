"""Helpers for the OpenFlow tests: hosts in network namespaces on af_packet ports of a flow
switch, the agent and controllers as processes of the test (ended by PID)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO, Daemon, stop_process, wait_for

PYTHON = sys.executable
VENV_BIN = Path(PYTHON).parent


def run(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True,
                          timeout=timeout)


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NetHosts:
    """N namespaces, each with a veth 'eth0' (10.93.X.i/24) whose other end is a port of
    SWITCH (af_packet), named p1..pN so that port pI has OpenFlow number I."""

    def __init__(self, n: int, net: int = 93) -> None:
        tag = f"of{os.getpid() % 100000}"
        self.ns = [f"{tag}-h{i + 1}" for i in range(n)]
        self.ifaces = [f"{tag}v{i + 1}" for i in range(n)]
        self.addr = [f"10.{net}.0.{i + 1}" for i in range(n)]
        self.made: list[str] = []
        for i in range(n):
            run("ip", "netns", "add", self.ns[i])
            self.made.append(self.ns[i])
            run("ip", "-n", self.ns[i], "link", "set", "lo", "up")
            self.veth(i, self.ifaces[i])

    def veth(self, i: int, iface: str) -> None:
        run("ip", "link", "add", iface, "type", "veth", "peer", "name", "eth0", "netns",
            self.ns[i])
        run("ip", "link", "set", iface, "up")
        run("ip", "-n", self.ns[i], "addr", "add", f"{self.addr[i]}/24", "dev", "eth0")
        run("ip", "-n", self.ns[i], "link", "set", "eth0", "up")

    def ping(self, i: int, j: int, count: int = 1, wait: float = 1.0) -> bool:
        r = run("ip", "netns", "exec", self.ns[i], "ping", "-c", str(count), "-W", str(wait),
                "-i", "0.2", self.addr[j], check=False)
        return r.returncode == 0

    def exec(self, i: int, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns[i], *args]

    def delete(self) -> None:
        for ns in self.made:
            run("ip", "netns", "del", ns, check=False)
        for iface in self.ifaces:
            run("ip", "link", "del", iface, check=False)


def add_ports(daemon: Daemon, switch: str, hosts: NetHosts) -> None:
    daemon.call("add-switch", name=switch, mode="flow")
    for i, iface in enumerate(hosts.ifaces):
        daemon.call("add-port", switch=switch, name=f"p{i + 1}", spec=f"af_packet:iface={iface}")


class Proc:
    """A process of the test, its output in a log file; ended by PID."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        env = dict(env or os.environ, PYTHONPATH=str(REPO / "python"))
        with open(log, "wb") as f:
            self.proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            stop_process(self.proc, timeout=5)


AGENT = REPO / "bin" / "sluice-ofagent"


def agent_daemon(workdir: Path, name: str, spawn: bool) -> Daemon:
    """A sluiced that runs the agent itself (SPAWN: `set-controller` is all it takes), or
    runs none (the test starts its own, with options)."""
    return Daemon(workdir, name, ["--ofagent", str(AGENT)] if spawn else ["--no-ofagent"])


def start_agent(daemon: Daemon, switch: str, *extra: str) -> Proc:
    return Proc([str(REPO / "bin" / "sluice-ofagent"), "--socket", str(daemon.socket), "-v",
                 *extra, switch], daemon.workdir / f"agent-{switch}.log")


def wait_connected(daemon: Daemon, switch: str, timeout: float = 20) -> None:
    def connected() -> bool:
        st = daemon.call("get-controller", switch=switch).get("status") or {}
        return any(c.get("connected") for c in st.get("connections", []))
    wait_for(connected, timeout)


def wait_port(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")
