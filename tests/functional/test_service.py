"""sluiced as a systemd service (docs/install.md), with this test in systemd's place: the
notify protocol on $NOTIFY_SOCKET (READY=1 once the control socket answers, STOPPING=1 on
SIGTERM, from the daemon's own PID), the unit checked by `systemd-analyze verify`, the
hugepage helper, and the control socket's group: a member of it may use sluicectl without
root, anyone else gets a clear permission error. PID 1 is not systemd here, so the unit is
verified rather than started."""

from __future__ import annotations

import contextlib
import grp
import os
import shutil
import signal
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, Daemon

SCM_CREDENTIALS = 2
SO_PASSCRED = 16


class NotifySocket:
    """The service manager's end: a datagram socket that records who sent what."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_PASSCRED, 1)
        self.sock.bind(address if not address.startswith("@") else "\0" + address[1:])
        self.address = address

    def receive(self, timeout: float = 30.0) -> tuple[int, dict[str, str]]:
        """The next message: the sender's PID and its VAR=value lines."""
        self.sock.settimeout(timeout)
        data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        pid = -1
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == SCM_CREDENTIALS:
                pid = struct.unpack("iII", cdata[:12])[0]
        fields = dict(line.split("=", 1) for line in data.decode().splitlines() if line)
        return pid, fields

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_notify_ready_when_socket_answers_and_stopping_on_sigterm(
        workdir: Path, abstract: bool) -> None:
    address = (f"@sluice-test-notify-{os.getpid()}" if abstract
               else str(workdir / "notify.sock"))
    notify = NotifySocket(address)
    d = Daemon(workdir, "svc")
    os.environ["NOTIFY_SOCKET"] = address
    try:
        d.start(wait=False)
    finally:
        del os.environ["NOTIFY_SOCKET"]
    try:
        pid, fields = notify.receive()
        assert fields.get("READY") == "1", fields
        assert pid == d.proc.pid            # NotifyAccess=main: the main process says it
        # Ready means ready: the first request is answered, no retry.
        assert d.call("version")["version"] == (REPO / "VERSION").read_text().strip()
        d.proc.send_signal(signal.SIGTERM)
        pid, fields = notify.receive()
        assert fields.get("STOPPING") == "1", fields
        assert pid == d.proc.pid
        assert d.stop() == 0
    finally:
        d.stop()
        notify.close()


def test_no_notify_socket_no_message(workdir: Path) -> None:
    """Started by hand (no $NOTIFY_SOCKET) it runs as before; a $NOTIFY_SOCKET nobody
    listens on only costs a warning in the log."""
    env_before = os.environ.get("NOTIFY_SOCKET")
    os.environ["NOTIFY_SOCKET"] = str(workdir / "nobody.sock")
    try:
        d = Daemon(workdir, "quiet").start()
    finally:
        if env_before is None:
            del os.environ["NOTIFY_SOCKET"]
        else:
            os.environ["NOTIFY_SOCKET"] = env_before
    try:
        assert d.call("list-switches") == []
    finally:
        assert d.stop() == 0
    assert "cannot notify the service manager" in d.log.read_text()


@pytest.fixture(scope="module")
def installed_usr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`make install PREFIX=/usr DESTDIR=...` (the package's layout), removed again."""
    destdir = tmp_path_factory.mktemp("usr-destdir")
    r = subprocess.run(["make", "-C", str(REPO), "install", "PREFIX=/usr",
                        f"DESTDIR={destdir}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    yield destdir
    subprocess.run(["make", "-C", str(REPO), "uninstall", f"DESTDIR={destdir}"],
                   capture_output=True, check=True)
    shutil.rmtree(destdir)
    subprocess.run(["meson", "configure", str(REPO / "build"), "-Dprefix=/usr/local",
                    "-Dsysconfdir=etc"], capture_output=True, check=True)


def test_systemd_analyze_verify(installed_usr: Path, tmp_path: Path) -> None:
    """The installed unit passes `systemd-analyze verify`, its man: links included. The
    unit names /usr paths, so a copy points them into DESTDIR; MANPATH finds the pages
    installed there."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    d = str(installed_usr)
    unit = (installed_usr / "usr/lib/systemd/system/sluiced.service").read_text()
    copy = tmp_path / "sluiced.service"
    copy.write_text(unit.replace("=/usr/", f"={d}/usr/").replace("=-/etc/", f"=-{d}/etc/")
                    .replace(" /etc/sluice/", f" {d}/etc/sluice/"))
    env = {**os.environ, "MANPATH": f"{d}/usr/share/man", "SYSTEMD_LOG_LEVEL": "notice"}
    r = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    # And it does catch a mistake: a program that is not there.
    copy.write_text(copy.read_text().replace("/sbin/sluiced ", "/sbin/sluiced-missing "))
    r = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                       text=True, env=env)
    assert r.returncode != 0 and "sluiced-missing" in r.stderr


def test_hugepage_helper(installed_usr: Path) -> None:
    helper = installed_usr / "usr/libexec/sluice/sluice-hugepages"
    have = Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages").read_text().strip()
    # As many as there are: nothing to change, hugetlbfs already mounted.
    r = subprocess.run([str(helper)], env={"SLUICE_HUGEPAGES": have, "PATH": os.environ["PATH"]},
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages").read_text().strip() \
        == have
    r = subprocess.run([str(helper)], env={"SLUICE_HUGEPAGES": "lots"}, capture_output=True,
                       text=True)
    assert r.returncode == 2 and "must be a number" in r.stderr


@pytest.fixture
def throwaway_users() -> Iterator[tuple[str, str, str]]:
    """A group and two users, one in it and one not; removed afterwards."""
    tag = f"{os.getpid() % 100000}"
    group, member, other = f"sltg{tag}", f"sltin{tag}", f"sltout{tag}"
    try:
        subprocess.run(["groupadd", group], check=True)
        subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", "-G", group,
                        member], check=True)
        subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", other], check=True)
        yield group, member, other
    finally:
        for user in (member, other):
            subprocess.run(["userdel", user], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)


def sluicectl_as(user: str, sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """sluicectl run by USER (with the groups /etc/group gives it), on the system Python:
    the venv's may live where USER cannot read."""
    return subprocess.run(
        ["runuser", "-u", user, "--", "env", f"PYTHONPATH={REPO / 'python'}",
         "PYTHONDONTWRITEBYTECODE=1", "/usr/bin/python3", "-m", "sluice.ctl",
         "--socket", str(sock), *args], capture_output=True, text=True, cwd="/")


def test_socket_group_members_only(workdir: Path, throwaway_users: tuple[str, str, str]
                                   ) -> None:
    group, member, other = throwaway_users
    os.chmod(workdir, 0o755)
    d = Daemon(workdir, "grp", ["--socket-group", group]).start()
    try:
        st = d.socket.stat()
        assert st.st_gid == grp.getgrnam(group).gr_gid
        assert st.st_mode & 0o777 == 0o660
        r = sluicectl_as(member, d.socket, "add-switch", "br0")
        assert r.returncode == 0, r.stderr
        r = sluicectl_as(member, d.socket, "list-switches")
        assert r.returncode == 0 and "br0" in r.stdout
        r = sluicectl_as(other, d.socket, "list-switches")
        assert r.returncode == 3
        assert "permission denied" in r.stderr and str(d.socket) in r.stderr, r.stderr
        assert "group" in r.stderr
    finally:
        assert d.stop() == 0


def test_socket_group_missing_warns(workdir: Path) -> None:
    d = Daemon(workdir, "nogrp", ["--socket-group", "no-such-group-sluice"]).start()
    try:
        assert d.socket.stat().st_gid == os.getgid()
        assert d.call("list-switches") == []
    finally:
        assert d.stop() == 0
    assert "no group 'no-such-group-sluice'" in d.log.read_text()


def test_socket_dir_made_for_the_group(workdir: Path, throwaway_users: tuple[str, str, str]
                                       ) -> None:
    """A socket directory sluiced makes itself (e.g. /run/sluice without systemd's
    RuntimeDirectory) is the group's too, or the members could not reach the socket."""
    group, member, _ = throwaway_users
    os.chmod(workdir, 0o755)
    d = Daemon(workdir, "sub", ["--socket-group", group])
    d.socket = workdir / "run" / "sub.sock"
    d.args[d.args.index("--socket") + 1] = str(d.socket)
    d.start()
    try:
        st = d.socket.parent.stat()
        assert st.st_gid == grp.getgrnam(group).gr_gid and st.st_mode & 0o777 == 0o750
        r = sluicectl_as(member, d.socket, "list-switches")
        assert r.returncode == 0, r.stderr
    finally:
        assert d.stop() == 0
        with contextlib.suppress(OSError):
            (workdir / "run").rmdir()


