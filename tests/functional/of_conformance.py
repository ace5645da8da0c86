"""os-ken's OpenFlow switch test tool (Ryu's "OpenFlow Switch Test Tool", os_ken/tests/switch,
tester.py and its of13 test files) run against sluiced: the public OpenFlow 1.3 conformance
suite of issue 16.

The tool needs the switch under test (the "target": a sluiced flow switch driven by
sluice-ofagent) and an auxiliary OpenFlow switch (the "tester": Debian's ovs-vswitchd, its
userspace `netdev` datapath, on a private ovsdb-server in a temporary directory), port I of
one joined to port I of the other by a veth pair (I = 1, 2, 3), both connected to one
`osken-manager` that runs tester.py. For each test the tool installs the test's flows,
meters or groups in the target, sends the test's frames out of the tester's port 1 with
packet-out, and expects them back as packet-ins from the tester (egress) or the target
(packet_in), or checks the target's table counters (table-miss) or the rate the tester
receives (meters and groups, `duration_time` seconds of packets each).

    python tests/functional/of_conformance.py [--tests match,action/00_OUTPUT.json]
        [--duration S] [--out DIR] [--trace] [--no-retry]

writes DIR/summary.json (each test: file, description, result, detail) and summary.txt
(totals and every failure), and prints the totals. A test that failed with the tool's
"Receiving timeout" is run once more, alone, and counts as passed only if it passes then
(run_with_retry; summary.txt lists it). --trace records where each frame went
(of_trace.py: DIR/trace.txt). Everything it starts is ended by PID;
its veths, its DPDK prefix's hugepage files and its temporary directory are removed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "python")]

import os_ken  # noqa: E402
from of_trace import Tracer, analyse, start_log_reader  # noqa: E402
from ovs_oracle import Ovs, ovs_available  # noqa: E402

from conftest import REPO, Daemon, stop_process  # noqa: E402

SUITE = Path(os_ken.__file__).parent / "tests" / "switch"
TESTER = SUITE / "tester.py"
OF13 = SUITE / "of13"
AGENT = REPO / "bin" / "sluice-ofagent"
OSKEN_MANAGER = Path(sys.executable).parent / "osken-manager"
TARGET_DPID = "00000000000000a1"
TESTER_DPID = "00000000000000b1"
N_PORTS = 3


@dataclass
class Result:
    file: str           # the test file's own name ("match: 00_IN_PORT")
    test: str           # the test's description
    result: str         # OK or ERROR
    detail: str = ""    # the tool's reason for an ERROR


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=30)


class Veths:
    """N veth pairs: target end tI, tester end oI, IPv6 off so the kernel sends nothing of
    its own on them (a router solicitation would reach a controller as a packet-in)."""

    def __init__(self, tag: str, n: int) -> None:
        self.target = [f"ofc{tag}t{i}" for i in range(1, n + 1)]
        self.tester = [f"ofc{tag}o{i}" for i in range(1, n + 1)]
        self.made: list[str] = []
        for t, o in zip(self.target, self.tester, strict=True):
            run("ip", "link", "add", t, "type", "veth", "peer", "name", o)
            self.made.append(t)
            for dev in (t, o):
                run("sysctl", "-q", "-w", f"net.ipv6.conf.{dev}.disable_ipv6=1")
                run("ip", "link", "set", dev, "up")

    def delete(self) -> None:
        for t in self.made:
            run("ip", "link", "del", t, check=False)


class TesterOvs(Ovs):
    """The auxiliary switch: a private ovs-vswitchd whose netdev bridge has the veths'
    tester ends as ports 1..N, OpenFlow 1.3 only, connected to the tool.

    It keeps no datapath flows (other_config:flow-limit=0) unless CACHE_FLOWS: each frame
    is then looked up in its OpenFlow table as it is at that moment. The tool rewrites the
    tester's table at the start of every test (delete every flow, add in_port=2 to the
    controller, barrier) and sends its frame a few milliseconds after the barrier's reply. With
    OVS's flow cache, a revalidator that ran between the delete and the add turns the
    cached datapath flow for port 2 into a drop, and turns it back only at its next run,
    which the barrier does not wait for; a frame that arrives meanwhile is dropped by the
    tester ("drop_action_of_pipeline"), sluiced is blamed with a "Receiving timeout:
    increment in rx_packets in tester", and under load the window grows (docs/openflow.md,
    "Conformance"; of_tester_probe.py shows it without sluiced)."""

    def __init__(self, workdir: Path, bridge: str, ifaces: list[str], controller: str,
                 cache_flows: bool = False) -> None:
        super().__init__(workdir, len(ifaces), bridge)
        self.ifaces = ifaces
        self.controller = controller
        self.cache_flows = cache_flows

    def start(self) -> TesterOvs:
        # No --enable-dummy: the ports are the veths, read and written by the userspace
        # datapath through its own packet sockets; --disable-system: no kernel datapath.
        self.start_daemons("--disable-system")
        if not self.cache_flows:
            self.vsctl("set", "Open_vSwitch", ".", "other_config:flow-limit=0")
        args = ["add-br", self.bridge, "--", "set", "bridge", self.bridge,
                "datapath_type=netdev", "fail-mode=secure", "protocols=OpenFlow13",
                f"other-config:datapath-id={TESTER_DPID}",
                "other-config:disable-in-band=true"]
        for i, iface in enumerate(self.ifaces, 1):
            args += ["--", "add-port", self.bridge, iface, "--", "set", "interface", iface,
                     f"ofport_request={i}"]
        self.vsctl(*args)
        self.vsctl("set-controller", self.bridge, self.controller)
        return self


def parse_tool_output(text: str) -> list[Result]:
    """The tool logs each file's description ("match: 00_IN_PORT") before its first test,
    then per test four spaces, the description padded to 100 columns and OK or ERROR, an
    ERROR followed by its reason indented by eight."""
    results: list[Result] = []
    current_file = ""
    header = re.compile(r"^(action|match|group|meter)\S*: \S")
    outcome = re.compile(r"^    (\S.*?)\s+(OK|ERROR)$")
    for line in text.splitlines():
        if header.match(line):
            current_file = line.strip()
            continue
        m = outcome.match(line)
        if m:
            results.append(Result(current_file, m.group(1), m.group(2)))
            continue
        if line.startswith("        ") and results and results[-1].result == "ERROR" \
                and not results[-1].detail:
            results[-1].detail = line.strip()
    return results


def pick_files(selection: list[str]) -> list[Path]:
    """The of13 files named in SELECTION (directories or files under of13; all when
    empty), in the order the tool runs them."""
    picked: list[Path] = []
    for name in selection or ["."]:
        src = (OF13 / name).resolve()
        if not src.exists() or OF13.resolve() not in [src, *src.parents]:
            raise SystemExit(f"of-conformance: no test file or directory {name} under {OF13}")
        picked += sorted(src.rglob("*.json")) if src.is_dir() else [src]
    return picked


def select_tests(dest: Path, selection: list[str], duration: int | None,
                 only: dict[str, list[int]] | None = None) -> int:
    """Copies the of13 files named in SELECTION into DEST, each test's duration_time set to
    DURATION when given; with ONLY (a file's path under of13 -> the indexes of its tests),
    those files with those tests alone. Returns the number of files."""
    picked = pick_files(list(only) if only is not None else selection)
    for src in picked:
        rel = src.relative_to(OF13.resolve())
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        text = src.read_text()
        if duration is not None:
            text = re.sub(r'"duration_time"\s*:\s*\d+', f'"duration_time":{duration}', text)
        if only is not None:
            description, *tests = json.loads(text)
            text = json.dumps([description, *(tests[i] for i in only[str(rel)])], indent=1)
        out.write_text(text)
    return len(picked)


def summarize(results: list[Result]) -> dict[str, Any]:
    return count({"tests": [asdict(r) for r in results]})


def count(summary: dict[str, Any]) -> dict[str, Any]:
    """SUMMARY's totals (passed, failed, total, by_kind) from its tests."""
    by_dir: dict[str, dict[str, int]] = {}
    for t in summary["tests"]:
        kind = t["file"].split(":", 1)[0].split("/")[0] or "?"
        c = by_dir.setdefault(kind, {"ok": 0, "error": 0})
        c["ok" if t["result"] == "OK" else "error"] += 1
    passed = sum(1 for t in summary["tests"] if t["result"] == "OK")
    summary.update(passed=passed, failed=len(summary["tests"]) - passed,
                   total=len(summary["tests"]), by_kind=by_dir)
    return summary


def write_summary(out: Path, summary: dict[str, Any], elapsed: float) -> str:
    out.mkdir(parents=True, exist_ok=True)
    summary["seconds"] = round(elapsed, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [f"OpenFlow 1.3 conformance (os-ken switch test tool): {summary['passed']} of "
             f"{summary['total']} passed, {summary['failed']} failed, {elapsed:.0f} s"]
    for kind, c in sorted(summary["by_kind"].items()):
        lines.append(f"  {kind:8} {c['ok']:4} passed {c['error']:4} failed")
    retried = [t for t in summary["tests"] if t.get("first_try")]
    if retried:
        again = sum(1 for t in retried if t["result"] == "OK")
        lines.append(f"run again after the tool's 'Receiving timeout': {len(retried)}, "
                     f"passed the second time: {again}")
        for t in retried:
            lines.append(f"  {t['file']} | {t['test']}\n      first: {t['first_try']}\n"
                         f"      again: {t['result']} {t['detail']}".rstrip())
    failures = [t for t in summary["tests"] if t["result"] != "OK"]
    if failures:
        lines.append("failures:")
        for t in failures:
            lines.append(f"  {t['file']} | {t['test']}\n      {t['detail']}")
    text = "\n".join(lines) + "\n"
    (out / "summary.txt").write_text(text)
    return text


def run_suite(selection: list[str], duration: int | None, out: Path, timeout: float,
              keep: bool = False, trace: bool = False,
              only: dict[str, list[int]] | None = None) -> dict[str, Any]:
    why = ovs_available()
    if why:
        raise SystemExit(f"of-conformance: {why}")
    if trace and shutil.which("tcpdump") is None:
        print("of-conformance: no tcpdump: not traced", flush=True)
        trace = False
    tag = f"{os.getpid() % 10000}"
    workdir = Path(tempfile.mkdtemp(prefix=f"sluice-ofc{tag}-", dir="/tmp"))
    tests_dir = workdir / "of13"
    n_files = select_tests(tests_dir, selection, duration, only)
    port = free_tcp_port()
    veths: Veths | None = None
    daemon: Daemon | None = None
    ovs: TesterOvs | None = None
    tool: subprocess.Popen[bytes] | None = None
    tracer: Tracer | None = None
    log_reader: threading.Thread | None = None
    log = workdir / "tester.log"
    started = time.monotonic()
    try:
        veths = Veths(tag, N_PORTS)
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        with open(log, "wb") as f:
            tool = subprocess.Popen(
                [str(OSKEN_MANAGER), "--ofp-listen-host", "127.0.0.1",
                 "--ofp-tcp-listen-port", str(port),
                 "--test-switch-target", TARGET_DPID, "--test-switch-tester", TESTER_DPID,
                 "--test-switch-dir", str(tests_dir), str(TESTER)],
                stdout=subprocess.PIPE if trace else f, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env)
        if trace:
            out.mkdir(parents=True, exist_ok=True)
            log_reader = start_log_reader(tool, log, out / "tool-timed.log")
        daemon = Daemon(workdir, "target", ["--ofagent", str(AGENT)]).start()
        daemon.call("add-switch", name="br0", mode="flow")
        for i, iface in enumerate(veths.target, 1):
            daemon.call("add-port", switch="br0", name=f"p{i}", spec=f"af_packet:iface={iface}")
        daemon.call("set-datapath-id", switch="br0", datapath_id=TARGET_DPID)
        ovs = TesterOvs(workdir / "ovs", f"ofc{tag}br", veths.tester,
                        f"tcp:127.0.0.1:{port}")
        ovs.dir.mkdir()
        if trace:
            tracer = Tracer(out, daemon.socket,
                            ["ovs-ofctl", "-O", "OpenFlow13", "dump-ports",
                             str(ovs.dir / f"{ovs.bridge}.mgmt")], port,
                            {**{d: f"t{i}" for i, d in enumerate(veths.target, 1)},
                             **{d: f"o{i}" for i, d in enumerate(veths.tester, 1)}},
                            ovs.ctl_path)
        ovs.start()
        daemon.call("set-controller", switch="br0", targets=[f"tcp:127.0.0.1:{port}"])
        print(f"of-conformance: {n_files} test files, tool log {log}", flush=True)
        try:
            tool.wait(timeout)
        except subprocess.TimeoutExpired:
            print(f"of-conformance: the tool did not finish in {timeout:.0f} s; stopped",
                  flush=True)
    finally:
        if tool is not None:
            stop_process(tool, timeout=5)
        if log_reader is not None:
            log_reader.join(10)
        if tracer is not None:
            tracer.stop(ovs)
        if daemon is not None:
            daemon.stop()
        if ovs is not None:
            ovs.stop()
            # The netdev bridge's own port is a tap device that outlives ovs-vswitchd.
            run("ip", "link", "del", ovs.bridge, check=False)
        if veths is not None:
            veths.delete()
    elapsed = time.monotonic() - started
    text = log.read_text(errors="replace")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(log, out / "tester.log")
    if daemon is not None and daemon.log.exists():
        shutil.copy(daemon.log, out / "sluiced.log")
    summary = summarize(parse_tool_output(text))
    summary["files"] = n_files
    summary["duration_time"] = duration
    print(write_summary(out, summary, elapsed), end="")
    if tracer is not None:
        print(analyse(out, summary["tests"], {"target": TARGET_DPID, "tester": TESTER_DPID}),
              end="")
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return summary


TIMEOUT_WORDS = "Receiving timeout"


def run_with_retry(selection: list[str], duration: int | None, out: Path, timeout: float,
                   keep: bool = False, trace: bool = False) -> dict[str, Any]:
    """run_suite, then each test that failed with the tool's "Receiving timeout" once more
    (a second run of the tool on those tests alone, into OUT/retry): the tool's frame or its
    packet-in did not come back within its 3 s. Such a test counts as passed only if it
    passes the second time; its first result stays in the summary (first_try), and
    summary.txt lists every test run again. docs/openflow.md, "Conformance", says why: the
    timeouts seen came from the tester switch, which received the frame sluiced had
    forwarded in under a millisecond and sent no packet-in for it."""
    summary = run_suite(selection, duration, out, timeout, keep, trace)
    files = {json.loads(p.read_text())[0]: str(p.relative_to(OF13.resolve()))
             for p in pick_files(selection)}
    seen: dict[str, int] = {}
    where: dict[tuple[str, int], dict[str, Any]] = {}
    for t in summary["tests"]:
        k = seen.get(t["file"], 0)
        seen[t["file"]] = k + 1
        if t["result"] != "OK" and t["detail"].startswith(TIMEOUT_WORDS) and t["file"] in files:
            where[(t["file"], k)] = t
    if not where:
        return summary
    only: dict[str, list[int]] = {}
    for file, k in sorted(where):
        only.setdefault(files[file], []).append(k)
    print(f"of-conformance: running {len(where)} timed-out test(s) again", flush=True)
    again = run_suite([], duration, out / "retry", timeout, keep, trace, only)
    taken: dict[str, int] = {}
    for t in again["tests"]:
        m = taken.get(t["file"], 0)
        taken[t["file"]] = m + 1
        ks = only.get(files.get(t["file"], ""), [])
        first = where.get((t["file"], ks[m])) if m < len(ks) else None
        if first is None or first["test"] != t["test"]:
            continue
        first["first_try"] = first["detail"]
        first["result"], first["detail"] = t["result"], t["detail"]
    for t in where.values():
        if "first_try" not in t:           # the second run gave no result for it
            t["first_try"] = t["detail"]
            t["detail"] = "no result when run again"
    count(summary)
    summary["retried"] = len(where)
    summary["passed_when_retried"] = sum(1 for t in where.values() if t["result"] == "OK")
    print(write_summary(out, summary, summary["seconds"] + again["seconds"]), end="")
    return summary


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Run os-ken's OpenFlow 1.3 switch test tool against a sluiced flow "
                    "switch, with a private userspace OVS as the tester switch.")
    ap.add_argument("--tests", default="",
                    help="comma-separated files or directories under os-ken's "
                         "tests/switch/of13 (default: all of them)")
    ap.add_argument("--duration", type=int, default=None,
                    help="seconds of packets for the meter and group tests "
                         "(default: the files' own, 30)")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "of-conformance",
                    help="where summary.json, summary.txt and the logs go "
                         "(default: build/of-conformance)")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds before the tool is stopped (default 3600)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--no-retry", action="store_true",
                    help="do not run the tests that failed with the tool's 'Receiving "
                         "timeout' a second time")
    ap.add_argument("--trace", action="store_true",
                    help="record the frames and OpenFlow messages (tcpdump) and both "
                         "switches' counters every 0.2 s; trace.txt: where each timed-out "
                         "test's frame went (of_trace.py)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("of-conformance: needs root (veths, hugepages)", file=sys.stderr)
        return 2
    selection = [s for s in args.tests.split(",") if s]
    if args.no_retry:
        summary = run_suite(selection, args.duration, args.out, args.timeout, args.keep,
                            args.trace)
    else:
        summary = run_with_retry(selection, args.duration, args.out, args.timeout, args.keep,
                                 args.trace)
    return 0 if summary["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
