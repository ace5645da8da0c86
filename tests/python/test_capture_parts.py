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
    Target,
    count_packets,
    dumpcap_command,
    keep_direction,
    parse_dumpcap_summary,
    remove_secondary_files,
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
