"""Control-socket clients that misbehave (issue 15, defect 4): one that never reads its
answers, many that connect and say nothing, one that falls silent. None of them may hold
the control thread or lock other clients out."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from conftest import Daemon, Rpc

SHOW = b'{"jsonrpc":"2.0","id":%d,"method":"show"}\n'


def timed_version(d: Daemon) -> float:
    """Seconds a fresh connection takes to get `version` answered."""
    start = time.monotonic()
    with Rpc(d.socket, timeout=5.0) as rpc:
        assert rpc.call("version")["protocol"] == 1
    return time.monotonic() - start


def test_client_that_never_reads_stalls_nobody(daemon: Daemon) -> None:
    daemon.call("add-switch", name="br0")
    for i in range(8):
        daemon.call("add-port", switch="br0", name=f"n{i}", spec="null")
    hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hog.connect(str(daemon.socket))
    hog.setblocking(False)
    sent = 0
    try:
        while sent < 20_000:          # until the daemon stops taking requests
            line = SHOW % sent
            if hog.send(line) < len(line):
                break                 # a part of a line: never answered, not counted
            sent += 1
    except BlockingIOError:
        pass
    assert sent > 100
    worst = max(timed_version(daemon) for _ in range(10))
    time.sleep(2.5)                   # longer than the old blocking write's 2 s limit
    worst = max(worst, *(timed_version(daemon) for _ in range(10)))
    assert worst < 0.5, f"version took {worst:.3f} s while a client did not read"
    # The hog was held back, not dropped: it reads every answer, in order, once it reads.
    hog.setblocking(True)
    hog.settimeout(10.0)
    reader = hog.makefile("rb")
    for i in range(sent):
        try:
            line = reader.readline()
        except TimeoutError:
            raise AssertionError(f"answer {i} of {sent} did not come") from None
        assert line, f"connection closed after {i} of {sent} answers"
        assert line.startswith(b'{"jsonrpc":"2.0","id":%d,' % i), line[:60]
    reader.close()
    hog.close()


def test_idle_connections_do_not_lock_out_a_new_client(daemon: Daemon) -> None:
    idle = []
    try:
        for _ in range(64):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(daemon.socket))
            idle.append(s)
        time.sleep(1.5)
        for _ in range(6):            # each new client makes room by closing an idle one
            assert timed_version(daemon) < 1.0
    finally:
        for s in idle:
            s.close()
    assert "idle longest" in daemon.log.read_text()


def test_idle_client_is_closed(workdir: Path) -> None:
    d = Daemon(workdir, "i", ["--client-idle-timeout", "1"]).start()
    try:
        quiet = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        quiet.connect(str(d.socket))
        quiet.settimeout(5.0)
        with Rpc(d.socket) as busy:
            for _ in range(8):        # a client that keeps talking is never idle
                assert busy.call("version")["protocol"] == 1
                time.sleep(0.3)
            assert quiet.recv(100) == b""     # closed by the daemon
        quiet.close()
        assert "idle for" in d.log.read_text()
    finally:
        assert d.stop() == 0
