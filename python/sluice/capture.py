"""`sluicectl capture`: packets of one sluiced port to a pcapng file, with DPDK's dpdk-dumpcap,
or, for the vhost-user ports of sluiced's own data path (the default, fast), with sluiced's
own capture.

sluiced initialises rte_pdump, so dpdk-dumpcap, a DPDK secondary process started with the
daemon's file prefix, can ask it to copy what a port receives and sends into a ring that
dumpcap empties into a file. This module finds what dumpcap needs (the daemon's file prefix
from `version`, the port's ethdev number from `list-ports`), runs it bounded by a packet
count and/or a duration, and reports what was captured (docs/operations.md).

dpdk-dumpcap of DPDK 22.11 captures both directions at once and has no option to choose one,
but each pcapng packet block carries its direction (epb_flags). For `--direction rx` or `tx`
both are captured into a temporary file that is watched until COUNT packets of the wanted
direction are in it, and then only those are written to the output file.

A fast vhost-user port (the default; not fast=0) has no ethdev for dumpcap to attach to.
For such a port sluiced captures itself (src/capture.c): `capture-start` on a connection
of this module's own takes the port off the one-copy path and makes the daemon copy its
frames into a ring, which
`capture-read` empties (frames in base64, with their time and direction); this module
writes them to pcapng itself, and `capture-stop` (or the connection's end, should sluicectl
die) ends it. Options, output lines and Ctrl-C behave as with dumpcap.

The pure parts (`dumpcap_command`, `parse_dumpcap_summary`, the pcapng functions) are tested
without a daemon; `run_capture` runs the real thing.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import re
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from sluice.rpc import RpcError

DUMPCAP = "dpdk-dumpcap"
DIRECTIONS = ("rx", "tx", "both")
DEFAULT_COUNT = 1000
PR_SET_PDEATHSIG = 1

# pcapng (draft-ietf-opsawg-pcapng): block types and the epb_flags option.
SHB = 0x0A0D0D0A
IDB = 0x00000001
ISB = 0x00000005
EPB = 0x00000006
BYTE_ORDER_MAGIC = 0x1A2B3C4D
EPB_FLAGS = 2
EPB_DIRECTION = {1: "rx", 2: "tx"}    # the flags' two low bits: 1 inbound, 2 outbound
LINKTYPE_ETHERNET = 1
IF_TSRESOL = 9                         # the interface's time resolution: 10^-9 s
SNAPLEN = 65535
READ_MAX = 512                         # frames one capture-read asks for
READ_PAUSE = 0.02                      # seconds between reads that found the ring short

Call = Callable[..., Any]
# Opens a connection of the capture's own (an RpcClient): sluiced ends a capture whose
# connection closes.
Connect = Callable[[], Any]


class CaptureError(Exception):
    """The capture could not be made; the message says why and what to do."""


class Interrupted(Exception):
    """Ctrl-C (SIGINT), SIGTERM or SIGHUP came before dpdk-dumpcap was started: nothing
    captured."""


class Interrupts:
    """Catches SIGINT (Ctrl-C), SIGTERM and SIGHUP for the whole of a capture, from before the first
    question to the daemon to after dumpcap's end, as a flag that the capture's loop reads.

    A flag, not KeyboardInterrupt: an exception raised wherever Python happens to be could
    cut short dumpcap's start or the cleanup after it. The handler is installed whatever
    the signal's disposition was, SIG_IGN included (a job started in the background by a
    non-interactive shell, such as `make test &`, inherits SIGINT ignored, and Python then
    installs no handler of its own), as tcpdump does for SIGINT: a capture is stopped by
    Ctrl-C or `kill -INT`, and an ignored SIGINT would leave `--count 0` captures running
    for ever. Handled signals are reset to the default in a child at exec, so dumpcap does
    not inherit an ignored SIGINT either (it keeps an ignored one ignored)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.event = threading.Event()
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        for sig in self.SIGNALS:
            self._old[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.event.set()

    def __bool__(self) -> bool:
        return self.event.is_set()


@dataclass(frozen=True)
class Target:
    """What dpdk-dumpcap needs to know about the daemon and the port."""

    file_prefix: str
    runtime_dir: str
    ethdev: int
    device: str


@dataclass(frozen=True)
class OwnTarget:
    """A port without an ethdev, which sluiced captures itself (vhost-user, fast)."""

    switch: str
    port: str
    kind: str


@dataclass(frozen=True)
class Result:
    """What a capture wrote: PACKETS packets in PATH; DROPPED is what the capture's ring
    could not take (dpdk-dumpcap's own count, of both directions, or sluiced's, of the
    directions captured), DROPPED_BY names that ring; SECONDS the capture's length."""

    path: Path
    packets: int
    dropped: int
    seconds: float
    dropped_by: str = "dumpcap's ring"


def find_target(call: Call, switch: str, port: str) -> Target | OwnTarget:
    """Asks the daemon (CALL(method, **params)) for its file prefix and PORT's ethdev; a
    port without one is sluiced's to capture (it refuses the kinds it cannot)."""
    version = call("version")
    for p in call("list-ports", switch=switch):
        if p.get("name") == port:
            if int(p["ethdev"]) < 0:
                return OwnTarget(switch, port, str(p.get("kind", "")))
            if not isinstance(version, Mapping) or "file_prefix" not in version:
                raise CaptureError("this sluiced does not say its DPDK file prefix (too old?)")
            return Target(str(version["file_prefix"]), str(version.get("runtime_dir", "")),
                          int(p["ethdev"]), str(p.get("device", "")))
    raise CaptureError(f"no port named {port!r} on switch {switch!r}")


def dumpcap_command(target: Target, path: Path, count: int, duration: float | None) -> list[str]:
    """dpdk-dumpcap's argv: PATH in pcapng, stopping after COUNT packets (0: no limit) or
    DURATION seconds. -p leaves the port's promiscuous mode as sluiced set it; -n asks for
    pcapng, which says each packet's direction."""
    argv = [DUMPCAP, f"--file-prefix={target.file_prefix}", "-i", str(target.ethdev), "-p",
            "-n", "-w", str(path)]
    if count:
        argv += ["-c", str(count)]
    if duration:
        argv += ["-a", f"duration:{duration:g}"]
    return argv


_SUMMARY = re.compile(r"Packets received/dropped on interface '[^']*': (\d+)/(\d+)")


def parse_dumpcap_summary(output: str) -> tuple[int, int] | None:
    """(received, dropped) from dpdk-dumpcap's last summary line, or None if it has none."""
    found = _SUMMARY.findall(output)
    return (int(found[-1][0]), int(found[-1][1])) if found else None


# ---- pcapng ----

def pcapng_blocks(data: bytes, order: str = "<") -> Iterator[tuple[int, bytes, str]]:
    """(type, whole block, byte order '<' or '>') for each complete block of DATA, which
    starts in byte order ORDER until a section header says otherwise; a block still being
    written at the end is left out."""
    pos = 0
    while pos + 12 <= len(data):
        if struct.unpack_from("<I", data, pos)[0] == SHB:
            magic = struct.unpack_from("<I", data, pos + 8)[0]
            order = "<" if magic == BYTE_ORDER_MAGIC else ">"
        btype, blen = struct.unpack_from(order + "II", data, pos)
        if blen < 12 or blen % 4 or pos + blen > len(data):
            return
        yield btype, data[pos:pos + blen], order
        pos += blen


def epb_direction(block: bytes, order: str) -> str | None:
    """'rx' or 'tx' from an enhanced packet block's epb_flags; None when it has none."""
    cap_len = struct.unpack_from(order + "I", block, 20)[0]
    pos, end = 28 + (cap_len + 3) // 4 * 4, len(block) - 4
    while pos + 4 <= end:
        code, length = struct.unpack_from(order + "HH", block, pos)
        if code == 0:
            break
        if code == EPB_FLAGS and length == 4:
            return EPB_DIRECTION.get(struct.unpack_from(order + "I", block, pos + 4)[0] & 3)
        pos += 4 + (length + 3) // 4 * 4
    return None


def count_packets(data: bytes, direction: str) -> int:
    """Packets of DIRECTION ('rx', 'tx' or 'both') in the pcapng DATA."""
    return sum(1 for btype, block, order in pcapng_blocks(data) if btype == EPB
               and (direction == "both" or epb_direction(block, order) == direction))


def keep_direction(data: bytes, direction: str, limit: int) -> tuple[bytes, int]:
    """DATA with only the first LIMIT (0: all) packets of DIRECTION, and their number.
    Interface statistics blocks go: their counts are of both directions."""
    out, kept = [], 0
    for btype, block, order in pcapng_blocks(data):
        if btype == ISB:
            continue
        if btype == EPB:
            if epb_direction(block, order) != direction or (limit and kept >= limit):
                continue
            kept += 1
        out.append(block)
    return b"".join(out), kept


def _block(btype: int, body: bytes) -> bytes:
    """One little-endian pcapng block of type BTYPE around BODY (padded to 4 bytes)."""
    body += b"\0" * (-len(body) % 4)
    length = 12 + len(body)
    return struct.pack("<II", btype, length) + body + struct.pack("<I", length)


def pcapng_header(snaplen: int = SNAPLEN) -> bytes:
    """A section header and one Ethernet interface with nanosecond timestamps."""
    shb = _block(SHB, struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1))
    tsresol = struct.pack("<HHB3x", IF_TSRESOL, 1, 9) + struct.pack("<HH", 0, 0)
    idb = _block(IDB, struct.pack("<HHI", LINKTYPE_ETHERNET, 0, snaplen) + tsresol)
    return shb + idb


def pcapng_packet(ns: int, direction: str, length: int, data: bytes) -> bytes:
    """An enhanced packet block: DATA (the frame's first bytes) of a LENGTH-byte frame seen
    at NS nanoseconds since the epoch, going DIRECTION ('rx' inbound, 'tx' outbound)."""
    flags = 1 if direction == "rx" else 2
    head = struct.pack("<IIIII", 0, ns >> 32, ns & 0xFFFFFFFF, len(data), length)
    pad = b"\0" * (-len(data) % 4)
    opts = struct.pack("<HHI", EPB_FLAGS, 4, flags) + struct.pack("<HH", 0, 0)
    return _block(EPB, head + data + pad + opts)


# ---- sluiced's own capture (ports without an ethdev) ----

class _Own:
    """One capture sluiced makes, on a connection of its own (CONNECT), written to a
    file as it is read."""

    def __init__(self, rpc: Any, target: OwnTarget, direction: str) -> None:
        self.rpc = rpc
        answer = rpc.call("capture-start", switch=target.switch, port=target.port,
                          direction=direction, snaplen=SNAPLEN)
        self.id = int(answer["id"])
        self.dropped = 0
        self.ended = False

    def read(self, out: Any, want: int) -> tuple[int, int]:
        """Writes up to WANT frames (0: any number) of one read to OUT; returns (frames
        written, frames the read gave)."""
        answer = self.rpc.call("capture-read", id=self.id, max=READ_MAX)
        self.dropped = int(answer.get("dropped", 0))
        self.ended = bool(answer.get("ended"))
        frames = answer.get("frames", [])
        if want:
            frames = frames[:want]
        for f in frames:
            out.write(pcapng_packet(int(f["t"]), f["dir"], int(f["len"]),
                                    base64.b64decode(f["data"])))
        return len(frames), len(answer.get("frames", []))

    def stop(self) -> None:
        answer = self.rpc.call("capture-stop", id=self.id)
        self.dropped = int(answer.get("dropped", 0))


def run_own_capture(connect: Connect, target: OwnTarget, path: Path, count: int,
                    duration: float | None, direction: str, out: TextIO,
                    interrupts: Interrupts) -> Result:
    """Captures DIRECTION frames of TARGET into PATH (pcapng) through sluiced's own
    capture, bounded as run_capture() is; Ctrl-C (INTERRUPTS) before the capture began
    raises Interrupted. The frames still in sluiced's ring when the capture stops (Ctrl-C,
    DURATION) are read and written too; at COUNT the rest is left to the daemon, which
    frees it when the connection closes."""
    began = time.monotonic()
    if interrupts:
        raise Interrupted()
    with contextlib.ExitStack() as stack:
        try:
            rpc = stack.enter_context(connect())
            f = stack.enter_context(open(path, "wb"))
        except OSError as e:
            raise CaptureError(f"cannot write {path}: {e.strerror}") from None
        f.write(pcapng_header())
        try:
            cap = _Own(rpc, target, direction)
        except RpcError as e:
            with contextlib.suppress(FileNotFoundError):
                f.close()
                path.unlink()
            raise CaptureError(e.message) from None
        print(f"capturing {direction} on {target.port} ({target.kind}, fast; captured by "
              f"sluiced) to {path}; Ctrl-C stops", file=out, flush=True)
        deadline = began + duration if duration else None
        packets = 0
        while not interrupts and (deadline is None or time.monotonic() < deadline):
            wrote, got = cap.read(f, count - packets if count else 0)
            packets += wrote
            if (count and packets >= count) or cap.ended:   # ended: the port was deleted
                break
            if got < READ_MAX:
                pause = READ_PAUSE if deadline is None else \
                    max(0.0, min(READ_PAUSE, deadline - time.monotonic()))
                interrupts.event.wait(pause)
        if not (count and packets >= count) and not cap.ended:
            cap.stop()
            while not cap.ended and not (count and packets >= count):
                wrote, _ = cap.read(f, count - packets if count else 0)
                packets += wrote
    return Result(path, packets, cap.dropped, time.monotonic() - began, "sluiced's capture ring")


# ---- running dpdk-dumpcap ----

def remove_secondary_files(runtime_dir: str, pid: int) -> list[str]:
    """Removes what the DPDK secondary process PID left in the daemon's runtime directory
    (its mp_socket_PID_* and its private copies of the memory maps, *_PID) and returns their
    names. It touches nothing else: the daemon's own files have no PID in their names."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(runtime_dir):
            if name.startswith(f"mp_socket_{pid}_") or name.endswith(f"_{pid}"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(runtime_dir, name))
                    removed.append(name)
    return removed


def _end_with_parent() -> None:
    """In dumpcap's child before exec: SIGTERM when sluicectl dies (even by SIGKILL), which
    dumpcap handles as it does SIGINT; in its own process group nothing else would end it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class _Dumpcap:
    """A running dpdk-dumpcap; a thread collects its output and sets `started` once it says
    "Packets captured:", which it does on stderr, without a newline, right after pdump was
    enabled in the daemon and its own SIGINT handler installed ("Capturing on" comes
    earlier, on buffered stdout).

    dumpcap runs in a process group of its own, so a Ctrl-C at the terminal reaches
    sluicectl only, which passes it on once dumpcap can take it: a SIGINT that came while
    dumpcap was still starting (attaching to the daemon's memory, enabling pdump) would end
    it by the default action, between steps, without its cleanup."""

    def __init__(self, argv: list[str]) -> None:
        try:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, process_group=0,
                                         preexec_fn=_end_with_parent)
        except FileNotFoundError:
            raise CaptureError(f"{DUMPCAP} not found: install Debian's dpdk-dev package "
                               "(scripts/setup.sh does)") from None
        self.data = bytearray()
        self.started = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while chunk := os.read(fd, 4096):
            self.data += chunk
            if b"Packets captured:" in self.data:
                self.started.set()
        self.started.set()

    def interrupt(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def finish(self, timeout: float = 10.0) -> int:
        """Waits for dumpcap to end (SIGKILL after TIMEOUT) and returns its status."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout)
        return self.proc.returncode

    @property
    def output(self) -> str:
        """What dumpcap said, without its backspaced running count."""
        text = self.data.decode(errors="replace")
        return re.sub(r"Packets captured: [\d \b]*", "", text)


class _Counter:
    """Counts the packets of one direction in a pcapng file that dumpcap is still writing,
    reading only what was added since the last look."""

    def __init__(self, path: Path, direction: str) -> None:
        self.path, self.direction = path, direction
        self.offset, self.order, self.packets = 0, "<", 0

    def update(self) -> int:
        with contextlib.suppress(FileNotFoundError), open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
            for btype, block, order in pcapng_blocks(data, self.order):
                self.offset += len(block)
                self.order = order
                if btype == EPB and epb_direction(block, order) == self.direction:
                    self.packets += 1
        return self.packets


def _wait(dc: _Dumpcap, counter: _Counter | None, count: int, deadline: float | None,
          interrupts: Interrupts) -> None:
    """Waits until dumpcap ends by itself; stops it on an interrupt, once COUNTER reaches
    COUNT, or at DEADLINE (a backstop for dumpcap's own duration)."""
    stopping = False
    while dc.proc.poll() is None:
        late = deadline is not None and time.monotonic() > deadline
        enough = counter is not None and count > 0 and counter.update() >= count
        if (late or enough or interrupts) and not stopping:
            dc.interrupt()
            stopping = True
        if stopping:
            with contextlib.suppress(subprocess.TimeoutExpired):
                dc.proc.wait(0.1)
        else:
            interrupts.event.wait(0.1)      # the signal handler sets it: no wait then


def run_capture(target: Target, path: Path, count: int, duration: float | None,
                direction: str, out: TextIO, interrupts: Interrupts) -> Result:
    """Captures DIRECTION packets of TARGET into PATH (pcapng), at most COUNT (0: no limit)
    for at most DURATION seconds (None: no limit); Ctrl-C (INTERRUPTS, installed by the
    caller) ends it early, at any moment: before dumpcap is started it raises Interrupted;
    after, dumpcap is let finish starting and then stopped, and what it wrote is the
    result. Says on OUT when the capture has begun."""
    one_way = direction != "both"
    raw = path.with_name(path.name + ".both.tmp") if one_way else path
    argv = dumpcap_command(target, raw, 0 if one_way else count, duration)
    # dumpcap opens its file without O_TRUNC: an older, longer file would keep its tail.
    for old in (path, raw):
        with contextlib.suppress(FileNotFoundError):
            old.unlink()
    began = time.monotonic()
    if interrupts:
        raise Interrupted()
    dc = _Dumpcap(argv)
    try:
        # Ready or ended; an interrupt meanwhile waits for this (see _Dumpcap).
        dc.started.wait(30)
        if dc.proc.poll() is None and not interrupts:
            print(f"capturing {direction} on ethdev {target.ethdev} ({target.device}) to "
                  f"{path}; Ctrl-C stops", file=out, flush=True)
        deadline = began + duration + 10 if duration else None
        _wait(dc, _Counter(raw, direction) if one_way else None, count, deadline, interrupts)
    finally:
        rc = dc.finish()
        if target.runtime_dir:
            remove_secondary_files(target.runtime_dir, dc.proc.pid)
    seconds = time.monotonic() - began
    summary = parse_dumpcap_summary(dc.output)
    if rc != 0 or summary is None or not raw.exists():
        with contextlib.suppress(FileNotFoundError):
            if one_way:
                raw.unlink()
        raise CaptureError(f"{DUMPCAP} failed (status {rc}):\n{dc.output.strip()}")
    data = raw.read_bytes()
    if one_way:
        kept, packets = keep_direction(data, direction, count)
        path.write_bytes(kept)
        raw.unlink()
    else:
        packets = count_packets(data, "both")
    return Result(path, packets, summary[1], seconds)


def capture(call: Call, params: Mapping[str, Any], out: TextIO,
            connect: Connect | None = None) -> Result:
    """`sluicectl capture`'s work: PARAMS are its parsed arguments; CONNECT opens a
    connection of the capture's own, for ports that sluiced captures itself. Raises
    Interrupted for a Ctrl-C before the capture was started."""
    with Interrupts() as interrupts:
        target = find_target(call, params["switch"], params["port"])
        path = Path(params["file"]).absolute()
        count = params.get("count", DEFAULT_COUNT)
        direction = params.get("direction", "both")
        if isinstance(target, OwnTarget):
            if connect is None:
                raise CaptureError("sluiced captures this port itself, which needs a "
                                   "connection of the capture's own")
            return run_own_capture(connect, target, path, count, params.get("duration"),
                                   direction, out, interrupts)
        if shutil.which(DUMPCAP) is None:
            raise CaptureError(f"{DUMPCAP} not found: install Debian's dpdk-dev package "
                               "(scripts/setup.sh does)")
        return run_capture(target, path, count, params.get("duration"), direction, out,
                           interrupts)
