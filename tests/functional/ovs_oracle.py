"""Open vSwitch as an oracle for flow mode: Debian's ovs-vswitchd in userspace, on a private
database in a temporary directory, asked with `ofproto/trace BRIDGE in_port=P HEXPACKET`.

Nothing here touches a system OVS: the database, every socket, pid file and log live in the
directory given (OVS_RUNDIR and friends point there, so even the bridge's management socket
does), the processes are ours and are ended by PID. `--enable-dummy=override` makes every
interface a "dummy" one, so the `netdev` (userspace) datapath runs without devices, tap
interfaces or a kernel module; ports get the OpenFlow numbers asked for (ofport_request).

The answer of a trace is reduced to what sluice's trace also tells: the outputs, each with
the headers that output's copy carries. OVS says that in its "Datapath actions" (header
changes as set(...)/push_vlan/pop_vlan before the port numbers that see them), which
`replay_odp_actions` applies to the fields of the input frame (`frame_fields`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
OVS_VSWITCHD = "/usr/sbin/ovs-vswitchd"


def ovs_available() -> str | None:
    """Why OVS cannot be used here, or None when it can."""
    for tool in ("ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-ofctl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian openvswitch-switch)"
    if not Path(OVS_VSWITCHD).exists() or not SCHEMA.exists():
        return "ovs-vswitchd or its schema is missing (Debian openvswitch-switch)"
    return None


class UnixctlClient:
    """OVS's unixctl protocol (JSON-RPC 1.0 over a stream socket): what ovs-appctl speaks,
    without a process per request."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = ""
        self.decoder = json.JSONDecoder()
        self.next_id = 0

    def call(self, method: str, *params: str) -> str:
        self.next_id += 1
        self.sock.sendall(json.dumps({"method": method, "params": list(params),
                                      "id": self.next_id}).encode())
        while True:
            text = self.buf.lstrip()
            if text:
                with contextlib.suppress(json.JSONDecodeError):
                    msg, end = self.decoder.raw_decode(text)
                    self.buf = text[end:]
                    if msg.get("id") != self.next_id:
                        continue
                    if msg.get("error") is not None:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    return str(msg.get("result"))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("ovs-vswitchd closed its control socket")
            self.buf += chunk.decode()

    def close(self) -> None:
        self.sock.close()


class Ovs:
    """A private ovsdb-server and ovs-vswitchd with one netdev bridge of N dummy ports,
    numbered 1..N as sluice numbers a switch's ports."""

    def __init__(self, workdir: Path, n_ports: int, bridge: str = "sldiff") -> None:
        self.dir = workdir
        self.bridge = bridge
        self.n_ports = n_ports
        self.env = dict(os.environ, OVS_RUNDIR=str(workdir), OVS_LOGDIR=str(workdir),
                        OVS_DBDIR=str(workdir), OVS_SYSCONFDIR=str(workdir),
                        OVS_PKGDATADIR="/usr/share/openvswitch")
        self.db_sock = workdir / "db.sock"
        self.ctl_path = workdir / "vswitchd.ctl"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.unixctl: UnixctlClient | None = None
        self.dp_ports: dict[int, str] = {}      # datapath port -> OpenFlow number or LOCAL

    def _run(self, *args: str, stdin: str | None = None, check: bool = True,
             ) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(list(args), input=stdin, env=self.env, text=True,
                           capture_output=True, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
        return r

    def _spawn(self, args: list[str], ready: Path, name: str) -> None:
        with open(self.dir / f"{name}.out", "wb") as log:
            proc = subprocess.Popen(args, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT)
        self.procs.append(proc)
        deadline = time.monotonic() + 20
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                msg = (self.dir / f"{name}.out").read_text(errors="replace")
                if (self.dir / f"{name}.log").exists():
                    msg += (self.dir / f"{name}.log").read_text(errors="replace")
                raise RuntimeError(f"{name} did not start:\n{msg}")
            time.sleep(0.02)

    def start_daemons(self, *vswitchd_options: str) -> None:
        """ovsdb-server on a new database, then ovs-vswitchd with VSWITCHD_OPTIONS."""
        d = self.dir
        self._run("ovsdb-tool", "create", str(d / "conf.db"), str(SCHEMA))
        self._spawn(["ovsdb-server", str(d / "conf.db"), f"--remote=punix:{self.db_sock}",
                     f"--pidfile={d / 'ovsdb-server.pid'}", f"--unixctl={d / 'ovsdb.ctl'}",
                     f"--log-file={d / 'ovsdb-server.log'}", "--no-chdir", "-vconsole:off"],
                    self.db_sock, "ovsdb-server")
        self.vsctl("--no-wait", "init")
        self._spawn([OVS_VSWITCHD, f"unix:{self.db_sock}", *vswitchd_options,
                     f"--pidfile={d / 'ovs-vswitchd.pid'}", f"--unixctl={self.ctl_path}",
                     f"--log-file={d / 'ovs-vswitchd.log'}", "--no-chdir", "-vconsole:off"],
                    self.ctl_path, "ovs-vswitchd")

    def start(self) -> Ovs:
        self.start_daemons("--enable-dummy=override", "--disable-system")
        args = ["add-br", self.bridge, "--", "set", "bridge", self.bridge,
                "datapath_type=netdev", "fail-mode=secure", "protocols=OpenFlow13"]
        for i in range(1, self.n_ports + 1):
            args += ["--", "add-port", self.bridge, f"{self.bridge}p{i}", "--", "set",
                     "interface", f"{self.bridge}p{i}", "type=dummy", f"ofport_request={i}"]
        self.vsctl(*args)
        self.unixctl = UnixctlClient(self.ctl_path)
        self._map_ports()
        return self

    def _map_ports(self) -> None:
        """Datapath port numbers (what "Datapath actions" show) to OpenFlow numbers."""
        text = self.unixctl.call("dpif/show")
        for m in re.finditer(r"^\s+(\S+) (\d+)/(\d+):", text, re.M):
            name, ofport, dpport = m.group(1), int(m.group(2)), int(m.group(3))
            self.dp_ports[dpport] = "LOCAL" if name == self.bridge else str(ofport)
        want = {str(i) for i in range(1, self.n_ports + 1)}
        if not want <= set(self.dp_ports.values()):
            raise RuntimeError(f"OVS ports are not numbered 1..{self.n_ports}:\n{text}")

    def vsctl(self, *args: str) -> str:
        return self._run("ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=20",
                         *args).stdout

    def ofctl(self, *args: str, stdin: str | None = None,
              check: bool = True) -> subprocess.CompletedProcess[str]:
        """ovs-ofctl -O OpenFlow13 VERB BRIDGE ARGS..., through the bridge's management
        socket in our run directory."""
        verb, *rest = args
        return self._run("ovs-ofctl", "-O", "OpenFlow13", verb,
                         str(self.dir / f"{self.bridge}.mgmt"), *rest, stdin=stdin,
                         check=check)

    def trace(self, in_port: int, frame: bytes) -> str:
        assert self.unixctl is not None
        return self.unixctl.call("ofproto/trace", self.bridge, f"in_port={in_port}",
                                 frame.hex())

    def stop(self) -> None:
        if self.unixctl is not None:
            self.unixctl.close()
            self.unixctl = None
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()


# ---- frames as fields ----

def _mac(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def frame_fields(frame: bytes) -> dict[str, Any]:
    """The header fields of an Ethernet frame that flow mode's actions can change, parsed
    the way both switches parse (tags, IPv4 without options, IPv6 without extension
    headers, TCP/UDP/SCTP ports, ICMP type/code, ARP)."""
    f: dict[str, Any] = {"dl_dst": _mac(frame[0:6]), "dl_src": _mac(frame[6:12])}
    off = 12
    vlans = []
    etype = int.from_bytes(frame[off:off + 2], "big")
    while etype in (0x8100, 0x88a8):
        tci = int.from_bytes(frame[off + 2:off + 4], "big")
        vlans.append((etype, tci & 0xfff, tci >> 13))
        off += 4
        etype = int.from_bytes(frame[off:off + 2], "big")
    f["vlans"] = tuple(vlans)
    f["dl_type"] = etype
    off += 2
    l4 = None
    proto = None
    if etype == 0x0800:
        ip = frame[off:]
        ihl = (ip[0] & 15) * 4
        f.update(nw_tos=ip[1], nw_ttl=ip[8], nw_proto=ip[9],
                 nw_src=str(ipaddress.IPv4Address(ip[12:16])),
                 nw_dst=str(ipaddress.IPv4Address(ip[16:20])))
        proto = ip[9]
        l4 = ip[ihl:]
    elif etype == 0x86dd:
        ip = frame[off:]
        word = int.from_bytes(ip[0:4], "big")
        f.update(nw_tos=(word >> 20) & 0xff, ipv6_label=word & 0xfffff, nw_proto=ip[6],
                 nw_ttl=ip[7], ipv6_src=str(ipaddress.IPv6Address(ip[8:24])),
                 ipv6_dst=str(ipaddress.IPv6Address(ip[24:40])))
        proto = ip[6]
        l4 = ip[40:]
    elif etype == 0x0806:
        a = frame[off:]
        f.update(arp_op=int.from_bytes(a[6:8], "big"),
                 arp_spa=str(ipaddress.IPv4Address(a[14:18])),
                 arp_tpa=str(ipaddress.IPv4Address(a[24:28])))
    if l4 is not None and proto in (6, 17, 132):
        f.update(tp_src=int.from_bytes(l4[0:2], "big"), tp_dst=int.from_bytes(l4[2:4], "big"))
    elif l4 is not None and proto in (1, 58):
        f.update(icmp_type=l4[0], icmp_code=l4[1])
    return f


# ---- OVS's datapath actions ----

def split_top(text: str) -> list[str]:
    """TEXT cut at the commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur:
        out.append(cur)
    return [x.strip() for x in out if x.strip()]


def _attrs(text: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in split_top(text))


def _masked_int(old: int, value: str) -> int:
    v, _, m = value.partition("/")
    val = int(v, 0)
    if not m:
        return val
    mask = int(m, 0)
    return (old & ~mask) | (val & mask)


def _masked_addr(old: str, value: str, cls: type) -> str:
    v, _, m = value.partition("/")
    if not m:
        return str(cls(v))
    mask = int(cls(m))
    return str(cls((int(cls(old)) & ~mask) | (int(cls(v)) & mask)))


SET_FIELDS = {  # ODP key attribute -> (our field, kind)
    ("eth", "src"): ("dl_src", "mac"), ("eth", "dst"): ("dl_dst", "mac"),
    ("ipv4", "src"): ("nw_src", "ip4"), ("ipv4", "dst"): ("nw_dst", "ip4"),
    ("ipv4", "tos"): ("nw_tos", "int"), ("ipv4", "ttl"): ("nw_ttl", "int"),
    ("ipv6", "src"): ("ipv6_src", "ip6"), ("ipv6", "dst"): ("ipv6_dst", "ip6"),
    ("ipv6", "label"): ("ipv6_label", "int"), ("ipv6", "tclass"): ("nw_tos", "int"),
    ("ipv6", "hlimit"): ("nw_ttl", "int"),
    ("tcp", "src"): ("tp_src", "int"), ("tcp", "dst"): ("tp_dst", "int"),
    ("udp", "src"): ("tp_src", "int"), ("udp", "dst"): ("tp_dst", "int"),
    ("sctp", "src"): ("tp_src", "int"), ("sctp", "dst"): ("tp_dst", "int"),
}


def _apply_set(state: dict[str, Any], body: str) -> None:
    m = re.fullmatch(r"(\w+)\((.*)\)", body)
    if m is None:
        raise ValueError(f"unknown set action: {body}")
    proto, attrs = m.group(1), _attrs(m.group(2))
    for key, value in attrs.items():
        if (proto, key) not in SET_FIELDS:
            raise ValueError(f"unknown set field: {proto}({key}=...)")
        name, kind = SET_FIELDS[(proto, key)]
        if kind == "mac":
            v, _, mask = value.partition("/")
            if mask:
                old = int(state[name].replace(":", ""), 16)
                v = f"{(old & ~int(mask.replace(':', ''), 16)) | int(v.replace(':', ''), 16):012x}"
                v = ":".join(v[i:i + 2] for i in range(0, 12, 2))
            state[name] = v.lower()
        elif kind == "ip4":
            state[name] = _masked_addr(state[name], value, ipaddress.IPv4Address)
        elif kind == "ip6":
            state[name] = _masked_addr(state[name], value, ipaddress.IPv6Address)
        else:
            state[name] = _masked_int(state[name], value)


def replay_odp_actions(actions: str, start: dict[str, Any], dp_ports: dict[int, str],
                       ) -> list[tuple[str, dict[str, Any]]]:
    """Applies OVS's datapath ACTIONS to the fields START of the input frame; returns each
    output as (OpenFlow port number, "LOCAL" or "controller", the fields it carries)."""
    state = dict(start)
    outs: list[tuple[str, dict[str, Any]]] = []
    if actions.strip() == "drop":
        return outs
    for act in split_top(actions):
        if act.isdigit():
            outs.append((dp_ports.get(int(act), f"dp{act}"), dict(state)))
        elif act.startswith("set(") or act.startswith("set_masked("):
            _apply_set(state, act[act.index("(") + 1:-1])
        elif act.startswith("push_vlan("):
            a = _attrs(act[len("push_vlan("):-1])
            vlan = (int(a.get("tpid", "0x8100"), 0), int(a.get("vid", "0")),
                    int(a.get("pcp", "0")))
            state["vlans"] = (vlan,) + tuple(state["vlans"])
        elif act == "pop_vlan":
            state["vlans"] = tuple(state["vlans"])[1:]
        elif act.startswith("userspace(") and "controller(" in act:
            # reason=2 is OFPR_INVALID_TTL: dec_ttl found the TTL spent
            port = "controller:invalid_ttl" if "reason=2," in act else "controller"
            outs.append((port, dict(state)))
        elif act.startswith("meter("):
            pass
        else:
            raise ValueError(f"datapath action not understood: {act}")
    return outs


def parse_trace(text: str) -> tuple[str, str]:
    """The "Flow:" and "Datapath actions:" lines of an ofproto/trace answer."""
    flow = re.search(r"^Flow: (.*)$", text, re.M)
    acts = re.search(r"^Datapath actions: (.*)$", text, re.M)
    if flow is None or acts is None:
        raise ValueError("not an ofproto/trace answer:\n" + text)
    return flow.group(1), acts.group(1)
