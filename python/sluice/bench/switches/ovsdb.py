"""A private Open vSwitch: its own ovsdb-server and ovs-vswitchd under a work directory.

Shared by the ovs-dpdk and ovs-netdev adapters. Everything lives under DIR (database,
sockets, logs, the bridge's OpenFlow socket) and the environment points OVS's run, database,
log and configuration directories there, so no system service or file is touched. The
daemons are started by this object, stopped by PID, and vswitchd runs in a network namespace
(the scenario's switch namespace, or one of its own), so its taps never join the host's.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sluice.bench import procs, rules
from sluice.bench.cost import ClearingMeter

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
TOOLS = ("ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl", "ovs-appctl")
BRIDGE = "br0"


class PrivateOvs:
    """ovsdb-server plus ovs-vswitchd with every file under DIR; TAG names its namespace."""

    def __init__(self, work: Path, tag: str) -> None:
        self.dir = work
        self.tag = tag
        self.db: subprocess.Popen[bytes] | None = None
        self.vswitchd: subprocess.Popen[bytes] | None = None
        self.own_netns: str | None = None

    def env(self) -> dict[str, str]:
        """The environment that points OVS's directories at DIR."""
        d = str(self.dir)
        return {**os.environ, "OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d,
                "OVS_SYSCONFDIR": d, "OVS_PKGDATADIR": "/usr/share/openvswitch"}

    def vsctl(self, *args: str) -> str:
        """ovs-vsctl against the private database."""
        r = subprocess.run(["ovs-vsctl", f"--db=unix:{self.dir}/db.sock", "--timeout=30",
                            *args], capture_output=True, text=True, env=self.env(), timeout=40)
        if r.returncode != 0:
            raise RuntimeError(f"ovs-vsctl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout.strip()

    def ofctl(self, *args: str, timeout: float = 30.0) -> str:
        """ovs-ofctl against the private bridge's OpenFlow socket (options such as --bundle
        first, then the command and its arguments)."""
        opts = [a for a in args if a.startswith("--")]
        rest = [a for a in args if not a.startswith("--")]
        r = subprocess.run(["ovs-ofctl", *opts, rest[0], f"unix:{self.dir}/{BRIDGE}.mgmt",
                            *rest[1:]],
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"ovs-ofctl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def port_counters(self, names: Sequence[str]) -> dict[str, dict[str, Any]] | None:
        """Counters of the ports with OpenFlow numbers 1, 2, ... (NAMES, in that order), as
        vswitchd has them now (`ovs-ofctl dump-ports`; the database's Interface statistics
        lag by up to 5 s); None when it does not answer. A port whose counters OVS does not
        give ('?') is left out: OVS 3.1's vhost-user ports have counters only while their
        client is connected, and those start from 0 at each connection."""
        try:
            by_port = parse_dump_ports(self.ofctl("dump-ports"))
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            return None
        out = {}
        for i, name in enumerate(names):
            c = by_port.get(str(i + 1))
            if c is not None and c.get("rx") is not None and c.get("tx") is not None:
                out[name] = c
        return out

    def appctl(self, *args: str) -> str:
        """ovs-appctl against the private vswitchd ('' when it does not answer)."""
        return self.appctl_answer(*args) or ""

    def appctl_answer(self, *args: str, timeout: float = 10.0) -> str | None:
        """ovs-appctl's output, None when vswitchd did not answer or refused."""
        try:
            r = subprocess.run(["ovs-appctl", "-T", str(int(timeout)), "-t",
                                str(self.dir / "vswitchd.ctl"), *args], capture_output=True,
                               text=True, timeout=timeout + 10, check=False)
        except subprocess.TimeoutExpired:
            return None
        return r.stdout if r.returncode == 0 else None

    def cost_meter(self) -> ClearingMeter:
        """The PMD threads' own cycles per packet (cost.py): `dpif-netdev/pmd-stats-clear`
        when a reading begins, `dpif-netdev/pmd-perf-show` when it ends. vswitchd's main
        thread answers (on the generator's CPU); a PMD clears its counters at its next
        iteration."""
        return ClearingMeter(
            "OVS dpif-netdev/pmd-perf-show: PMD busy cycles / packets received",
            lambda: self.appctl_answer("dpif-netdev/pmd-stats-clear", timeout=2) is not None,
            lambda: parse_pmd_perf(self.appctl_answer("dpif-netdev/pmd-perf-show",
                                                      timeout=2) or ""))

    def start_db(self, ctl_cpu: int, other_config: Sequence[str]) -> None:
        """A fresh database and its server on CTL_CPU; OTHER_CONFIG (key=value) set."""
        self.dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ovsdb-tool", "create", str(self.dir / "conf.db"), str(SCHEMA)],
                       check=True, capture_output=True)
        self.db = procs.start(
            ["taskset", "-c", str(ctl_cpu), "ovsdb-server", str(self.dir / "conf.db"),
             f"--remote=punix:{self.dir}/db.sock", f"--unixctl={self.dir}/ovsdb.ctl",
             "--no-chdir", f"--log-file={self.dir}/ovsdb.log"], self.dir / "ovsdb.out",
            self.env())
        procs.wait_until((self.dir / "db.sock").exists, self.db, "ovsdb-server")
        self.vsctl("--no-wait", "init")
        if other_config:
            self.vsctl("--no-wait", "set", "Open_vSwitch", ".",
                       *(f"other_config:{kv}" for kv in other_config))

    def _make_own_netns(self) -> str:
        name = f"{self.tag}-ovs"
        subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
        self.own_netns = name
        return name

    def start_vswitchd(self, exe: Path, cpus: str, netns: str | None) -> None:
        """EXE pinned to CPUS (its threads start there; PMD threads follow pmd-cpu-mask) in
        NETNS, or in a namespace of its own; returns when its control socket exists."""
        log = self.dir / "vswitchd.log"
        netns = netns or self._make_own_netns()
        cmd = ["ip", "netns", "exec", netns, "taskset", "-c", cpus, str(exe),
               f"unix:{self.dir}/db.sock", f"--unixctl={self.dir}/vswitchd.ctl", "--no-chdir",
               f"--log-file={log}", "-vconsole:off", "-vfile:info"]
        self.vswitchd = procs.start(cmd, self.dir / "vswitchd.out", self.env())
        procs.wait_until((self.dir / "vswitchd.ctl").exists, self.vswitchd, "ovs-vswitchd",
                         self.dir / "vswitchd.out", timeout=60)

    def add_bridge(self) -> None:
        """The userspace (netdev) datapath's bridge BRIDGE."""
        self.vsctl("add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev")

    def add_port(self, name: str, ofport: int, iface_args: Sequence[str]) -> None:
        """Port NAME with interface settings IFACE_ARGS as OpenFlow port OFPORT; RuntimeError
        (after removing it again) when OVS reports an error for it."""
        self.vsctl("add-port", BRIDGE, name, "--", "set", "Interface", name, *iface_args,
                   f"ofport_request={ofport}")
        try:
            self.wait_port(name)
        except RuntimeError:
            self.vsctl("--if-exists", "del-port", BRIDGE, name)
            raise

    def wait_port(self, name: str) -> None:
        """RuntimeError when OVS reports an error for the interface NAME."""
        for _ in range(20):
            err = self.vsctl("--if-exists", "get", "Interface", name, "error")
            if err not in ("", "[]"):
                raise RuntimeError(f"ovs port {name}: {err}")
            ofport = self.vsctl("get", "Interface", name, "ofport")
            if ofport not in ("[]", "-1"):
                return
            time.sleep(0.2)

    def pair_flows(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Replaces NORMAL with in_port->output rules for link index PAIRS, both ways
        (OpenFlow port numbers are link index + 1)."""
        self.load_flows(rules.pair_rules(pairs))

    def flows_file(self, lines: Sequence[str], name: str = "flows.txt") -> Path:
        """LINES written to a file of the work directory, one rule a line."""
        path = self.dir / name
        path.write_text("".join(f"{line}\n" for line in lines))
        return path

    def load_flows(self, lines: Sequence[str], timeout: float = 300.0) -> None:
        """Replaces every rule of the bridge (NORMAL too) with LINES (ovs-ofctl syntax,
        ports by OpenFlow number), in one `ovs-ofctl add-flows` of a file."""
        self.ofctl("del-flows")
        self.ofctl("add-flows", str(self.flows_file(lines)), timeout=timeout)

    def pid(self) -> int | None:
        """vswitchd's PID while it runs."""
        return self.vswitchd.pid if self.vswitchd else None

    def stop(self) -> None:
        """Stops both daemons by PID and removes the namespace made here (idempotent)."""
        if self.vswitchd is not None:
            if self.vswitchd.poll() is None:
                self.vswitchd.send_signal(signal.SIGCONT)
            self.appctl("exit")
            procs.stop(self.vswitchd, timeout=20)
            self.vswitchd = None
        if self.db is not None:
            procs.stop(self.db, timeout=10)
            self.db = None
        if self.own_netns is not None:
            subprocess.run(["ip", "netns", "del", self.own_netns], capture_output=True,
                           timeout=20, check=False)
            self.own_netns = None


def version(exe: Path) -> str:
    """EXE --version on one line."""
    r = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=10)
    return " ".join(r.stdout.split()) or f"{exe.name} (version unknown)"


def missing(*paths: Path) -> list[str]:
    """Which of PATHS and of OVS's tools are absent."""
    out = [str(p) for p in (*paths, SCHEMA) if not p.exists()]
    return out + [t for t in TOOLS if shutil.which(t) is None]


_PORT = re.compile(r"^\s*port\s+(\S+?):\s*rx\s+(.*)$")
_FIELD = re.compile(r"(\w+)=([0-9?]+)")


def parse_dump_ports(text: str) -> dict[str, dict[str, int | None]]:
    """`ovs-ofctl dump-ports` output as {port: {rx, tx, rx_dropped, tx_dropped, rx_errors,
    tx_errors}} ('?', a counter the port lacks, becomes None)."""
    out: dict[str, dict[str, int | None]] = {}
    port = None
    for line in text.splitlines():
        m = _PORT.match(line)
        side = "rx" if m else "tx" if port and line.strip().startswith("tx ") else None
        if m:
            port = m.group(1).strip()
            out[port] = {}
        if side is None or port is None:
            continue
        fields = dict(_FIELD.findall(m.group(2) if m else line))
        out[port].update({side: _num(fields, "pkts"), f"{side}_dropped": _num(fields, "drop"),
                          f"{side}_errors": _num(fields, "errs")})
    return out


def _num(fields: dict[str, str], key: str) -> int | None:
    v = fields.get(key)
    return None if v is None or v == "?" else int(v)


_PMD = re.compile(r"^pmd thread numa_id \d+ core_id \d+:", re.M)
# OVS 3.1: "- Used TSC cycles: N (x % of total cycles)", "- busy iterations: N (y % of used
# cycles)"; later releases: "Cycles: N (x GHz)", "- busy: N (y % cycles)". Both: "Rx packets:
# N (K Kpps, C cycles/pkt)", C being busy cycles over packets.
_USED = re.compile(r"^\s*(?:- Used TSC cycles|Cycles):\s+(\d+)", re.M)
_BUSY = re.compile(r"^\s*- busy(?: iterations)?:\s+\d+\s+\(\s*([0-9.]+) %", re.M)
_RX_PKTS = re.compile(r"^\s*Rx packets:\s+(\d+)(?:\s+\([0-9.]+ Kpps, ([0-9.]+) cycles/pkt\))?",
                      re.M)


def parse_pmd_perf(text: str) -> tuple[float, int] | None:
    """(busy cycles, packets received) summed over the PMD threads of a
    `dpif-netdev/pmd-perf-show` answer; None when it shows no PMD thread. Busy cycles are
    the used cycles times the busy share (printed to 0.1 %), else OVS's own cycles/pkt
    (printed to the cycle) times the packets."""
    starts = [m.start() for m in _PMD.finditer(text)]
    if not starts:
        return None
    busy, pkts = 0.0, 0
    for a, b in zip(starts, [*starts[1:], len(text)], strict=True):
        part = text[a:b]
        rx = _RX_PKTS.search(part)
        if rx is None:
            return None
        n = int(rx.group(1))
        used, share = _USED.search(part), _BUSY.search(part)
        if used and share:
            busy += int(used.group(1)) * float(share.group(1)) / 100
        elif rx.group(2):
            busy += float(rx.group(2)) * n
        pkts += n
    return busy, pkts
