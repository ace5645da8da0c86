"""vpp: FD.io VPP with its own vhost-user, memif and af_packet drivers (no DPDK plugin).

Debian 12 does not package VPP, so the adapter runs an installed one: `vpp` and `vppctl` on
PATH, or under `--vpp-prefix DIR` (DIR/bin/vpp, DIR/bin/vppctl; docs/bench.md says how to
build one). Everything it makes lives under the adapter's work directory: a startup.conf of
its own, the runtime directory, the CLI socket, the binary-API socket, the stats socket and
the log; the shared-memory API segment carries the run's tag as prefix (/dev/shm/TAG-*), so
a system VPP's files are never touched, and only the plugins the benchmark needs are loaded
(vhost_plugin, memif_plugin, af_packet_plugin; dpdk_plugin stays off even where it exists).

Threads: the main thread on the generator's CPU, told to sleep between its loops
(`unix { poll-sleep-usec }`), so it never busy-polls beside sluice-gen; one worker on the
switch CPU, which busy-polls every receive queue. VPP is one process: SIGSTOP of its PID
stops the worker for the alternating windows.

Modes: `learn` puts every port in one L2 bridge domain with learning, forwarding and
flooding (VPP's l2-input/l2-learn/l2-fwd/l2-flood nodes); `xconnect` joins each pair of
ports with `set interface l2 xconnect` both ways, the patch-like configuration (and the one
that steers loopback chains). The variant `acl` (named only: `vpp:acl`) is xconnect with
VPP's ACL plugin on every port's input (chain-mixed: the firewall port's only), holding the
run's ACL (rules.py, --rules) translated to VPP's rules, first match first, and a final
permit-all in the steering rule's place; it needs a VPP built with the acl plugin and is
skipped, with the reason, where that plugin is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sluice.bench import procs, rules
from sluice.bench.arrange import Poller
from sluice.bench.cost import ClearingMeter, Meter
from sluice.bench.switches.base import Context, Link, Switch, Topology, which

BD_ID = 1
# The main thread's nap between its loops, on the generator's CPU. It runs only in VPP's
# windows, so what it takes from the generator (near its limit at 64 B) counts against
# VPP. Measured here with VPP v26.10-rc0 (idle share of CPU0; then vpp:learn/testpmd, v2v
# 64 B, near, median of 21-29 window ratios): 100 us 11 % (each loop costs ~20 us), 0.83;
# 1000 us 2 %, 0.96; 10000 us 0.7 %, 0.99 (VPP's own epoll sleep: 3 %). 10 ms only delays
# the control socket's answers (CLI, vhost-user and memif set-up) by up to 10 ms each.
POLL_SLEEP_US = 10000
ANSI = re.compile(r"\x1b\[[0-9;]*m")
COUNTER_COMMANDS = ("show interface", "show errors", "show runtime", "show threads")
PLUGINS = ("vhost_plugin.so", "memif_plugin.so", "af_packet_plugin.so")
ACL_PLUGIN = "acl_plugin.so"
# Rules per VPP ACL (one CLI line of about 20 KB); an interface applies a list of them in order.
ACL_CHUNK = 200
NOT_INSTALLED = ("VPP is not installed: no vpp and vppctl on PATH and no --vpp-prefix DIR "
                 "(Debian 12 does not package VPP; build it by hand as docs/bench.md, "
                 "'VPP', describes, then pass --vpp-prefix DIR or put DIR/bin on PATH)")


@dataclass(frozen=True)
class Install:
    """Where the VPP to run is: its two programs and the environment they need."""

    vpp: str
    vppctl: str
    prefix: Path | None = None

    def env(self) -> dict[str, str] | None:
        """The environment for a prefix install (its libraries first), None for PATH's."""
        if self.prefix is None:
            return None
        libs = [str(d) for d in sorted(self.prefix.glob("lib/*-linux-gnu")) if d.is_dir()]
        libs.append(str(self.prefix / "lib"))
        old = os.environ.get("LD_LIBRARY_PATH", "")
        return {**os.environ, "LD_LIBRARY_PATH": ":".join(libs + ([old] if old else []))}

    def plugin_dirs(self) -> list[Path]:
        """The plugin directories next to the vpp binary (lib/<triplet>/vpp_plugins or
        lib/vpp_plugins), where vpp looks by default."""
        root = Path(self.vpp).resolve().parent.parent
        return [Path(d) for d in (*sorted(glob.glob(str(root / "lib/*/vpp_plugins"))),
                                  str(root / "lib/vpp_plugins")) if Path(d).is_dir()]


def find(extra: Mapping[str, str]) -> tuple[Install | None, str | None]:
    """The VPP to run (from EXTRA's vpp_prefix, else PATH) or why there is none."""
    prefix = extra.get("vpp_prefix", "")
    if prefix:
        root = Path(prefix)
        found = Install(str(root / "bin" / "vpp"), str(root / "bin" / "vppctl"), root)
        missing = [p for p in (found.vpp, found.vppctl) if not os.access(p, os.X_OK)]
        if missing:
            return None, (f"--vpp-prefix {prefix}: {' and '.join(missing)} missing or not "
                          "executable (a VPP install has bin/vpp and bin/vppctl)")
    else:
        vpp, vppctl = which("vpp"), which("vppctl")
        if vpp is None or vppctl is None:
            return None, NOT_INSTALLED
        found = Install(vpp, vppctl)
    dirs = found.plugin_dirs()
    if dirs:
        lacking = [p for p in PLUGINS if not any((d / p).exists() for d in dirs)]
        if lacking:
            return None, (f"this VPP ({found.vpp}) lacks {', '.join(lacking)} in "
                          f"{', '.join(map(str, dirs))}: build it with the vhost, memif and "
                          "af_packet plugins")
    return found, None


def startup_conf(run_dir: Path, tag: str, main_cpu: int, worker_cpu: int,
                 extra_plugins: tuple[str, ...] = ()) -> str:
    """VPP's startup.conf: everything under RUN_DIR, the API segment prefixed with TAG, the
    main thread (sleeping between loops) on MAIN_CPU, one worker on WORKER_CPU, only the
    plugins the benchmark uses (and EXTRA_PLUGINS)."""
    plugins = "\n".join(f"  plugin {p} {{ enable }}" for p in (*PLUGINS, *extra_plugins))
    return f"""\
unix {{
  nodaemon
  nosyslog
  nocolor
  cli-no-pager
  runtime-dir {run_dir}
  cli-listen {run_dir}/cli.sock
  log {run_dir}/vpp-unix.log
  pidfile {run_dir}/vpp.pid
  poll-sleep-usec {POLL_SLEEP_US}
  coredump-size 0
}}
api-segment {{
  prefix {tag}
}}
socksvr {{
  socket-name {run_dir}/api.sock
}}
statseg {{
  socket-name {run_dir}/stats.sock
}}
cpu {{
  main-core {main_cpu}
  corelist-workers {worker_cpu}
}}
plugins {{
  plugin default {{ disable }}
{plugins}
  plugin dpdk_plugin.so {{ disable }}
}}
logging {{
  default-log-level warn
  default-syslog-log-level crit
}}
"""


def interface_names(topo: Topology) -> list[str]:
    """The name VPP gives each link's interface, in TOPO's order: vhost-user interfaces
    are numbered in creation order, memif ones by socket id (one socket per link)."""
    names = []
    vhost = 0
    for i, link in enumerate(topo.links):
        if link.kind == "vhost":
            names.append(f"VirtualEthernet0/0/{vhost}")
            vhost += 1
        elif link.kind == "memif":
            names.append(f"memif{i + 1}/0")
        else:
            names.append(f"host-{link.iface}")
    return names


def create_command(i: int, link: Link) -> list[str]:
    """The CLI commands that make link I's interface (VPP is the vhost-user server, the
    memif master and the af_packet end of the switch's veth)."""
    if link.kind == "vhost":
        return [f"create vhost-user socket {link.path} server"]
    if link.kind == "memif":
        return [f"create memif socket id {i + 1} filename {link.path}",
                f"create interface memif id 0 socket-id {i + 1} master"]
    return [f"create host-interface name {link.iface}"]


def commands(topo: Topology, mode: str) -> list[str]:
    """The vppctl commands that build TOPO in MODE (learn: one bridge domain; xconnect:
    each pair cross-connected both ways)."""
    names = interface_names(topo)
    cmds = [c for i, link in enumerate(topo.links) for c in create_command(i, link)]
    if mode == "learn":
        cmds.append(f"create bridge-domain {BD_ID} learn 1 forward 1 uu-flood 1 flood 1 "
                    "arp-term 0")
        cmds += [f"set interface l2 bridge {n} {BD_ID}" for n in names]
    elif mode == "xconnect":
        for a, b in topo.pairs:
            cmds += [f"set interface l2 xconnect {names[a]} {names[b]}",
                     f"set interface l2 xconnect {names[b]} {names[a]}"]
    else:
        raise ValueError(f"vpp: unknown mode {mode!r}")
    for n in names:
        cmds += [f"set interface rx-mode {n} polling", f"set interface state {n} up"]
    return cmds


def acl_commands(topo: Topology, acl_lines: list[str], in_port: int | None) -> list[str]:
    """The ACL plugin's commands: ACL_LINES (rules.vpp_acl_rules) as ACLs 0, 1, ... of
    ACL_CHUNK rules each, applied in that order to the input of every interface of TOPO, or
    of the one at OpenFlow port IN_PORT."""
    names = interface_names(topo)
    cmds = [f"set acl-plugin acl {', '.join(acl_lines[i:i + ACL_CHUNK])}"
            for i in range(0, len(acl_lines), ACL_CHUNK)]
    targets = names if in_port is None else [names[in_port - 1]]
    return cmds + [f"set acl-plugin interface {n} input acl {a}"
                   for n in targets for a in range(len(cmds))]


_ACL_HEAD = re.compile(r"^acl-index (\d+) count (\d+)", re.M)


def acl_counts(show_acl: str) -> dict[int, int]:
    """ACL index -> rule count, from `show acl-plugin acl` (each ACL's "acl-index N count M
    tag {...}" line)."""
    return {int(m.group(1)): int(m.group(2)) for m in _ACL_HEAD.finditer(show_acl)}


def acl_shortfall(show_acl: str, n_lines: int) -> list[str]:
    """The ACLs that do not hold what acl_commands gave them (N_LINES rules, ACL_CHUNK an
    ACL): `set acl-plugin acl` stops reading at a word it does not know and still makes the
    ACL from the rules before it, answering "ACL index:N" as if all went in."""
    want = {i // ACL_CHUNK: min(ACL_CHUNK, n_lines - i) for i in range(0, n_lines, ACL_CHUNK)}
    have = acl_counts(show_acl)
    return [f"ACL {a}: {have.get(a, 'none')} of {n} rules" for a, n in want.items()
            if have.get(a) != n]


def expected_modes(topo: Topology, mode: str) -> list[str]:
    """The lines `show mode` must print once TOPO is built in MODE."""
    names = interface_names(topo)
    if mode == "learn":
        return [f"l2 bridge {n} bd_id {BD_ID}" for n in names]
    peer = {a: b for x, y in topo.pairs for a, b in ((x, y), (y, x))}
    return [f"l2 xconnect {names[i]} {names[peer[i]]}" for i in range(len(names))]


def missing_modes(show_mode: str, want: list[str]) -> list[str]:
    """The lines of WANT that `show mode`'s output SHOW_MODE lacks (spacing ignored; a
    shown line may say more after them, as VPP's "l2 bridge IF bd_id 1 shg 0" does)."""
    have = [" ".join(line.split()) + " " for line in show_mode.splitlines()]
    return [w for w in want if not any(h.startswith(w + " ") for h in have)]


def quiet_answer(out: str, names: list[str]) -> bool:
    """Whether OUT is what a successful configuration command prints: nothing, the name of
    an interface it made (vhost-user, af_packet) or the bridge domain it made; VPP's CLI
    prints an error's text instead, and vppctl still exits with 0."""
    return (out in ("", f"bridge-domain {BD_ID}") or out in names
            or out.startswith("ACL index:"))


# `show runtime` (vlib/node_cli.c): per thread a "Thread N NAME (lcore C)" line (only when
# VPP has workers), then one line per node: name, state, calls, vectors, suspends, clocks
# (per vector where the node had vectors, else per call, else per suspend) and vectors per
# call. Input nodes' states are "polling", "interrupt wait" or "disabled"; internal nodes
# are "active"; processes wait ("event wait", "any wait", "time wait") or are "done".
_THREAD = re.compile(r"^Thread \d+ (\S+)", re.M)
_NODE = re.compile(r"^(\S+)\s+(active|polling|disabled|interrupt wait|event wait|any wait|"
                   r"time wait|done)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+(?:e[+-]?\d+)?)\s+"
                   r"[0-9.]+\s*$", re.M)
INPUT_STATES = ("polling", "interrupt wait")


def parse_show_runtime(text: str) -> tuple[float, int] | None:
    """(clocks, packets) of VPP's workers from a `show runtime` answer: every node's clocks
    (its clocks column times its vectors, else its calls, else its suspends) and the
    vectors of its input nodes, summed over the threads named vpp_wk_* (all of the answer
    when VPP runs no worker). The input node's clocks include its empty polls, so this is
    the worker's whole time in nodes per packet, not only its busy time. None when no node
    line is found."""
    heads = list(_THREAD.finditer(text))
    parts = ([text[m.end():(heads[i + 1].start() if i + 1 < len(heads) else len(text))]
              for i, m in enumerate(heads) if m.group(1).startswith("vpp_wk_")]
             if heads else [text])
    clocks, pkts, seen = 0.0, 0, False
    for part in parts:
        for m in _NODE.finditer(part):
            seen = True
            state = m.group(2)
            calls, vectors, suspends = int(m.group(3)), int(m.group(4)), int(m.group(5))
            clocks += float(m.group(6)) * (vectors or calls or suspends)
            if state in INPUT_STATES:
                pkts += vectors
    return (clocks, pkts) if seen else None


class Vpp(Switch):
    """FD.io VPP: an L2 bridge domain with learning, or l2 xconnect pairs."""

    name = "vpp"
    # VPP's vhost-user server has not met sluice-gen's virtio-raw driver here (VPP is not
    # built on every machine): --gen-driver auto keeps virtio-user for it.
    raw_gen_by_default = False
    learning_modes = ("learn",)
    modes = ("learn", "xconnect")
    variants = ("acl",)
    flooding_modes = ("learn",)

    def __init__(self, ctx: Context, mode: str) -> None:
        super().__init__(ctx, mode)
        self.proc: subprocess.Popen[bytes] | None = None
        self.run_dir = ctx.work / "vpp"
        self.log = ctx.work / "vpp.log"
        self.shm_prefix = f"{ctx.tag}vpp"
        self.install: Install | None = None
        self._version = ""

    @classmethod
    def available(cls, repo: Path) -> str | None:
        return cls.available_with(repo, {})

    @classmethod
    def available_with(cls, repo: Path, extra: Mapping[str, str]) -> str | None:
        return find(extra)[1]

    def unsupported(self, scenario: str, phy: str) -> str | None:
        if self.mode == "acl":
            install, why = find(self.ctx.extra)
            if install is None:
                return why
            if not any((d / ACL_PLUGIN).exists() for d in install.plugin_dirs()):
                return (f"this VPP ({install.vpp}) has no {ACL_PLUGIN}: build it with "
                        "-DVPP_PLUGINS=vhost,memif,af_packet,acl for vpp:acl")
        return super().unsupported(scenario, phy)

    @property
    def cli_socket(self) -> Path:
        """The CLI socket vppctl talks to."""
        return self.run_dir / "cli.sock"

    def vppctl(self, command: str, timeout: float = 20.0) -> str:
        """Runs one CLI COMMAND; its output (RuntimeError when vppctl fails)."""
        assert self.install is not None
        r = subprocess.run([self.install.vppctl, "-s", str(self.cli_socket), command],
                           capture_output=True, text=True, timeout=timeout,
                           env=self.install.env())
        if r.returncode != 0:
            raise RuntimeError(f"vppctl {command!r}: {(r.stderr or r.stdout).strip()}")
        return r.stdout

    def _answers(self) -> bool:
        if not self.cli_socket.exists():
            return False
        try:
            out = self.vppctl("show version", timeout=5)
        except (RuntimeError, subprocess.TimeoutExpired):
            return False
        if out.startswith("vpp "):
            self._version = out.strip()
            return True
        return False

    def _launch(self, topo: Topology) -> None:
        install, why = find(self.ctx.extra)
        if install is None:
            raise RuntimeError(why)
        self.install = install
        self.run_dir.mkdir(parents=True, exist_ok=True)
        conf = self.ctx.work / "startup.conf"
        conf.write_text(startup_conf(self.run_dir, self.shm_prefix, self.ctx.ctl_cpu,
                                     self.ctx.switch_cpu,
                                     (ACL_PLUGIN,) if self.mode == "acl" else ()))
        cmd = [install.vpp, "-c", str(conf)]
        if topo.netns:
            cmd = ["ip", "netns", "exec", topo.netns, *cmd]
        self.log.write_text("")
        self.proc = procs.start(cmd, self.log, env=install.env())
        procs.wait_until(self._answers, self.proc, "vpp", self.log)

    def start(self, topo: Topology) -> None:
        # VPP has no af_xdp here (the plugin is not needed); its veth ends use af_packet.
        topo = dataclasses.replace(topo, veth_driver="af_packet")
        self.topology = topo           # stop() removes its sockets even after a failure
        self._launch(topo)
        names = interface_names(topo)
        cmds = commands(topo, "xconnect" if self.mode == "acl" else self.mode)
        acl_lines: list[str] = []
        if self.mode == "acl":
            opts = rules.options(self.ctx.extra, topo.firewall)
            acl_set = rules.acl(opts.n, opts.masks, opts.seed)
            self.acl_rules, self.acl_masks = len(acl_set), rules.distinct_masks(acl_set)
            acl_lines = rules.vpp_acl_rules(acl_set)
            cmds += acl_commands(topo, acl_lines, opts.in_port)
        for command in cmds:
            out = self.vppctl(command).strip()
            if not quiet_answer(out, names):
                raise RuntimeError(f"vpp: {command!r} answered {out!r}")
        if self.mode == "acl":
            short = acl_shortfall(self.vppctl("show acl-plugin acl", timeout=60),
                                  len(acl_lines))
            if short:
                raise RuntimeError(f"vpp: ACLs not as sent ({'; '.join(short[:5])})")
        missing = missing_modes(self.vppctl("show mode"), expected_modes(
            topo, "xconnect" if self.mode == "acl" else self.mode))
        if missing:
            raise RuntimeError(f"vpp: configuration not in place (missing {missing}); "
                               f"log: {procs.tail(self.log)}")

    def gen_spec(self, link: Link, raw: bool = True) -> str:
        # The generator's veth ends keep the harness's driver (af_xdp), as with testpmd and
        # sluice, whose veth ends it follows only because they use af_xdp themselves; VPP's
        # af_packet on its own side need not slow the generator's side too.
        if link.kind == "veth":
            return f"{self.ctx.extra.get('gen_veth_driver', 'af_xdp')}:iface={link.peer}"
        return super().gen_spec(link, raw)

    def version(self) -> str:
        m = re.match(r"vpp (\S+)", self._version)
        release = m.group(1) if m else "(version unknown)"
        acl = ", acl" if self.mode == "acl" else ""
        return f"VPP {release} (native vhost-user, memif, af_packet{acl}; no DPDK plugin)"

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc else []

    def pollers(self) -> list[Poller]:
        # The main thread naps POLL_SLEEP_US between loops on the generator's CPU: not a
        # busy poller.
        return [Poller("vpp worker (vpp_wk_0)", self.ctx.switch_cpu)]

    def steering(self) -> str:
        threads = (f"main thread on CPU {self.ctx.ctl_cpu} sleeping {POLL_SLEEP_US // 1000} ms "
                   f"between loops, one worker busy-polling on CPU {self.ctx.switch_cpu}")
        if self.mode == "learn":
            return (f"VPP L2 bridge domain {BD_ID} with learning, forwarding and flooding "
                    "(unknown destinations flood; one-way traffic never teaches it the "
                    f"sink's MAC, so every frame floods); {threads}")
        if self.mode == "acl":
            return (f"VPP l2 xconnect with the ACL plugin on input: {self.acl_rules} ACL "
                    f"rules over {self.acl_masks} masks, then permit-all; {threads}")
        return (f"VPP l2 xconnect: each pair of ports cross-connected both ways, no lookup; "
                f"{threads}")

    def cost_meter(self) -> Meter | None:
        # Not run here yet (no VPP on this machine): written from VPP's CLI code and docs.
        def clear() -> bool:
            try:
                return self.vppctl("clear runtime", timeout=2).strip() == ""
            except (RuntimeError, subprocess.TimeoutExpired, OSError):
                return False

        def read() -> tuple[float, int] | None:
            try:
                return parse_show_runtime(ANSI.sub("", self.vppctl("show runtime", timeout=2)))
            except (RuntimeError, subprocess.TimeoutExpired, OSError):
                return None

        return ClearingMeter("VPP show runtime: worker node clocks (with empty polls) / "
                             "input vectors", clear, read)

    def save_counters(self) -> None:
        """Writes VPP's own counters (interfaces, errors, per-node runtime) to
        vpp-counters.log in the work directory, which the runner keeps with the logs: where
        VPP dropped a frame, and its vector sizes."""
        if self.proc is None or self.proc.poll() is not None or self.install is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGCONT)
        parts = []
        for command in COUNTER_COMMANDS:
            try:
                out = ANSI.sub("", self.vppctl(command, timeout=5))   # show threads colours
                parts.append(f"$ vppctl {command}\n{out}")
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
                parts.append(f"$ vppctl {command}\nfailed: {e}\n")
        (self.ctx.work / "vpp-counters.log").write_text("\n".join(parts))

    def stop(self) -> None:
        self.save_counters()
        if self.proc is not None:
            procs.stop(self.proc, signal.SIGTERM, timeout=15)    # continues it first
            self.proc = None
        # The shared-memory API segment of our own prefix, and the sockets VPP made.
        for f in glob.glob(f"/dev/shm/{self.shm_prefix}-*"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f)
        if self.topology is not None:
            for link in self.topology.links:
                if link.kind in ("vhost", "memif") and link.path:
                    Path(link.path).unlink(missing_ok=True)
        for name in ("cli.sock", "api.sock", "stats.sock", "memif.sock", "vpp.pid"):
            (self.run_dir / name).unlink(missing_ok=True)
