"""The pure parts of `sluicectl capture`: dumpcap's command line and summary, the pcapng
direction filter, the clean-up of a secondary's files, argument errors. No daemon:
tests/functional/test_capture.py runs the real thing."""

from __future__ import annotations

import os
import signal
import struct
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from sluice.capture import (
    Interrupts,
    OwnTarget,
    Target,
    count_packets,
    dumpcap_command,
    keep_direction,
    parse_dumpcap_summary,
    pcapng_header,
    pcapng_packet,
    remove_secondary_files,
    run_own_capture,
)
from sluice.ctl import Exit, execute, make_parser
from sluice.rpc import ConnectError

# ---- capture ----

TARGET = Target("sltest1d", "/var/run/dpdk/sltest1d", 3, "net_tap_p4")


def test_dumpcap_command() -> None:
    assert dumpcap_command(TARGET, "/tmp/x.pcapng", 1000, None) == [  # type: ignore[arg-type]
        "dpdk-dumpcap", "--file-prefix=sltest1d", "-i", "3", "-p", "-n", "-w", "/tmp/x.pcapng",
        "-c", "1000"]
    assert dumpcap_command(TARGET, "/tmp/x.pcapng", 0, 2.5)[-2:] == [  # type: ignore[arg-type]
        "-a", "duration:2.5"]


def test_parse_dumpcap_summary() -> None:
    out = ("File: /tmp/x\nPackets captured: 0 \b\b1 \nPackets received/dropped on interface "
           "'net_tap_p1': 10/2 (83.3)\nCapturing on 'net_tap_p1'\n")
    assert parse_dumpcap_summary(out) == (10, 2)
    assert parse_dumpcap_summary("EAL init failed: is primary process running?\n") is None


def block(btype: int, body: bytes) -> bytes:
    length = 12 + len(body)
    return struct.pack("<II", btype, length) + body + struct.pack("<I", length)


def epb(data: bytes, flags: int | None) -> bytes:
    body = struct.pack("<IIIII", 0, 0, 0, len(data), len(data)) + data
    body += b"\0" * (-len(data) % 4)
    if flags is not None:
        body += struct.pack("<HHI", 2, 4, flags) + struct.pack("<HH", 0, 0)
    return block(6, body)


SHB_BLOCK = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
IDB_BLOCK = block(1, struct.pack("<HHI", 1, 0, 0))
ISB_BLOCK = block(5, struct.pack("<III", 0, 0, 0))


def test_pcapng_direction_filter() -> None:
    packets = [(b"rx1..", 1), (b"tx1", 2), (b"rx2", 1), (b"none", None), (b"rx3", 1)]
    data = SHB_BLOCK + IDB_BLOCK + b"".join(epb(d, f) for d, f in packets) + ISB_BLOCK
    assert count_packets(data, "both") == 5
    assert (count_packets(data, "rx"), count_packets(data, "tx")) == (3, 1)
    kept, n = keep_direction(data, "rx", 2)
    assert n == 2 and kept == SHB_BLOCK + IDB_BLOCK + epb(b"rx1..", 1) + epb(b"rx2", 1)
    assert keep_direction(data, "tx", 0) == (SHB_BLOCK + IDB_BLOCK + epb(b"tx1", 2), 1)
    # A block still being written is not counted.
    assert count_packets(data[:-len(ISB_BLOCK) - 3], "rx") == 2


def test_remove_secondary_files(tmp_path: Any) -> None:
    for name in ("config", "mp_socket", "fbarray_memseg-2048k-0-0", "mp_socket_4242_abc",
                 "fbarray_memseg-2048k-0-0_4242", "fbarray_memseg-2048k-0-0_42421"):
        (tmp_path / name).touch()
    assert sorted(remove_secondary_files(str(tmp_path), 4242)) == [
        "fbarray_memseg-2048k-0-0_4242", "mp_socket_4242_abc"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config", "fbarray_memseg-2048k-0-0", "fbarray_memseg-2048k-0-0_42421", "mp_socket"]


def run_ctl(argv: list[str], answers: dict[str, Any]) -> tuple[int, str, str]:
    def transport(method: str, params: Any) -> Any:
        answer = answers[method]
        if isinstance(answer, Exception):
            raise answer
        return answer

    out, err = StringIO(), StringIO()
    status = execute(make_parser().parse_args(argv), transport, "given by --socket", out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("argv", "words"), [
    (["capture", "br0", "vm1"], "-w FILE is required"),
    (["capture", "br0", "vm1", "-w", "x", "--direction", "in"], "--direction must be"),
])
def test_capture_usage_errors(argv: list[str], words: str) -> None:
    status, _, err = run_ctl(argv, {})
    assert status == Exit.USAGE and words in err


def test_capture_errors_before_dumpcap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    ports = [{"name": "vm1", "ethdev": 0, "device": "net_tap_p1"}]
    status, _, err = run_ctl(["capture", "br0", "vm2", "-w", "x"],
                             {"version": {"file_prefix": "p"}, "list-ports": ports})
    assert status == Exit.ERROR and "no port named 'vm2' on switch 'br0'" in err
    status, _, err = run_ctl(["capture", "br0", "vm1", "-w", "x"],
                             {"version": {"version": "0.0.9"}, "list-ports": ports})
    assert status == Exit.ERROR and "file prefix" in err
    status, _, err = run_ctl(["capture", "br0", "vm1", "-w", "x"],
                             {"version": ConnectError("no such socket", "/x.sock")})
    assert status == Exit.UNREACHABLE


def test_capture_interrupted_before_dumpcap(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    """A Ctrl-C while sluicectl still asks the daemon: no dumpcap is started, 130 and a
    word on stderr, no file; SIGINT's handler is the one it was before."""
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    started: list[list[str]] = []
    monkeypatch.setattr("subprocess.Popen", lambda argv, **kw: started.append(argv))
    before = signal.getsignal(signal.SIGINT)

    def version_then_ctrl_c(method: str, params: Any) -> Any:
        if method == "list-ports":
            os.kill(os.getpid(), signal.SIGINT)     # handled, not raised
            return [{"name": "vm1", "ethdev": 0, "device": "net_tap_p1"}]
        return {"file_prefix": "p"}

    out, err = StringIO(), StringIO()
    status = execute(make_parser().parse_args(
        ["capture", "br0", "vm1", "-w", str(tmp_path / "x.pcapng")]), version_then_ctrl_c,
        "given by --socket", out, err)
    assert status == 130 and "interrupted before the capture began" in err.getvalue()
    assert started == [] and not (tmp_path / "x.pcapng").exists()
    assert signal.getsignal(signal.SIGINT) is before


def test_interrupts_handle_an_ignored_sigint() -> None:
    """A capture started with SIGINT ignored (a background job of a non-interactive shell)
    still sees `kill -INT`; the old disposition comes back after."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with Interrupts() as interrupts:
            assert not interrupts
            os.kill(os.getpid(), signal.SIGINT)
            assert interrupts.event.wait(5) and interrupts
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)


# ---- sluiced's own capture (fast=1 vhost-user ports) ----

def test_pcapng_writer_read_back(tmp_path: Path) -> None:
    """What run_own_capture writes: the module's reader and scapy's see the same packets,
    directions, lengths and nanosecond times."""
    from scapy.all import rdpcap  # type: ignore

    frames = [(1_764_600_000_123_456_789, "rx", 64, bytes(range(64))),
              (1_764_600_000_223_456_789, "tx", 1514, b"\x02" * 60),     # cut to 60
              (1_764_600_001_000_000_001, "rx", 61, b"\x01" * 61)]      # padded
    path = tmp_path / "w.pcapng"
    path.write_bytes(pcapng_header() + b"".join(pcapng_packet(*f) for f in frames))
    data = path.read_bytes()
    assert (count_packets(data, "rx"), count_packets(data, "tx")) == (2, 1)
    got = rdpcap(str(path))
    assert [bytes(p) for p in got] == [f[3] for f in frames]
    assert [p.direction for p in got] == [1, 2, 1]
    assert [p.wirelen for p in got] == [64, 1514, 61]
    assert [int(p.time * 10**9) // 1000 for p in got] == [f[0] // 1000 for f in frames]


class FakeRpc:
    """sluiced's side of one capture: reads hand out BATCHES, then nothing."""

    def __init__(self, batches: list[int], fail_start: str = "") -> None:
        self.batches, self.fail_start = batches, fail_start
        self.calls: list[str] = []
        self.stopped = False

    def __enter__(self) -> FakeRpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.calls.append("close")

    def call(self, method: str, /, **params: Any) -> Any:
        from sluice.rpc import RpcError

        self.calls.append(method)
        if method == "capture-start":
            if self.fail_start:
                raise RpcError(-32001, self.fail_start)
            return {"id": 7}
        if method == "capture-stop":
            self.stopped = True
            return {"dropped": 3}
        n = self.batches.pop(0) if self.batches else 0
        frame = {"t": 10**18, "dir": "rx", "len": 60, "data": "AAAA"}
        return {"frames": [frame] * n, "dropped": 3,
                "ended": self.stopped and not self.batches}


def own(rpc: FakeRpc, tmp_path: Path, count: int, duration: float | None) -> Any:
    with Interrupts() as interrupts:
        return run_own_capture(lambda: rpc, OwnTarget("br0", "vm1", "vhost-user"),
                               tmp_path / "o.pcapng", count, duration, "both", StringIO(),
                               interrupts)


def test_own_capture_bounds(tmp_path: Path) -> None:
    """--count N: N frames, then the connection closes (sluiced frees the rest); a
    duration: capture-stop, then the rest read until sluiced says it ended."""
    rpc = FakeRpc([512, 512, 100])
    r = own(rpc, tmp_path, 600, None)
    assert (r.packets, r.dropped, r.dropped_by) == (600, 3, "sluiced's capture ring")
    assert count_packets((tmp_path / "o.pcapng").read_bytes(), "rx") == 600
    assert rpc.calls == ["capture-start", "capture-read", "capture-read", "close"]
    rpc = FakeRpc([5])
    r = own(rpc, tmp_path, 0, 0.1)
    assert rpc.calls[-3:] == ["capture-stop", "capture-read", "close"] and r.packets == 5


def test_own_capture_refused(tmp_path: Path) -> None:
    from sluice.capture import CaptureError

    with pytest.raises(CaptureError, match="captured already"):
        own(FakeRpc([], "port 'vm1' is being captured already (capture 3)"), tmp_path, 10,
            None)
    assert not (tmp_path / "o.pcapng").exists()
