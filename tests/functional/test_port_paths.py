"""The path policy of port specs (docs/operations.md, "Path policy"): a spec cannot make the
daemon, usually root, truncate a file that is not a capture, write into a device or FIFO,
replace a non-socket with a socket, or (with --port-dir) name anything outside the allowed
directories, symlinks included. Every refusal is a bad spec naming the field, and the daemon
keeps serving."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Daemon, RpcError

BAD_SPEC = -32002
PRECIOUS = b"root:x:0:0:root:/root:/bin/bash\n"
# A pcap file header with no packets: magic, version 2.4, zone, sigfigs, snaplen, Ethernet.
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
CAPTURE_MAGICS = {struct.pack("<I", m) for m in (0xA1B2C3D4, 0xA1B23C4D)}


def refused(d: Daemon, spec: str, words: str) -> None:
    with pytest.raises(RpcError) as e:
        d.call("add-port", switch="br0", name="p", spec=spec)
    assert e.value.code == BAD_SPEC, e.value.message
    assert words in e.value.message, e.value.message
    assert d.call("list-ports") == []
    assert d.call("version")["protocol"] == 1   # still serving


def accepted(d: Daemon, spec: str) -> None:
    d.call("add-port", switch="br0", name="p", spec=spec)
    d.call("del-port", switch="br0", name="p")


@pytest.fixture
def br0(daemon: Daemon) -> Daemon:
    daemon.call("add-switch", name="br0")
    return daemon


def test_pcap_tx_refuses_a_file_that_is_not_a_capture(br0: Daemon, workdir: Path) -> None:
    notes = workdir / "passwd"
    notes.write_bytes(PRECIOUS)
    refused(br0, f"pcap:tx={notes}", "'tx'")
    assert notes.read_bytes() == PRECIOUS
    # A symlink to it is no way round.
    (workdir / "link.pcap").symlink_to(notes)
    refused(br0, f"pcap:tx={workdir}/link.pcap", "'tx'")
    assert notes.read_bytes() == PRECIOUS
    # Nor is an empty file, or a file with a capture's name.
    (workdir / "empty.pcap").write_bytes(b"")
    refused(br0, f"pcap:tx={workdir}/empty.pcap", "not a pcap or pcapng capture")
    (workdir / "fake.pcap").write_bytes(PRECIOUS)
    refused(br0, f"pcap:tx={workdir}/fake.pcap", "not a pcap or pcapng capture")
    assert (workdir / "fake.pcap").read_bytes() == PRECIOUS


def test_pcap_tx_may_overwrite_a_capture(br0: Daemon, workdir: Path) -> None:
    old = workdir / "old.pcap"
    old.write_bytes(PCAP_HEADER + b"\0" * 16)
    accepted(br0, f"pcap:tx={old}")
    assert old.read_bytes()[:4] in CAPTURE_MAGICS   # DPDK writes a nanosecond pcap
    # pcapng (a section header block) too, and a file that does not exist yet.
    ng = workdir / "old.pcapng"
    ng.write_bytes(bytes.fromhex("0a0d0d0a") + b"\0" * 24)
    accepted(br0, f"pcap:tx={ng}")
    accepted(br0, f"pcap:tx={workdir}/new.pcap")
    assert (workdir / "new.pcap").exists()


def test_device_fifo_and_directory_refused(br0: Daemon, workdir: Path) -> None:
    os.mkfifo(workdir / "fifo")
    refused(br0, "pcap:tx=/dev/null", "not a regular file")
    refused(br0, f"pcap:tx={workdir}/fifo", "not a regular file")
    refused(br0, f"pcap:rx={workdir}/fifo", "not a regular file")
    refused(br0, f"pcap:tx={workdir}", "not a regular file")


def test_relative_and_dotdot_paths_refused(br0: Daemon, workdir: Path) -> None:
    refused(br0, "pcap:tx=out.pcap", "'tx' must be an absolute path")
    refused(br0, f"pcap:tx={workdir}/../x.pcap", "'..'")
    refused(br0, "vhost-user:server,path=vm1.sock", "'path' must be an absolute path")
    refused(br0, "memif:role=server,socket=/run/../etc/m.sock", "'..'")


def test_server_socket_replaces_only_a_socket(br0: Daemon, workdir: Path) -> None:
    plain = workdir / "vm1.sock"
    plain.write_bytes(PRECIOUS)
    refused(br0, f"vhost-user:server,path={plain}", "'path'")
    refused(br0, f"memif:role=server,socket={plain}", "'socket'")
    assert plain.read_bytes() == PRECIOUS


@pytest.fixture
def confined(workdir: Path) -> Iterator[Daemon]:
    allowed = workdir / "allowed"
    allowed.mkdir()
    d = Daemon(workdir, "c", ["--port-dir", str(allowed)]).start()
    d.call("add-switch", name="br0")
    yield d
    assert d.stop() == 0, d.log.read_text()


def test_port_dir_confines_every_path(confined: Daemon, workdir: Path) -> None:
    allowed = workdir / "allowed"
    outside = workdir / "outside"
    outside.mkdir()
    accepted(confined, f"pcap:tx={allowed}/ok.pcap")
    accepted(confined, f"vhost-user:server,path={allowed}/vm.sock")
    refused(confined, f"pcap:tx={outside}/x.pcap", "outside the --port-dir")
    refused(confined, f"vhost-user:server,path={outside}/vm.sock", "outside the --port-dir")
    refused(confined, f"memif:role=client,socket={outside}/m.sock", "outside the --port-dir")
    # A directory of the same name's prefix is not inside it.
    (workdir / "allowed2").mkdir()
    refused(confined, f"pcap:tx={workdir}/allowed2/x.pcap", "outside the --port-dir")
    assert not (workdir / "allowed2" / "x.pcap").exists()


def test_port_dir_symlinks_cannot_escape(confined: Daemon, workdir: Path) -> None:
    allowed = workdir / "allowed"
    outside = workdir / "outside"
    outside.mkdir()
    (allowed / "esc").symlink_to(outside)                  # a directory link
    (allowed / "cap.pcap").symlink_to(outside / "cap.pcap")  # a file link, dangling
    (outside / "in.pcap").write_bytes(PCAP_HEADER)
    (allowed / "in.pcap").symlink_to(outside / "in.pcap")  # a file link to a capture
    refused(confined, f"pcap:tx={allowed}/esc/x.pcap", "outside the --port-dir")
    refused(confined, f"pcap:tx={allowed}/cap.pcap", "'tx'")
    refused(confined, f"pcap:rx={allowed}/in.pcap", "outside the --port-dir")
    assert sorted(p.name for p in outside.iterdir()) == ["in.pcap"]
