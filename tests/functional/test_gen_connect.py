"""sluice-gen with a client port whose server is not there: a clean exit 1 naming the port and
the cause, never a signal (it used to die with SIGSEGV about one run in three when other
ports of its own were still in their memif handshake) and never a stale errno."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from conftest import REPO

GEN = REPO / "build" / "tools" / "gen" / "sluice-gen"
REFUSED = "connection refused: nothing listens on it"


def run_gen(ports: list[str]) -> subprocess.CompletedProcess[str]:
    args = [str(GEN), "--cpu", "0", "--duration", "1"]
    for p in ports:
        args += ["--port", p]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def assert_clean_failure(r: subprocess.CompletedProcess[str], spec: str, path: Path,
                         why: str) -> None:
    assert r.returncode == 1, f"exit {r.returncode} (negative: a signal)\n{r.stderr}"
    assert f"--port {spec}: cannot connect to memif socket {path}: {why}" in r.stderr, r.stderr
    assert "Operation not permitted" not in r.stderr, r.stderr


def dead_socket(path: Path) -> None:
    """A memif socket file whose server is gone: bound, never listening, closed."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(str(path))
    s.close()


def test_missing_socket(workdir: Path) -> None:
    path = workdir / "none.sock"
    spec = f"memif:role=client,socket={path}"
    assert_clean_failure(run_gen([spec, spec.replace("none", "none2")]), spec, path,
                         "no such file")


def test_socket_without_listener(workdir: Path) -> None:
    path = workdir / "dead.sock"
    dead_socket(path)
    spec = f"memif:role=client,socket={path}"
    assert_clean_failure(run_gen([spec]), spec, path, REFUSED)


def test_not_a_socket(workdir: Path) -> None:
    path = workdir / "plain"
    path.write_text("not a socket\n")
    spec = f"memif:role=client,socket={path}"
    assert_clean_failure(run_gen([spec]), spec, path, "not a socket")


def test_failure_while_other_ports_connect(workdir: Path) -> None:
    """A memif pair of our own is mid-handshake when a later client fails: the set-up that
    crashed. Repeated, since the crash was a race; our server sockets must be gone after."""
    server, dead = workdir / "srv.sock", workdir / "dead.sock"
    dead_socket(dead)
    bad = f"memif:role=client,socket={dead}"
    ports = [f"memif:role=server,socket={server}", f"memif:role=client,socket={server}",
             f"memif:role=server,socket={server},id=1", bad]
    for _ in range(20):
        r = run_gen(ports)
        assert_clean_failure(r, bad, dead, REFUSED)
        assert not server.exists(), "a server socket of sluice-gen was left behind"
