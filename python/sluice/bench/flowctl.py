"""Loading big rule lists into sluiced, and `sluice-bench flow-ctl`: control-plane speed.

sluiced reads one request a line of at most 64 MiB (docs/protocol.md): 100,000 ACL rules
(about 8 MiB) are one `add-flows` request. A longer list goes in as several, all written at
once on one connection and answered in order (`add_flows_chunked`). `replace-flows` is one
atomic request and cannot be split: a list over 64 MiB is refused by the daemon, and the
bench says so in its row.

The bench (`run`), per switch (sluice:flow and ovs-dpdk:flows, v2v over vhost-user, one
sluice-gen loop as generator and sink):
1. add-flows of `--add-rules` ACL rules (100,000) into the running switch: the seconds from
   the first request to the last answer (sluice: JSON-RPC add-flows, chunked; OVS:
   `ovs-ofctl add-flows FILE`), and the daemon's resident memory (VmRSS) before and after;
2. R+ with the `--replace-rules` ACL (10,000) and the steering rules loaded, over
   `--rplus-seconds` (3);
3. traffic at `--load` (0.5) of that R+ for `--traffic-seconds` (8) without any change
   (the control: what the machine loses by itself), then the same again, and after
   `--replace-at` (3) seconds, replace-flows with another 10,000-rule ACL (other seed) and
   the same steering rules (sluice: RPC replace-flows; OVS: `ovs-ofctl replace-flows`, and
   `--bundle` for an atomic swap); the seconds it took and whether any frame was lost over
   the run (sluice-gen's sent minus received, and the switch's own drop counters where it
   has them).
Rows go to OUT/flow-ctl.jsonl; a table is printed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sluice.bench import rules
from sluice.rpc import RpcError, decode_answer, encode_request

LINE_MAX = 64 * 1024 * 1024 - 1024   # a request line must stay under sluiced's 64 MiB


def chunks(method: str, switch: str, lines: Sequence[str], first_id: int = 1,
           limit: int = LINE_MAX) -> list[bytes]:
    """LINES as `method` requests of at most LIMIT bytes each."""
    out: list[bytes] = []
    cur: list[str] = []
    size = 0
    base = len(encode_request(method, {"switch": switch, "flows": []}, first_id)) + 16
    for line in lines:
        cost = len(json.dumps(line)) + 1
        if cur and base + size + cost > limit:
            out.append(encode_request(method, {"switch": switch, "flows": cur},
                                      first_id + len(out)))
            cur, size = [], 0
        cur.append(line)
        size += cost
    if cur:
        out.append(encode_request(method, {"switch": switch, "flows": cur},
                                  first_id + len(out)))
    return out


def pipeline(sock_path: str | Path, requests: Sequence[bytes], timeout: float = 600.0
             ) -> tuple[float, list[Any]]:
    """Writes REQUESTS on one connection (a thread writes while this one reads the answers)
    and returns the seconds from the first write to the last answer, and the results (an
    RpcError of any answer is raised once all are read)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(sock_path))
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for r in requests:
                s.sendall(r)
        except OSError as e:
            errors.append(e)

    results: list[Any] = []
    failure: RpcError | None = None
    t0 = time.monotonic()
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    f = s.makefile("rb")
    try:
        for i in range(len(requests)):
            line = f.readline()
            try:
                results.append(decode_answer(line, json.loads(requests[i])["id"],
                                             str(sock_path)))
            except RpcError as e:
                failure = failure or e
                results.append(None)
        took = time.monotonic() - t0
    finally:
        writer.join(timeout=5)
        f.close()
        s.close()
    if failure is not None:
        raise failure
    if errors:
        raise errors[0]
    return took, results


def add_flows_chunked(sock_path: str | Path, switch: str, lines: Sequence[str],
                      timeout: float = 600.0) -> tuple[float, int]:
    """LINES added to flow switch SWITCH in as few add-flows requests as fit under sluiced's
    line limit; (seconds from the first request to the last answer, requests)."""
    reqs = chunks("add-flows", switch, lines)
    took, _ = pipeline(sock_path, reqs, timeout)
    return took, len(reqs)


def rss_kib(pid: int | None) -> int | None:
    """VmRSS of PID in KiB (None when unreadable)."""
    if not pid:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class CtlRow:
    """One switch's control-plane figures (flow-ctl.jsonl)."""

    switch: str
    add_rules: int
    add_s: float | None = None
    add_requests: int = 0
    add_error: str = ""
    rss_before_kib: int | None = None
    rss_after_kib: int | None = None
    replace_rules: int = 0
    rplus_pps: float | None = None
    load: float = 0.5
    offered_pps: float | None = None
    replace_s: float | None = None
    replace_error: str = ""
    tx_packets: int = 0
    rx_packets: int = 0
    lost: int | None = None
    switch_drops: dict[str, int] = field(default_factory=dict)
    zero_loss: bool | None = None
    # The same traffic for the same time without a replace-flows, just before: the loss
    # the machine causes by itself (a vCPU stall overflows a ring), to read LOST against.
    control_tx_packets: int = 0
    control_lost: int | None = None
    gen_ring: int = 0
    note: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class CtlSettings:
    """`sluice-bench flow-ctl` options."""

    switches: tuple[str, ...]
    add_rules: int = 100_000
    replace_rules: int = 10_000
    masks: int = rules.DEFAULT_MASKS
    load: float = 0.5
    rplus_s: float = 3.0
    traffic_s: float = 8.0
    replace_at: float = 3.0
    size: int = 64
    ring: int = 16384             # sluice-gen --ring: rings that outlast a vCPU's stalls
    control: bool = True          # a run without replace-flows first, for comparison


def sluice_drops(sw: Any) -> dict[str, int]:
    """sluiced's drop counters of the bench switch, summed over its ports, by reason."""
    out: dict[str, int] = {}
    for c in (sw.port_counters() or {}).values():
        for k, v in c.get("drops", {}).items():
            out[k] = out.get(k, 0) + int(v)
    return out


class Bench:
    """One switch at a time: started with a v2v topology, measured, stopped."""

    def __init__(self, s: CtlSettings, gen: Path, gen_cpu: int, out: Path,
                 say: Any = print) -> None:
        self.s = s
        self.gen = gen
        self.gen_cpu = gen_cpu
        self.out = out
        self.say = say

    def gen_run(self, sw: Any, seconds: float, rate: str, name: str
                ) -> subprocess.Popen[bytes]:
        """sluice-gen txrx over SW's two links for SECONDS at RATE (max or pps)."""
        from sluice.bench import gen as gen_mod
        assert sw.topology is not None
        cmd = [str(self.gen), "--cpu", str(self.gen_cpu), "--role", "txrx", "--size",
               str(self.s.size), "--duration", f"{seconds:g}", "--json", "--out",
               str(self.out / f"{name}.json"), "--rate", rate, "--warmup", "1",
               "--cooldown", "0.5", *(("--ring", str(self.s.ring)) if self.s.ring else ()),
               *gen_mod.port_args(sw).args]
        log = (self.out / f"{name}.log").open("wb")
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def summary(self, name: str, proc: subprocess.Popen[bytes], seconds: float
                ) -> dict[str, Any]:
        """The last JSON object sluice-gen wrote (its summary)."""
        proc.wait(timeout=seconds + 60)
        path = self.out / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def add_phase(self, key: str, sw: Any, row: CtlRow) -> None:
        """add-flows of the big ACL into the running switch, timed, RSS before and after."""
        acl = rules.acl_lines(rules.acl(self.s.add_rules, self.s.masks, seed=7))
        pid = sw.pids()[0] if sw.pids() else None
        row.rss_before_kib = rss_kib(pid)
        try:
            if key.startswith("sluice"):
                row.add_s, row.add_requests = add_flows_chunked(sw.socket, "bench", acl)
            else:
                path = sw.ovs.flows_file(acl, "add.txt")
                t0 = time.monotonic()
                sw.ovs.ofctl("add-flows", str(path), timeout=900)
                row.add_s, row.add_requests = time.monotonic() - t0, 1
        except (RpcError, RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            row.add_error = str(e)
        row.rss_after_kib = rss_kib(pid)

    def replace(self, key: str, sw: Any, lines: list[str], row: CtlRow) -> None:
        """The timed replace-flows (in a thread, while traffic runs)."""
        try:
            t0 = time.monotonic()
            if key.startswith("sluice"):
                pipeline(sw.socket, [encode_request(
                    "replace-flows", {"switch": "bench", "flows": lines}, 1)])
            else:
                path = sw.ovs.flows_file(lines, "replace.txt")
                sw.ovs.ofctl("--bundle", "replace-flows", str(path), timeout=600)
            row.replace_s = time.monotonic() - t0
        except (RpcError, RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            row.replace_error = str(e)

    def replace_phase(self, key: str, sw: Any, row: CtlRow) -> None:
        """R+ with the replace-size ACL (SW freshly started with it), then traffic at
        LOAD x R+ and replace-flows to another ACL of that size."""
        steering = rules.pair_rules(sw.topology.pairs)
        second = rules.rule_set(steering, self.s.replace_rules, self.s.masks, seed=12)
        row.replace_rules = self.s.replace_rules
        p = self.gen_run(sw, self.s.rplus_s + 1.5, "max", f"{key}-rplus")
        summ = self.summary(f"{key}-rplus", p, self.s.rplus_s + 1.5)
        row.rplus_pps = float(summ.get("rx_pps", 0.0)) or None
        if not row.rplus_pps:
            row.note = "no R+ (the generator received nothing)"
            return
        row.offered_pps = row.rplus_pps * self.s.load
        row.gen_ring = self.s.ring
        if self.s.control:
            p = self.gen_run(sw, self.s.traffic_s, f"{row.offered_pps:.0f}", f"{key}-control")
            summ = self.summary(f"{key}-control", p, self.s.traffic_s)
            row.control_tx_packets = int(summ.get("tx_packets", 0))
            row.control_lost = int(summ.get("lost", 0))
        before = sluice_drops(sw) if key.startswith("sluice") else {}
        p = self.gen_run(sw, self.s.traffic_s, f"{row.offered_pps:.0f}", f"{key}-replace")
        time.sleep(self.s.replace_at)
        t = threading.Thread(target=self.replace, args=(key, sw, second, row))
        t.start()
        summ = self.summary(f"{key}-replace", p, self.s.traffic_s)
        t.join(timeout=600)
        row.tx_packets = int(summ.get("tx_packets", 0))
        row.rx_packets = int(summ.get("rx_packets", 0))
        row.lost = int(summ.get("lost", row.tx_packets - row.rx_packets))
        if key.startswith("sluice"):
            after = sluice_drops(sw)
            row.switch_drops = {k: v - before.get(k, 0) for k, v in after.items()
                                if v - before.get(k, 0)}
        row.zero_loss = row.lost == 0 and not row.switch_drops and not row.replace_error


    def one(self, key: str, ctx: Any) -> CtlRow:
        """Starts KEY (name:mode) on a v2v topology, runs both phases, stops it."""
        from sluice.bench import scenarios
        from sluice.bench.switches import ADAPTERS
        name, mode = key.split(":", 1)
        sw = ADAPTERS[name](ctx, mode)
        row = CtlRow(switch=key, add_rules=self.s.add_rules, load=self.s.load)
        topo = scenarios.topology(scenarios.parse("v2v", "memif", "uni"), ctx.work, ctx.tag)
        try:
            sw.start(topo)
            self.say(f"{key}: started; add-flows of {self.s.add_rules} rules")
            self.add_phase(key, sw, row)
            sw.stop()
            # Afresh for the second phase, with the first ACL of the swap (seed 11) loaded
            # as the adapter loads any ACL, above the steering rules.
            work2 = ctx.work / "replace"
            work2.mkdir(exist_ok=True)
            sw = ADAPTERS[name](dataclasses.replace(ctx, work=work2, tag=f"{ctx.tag}r", extra={
                **ctx.extra, "rules": str(self.s.replace_rules),
                "rule_masks": str(self.s.masks), "rule_seed": "11"}), mode)
            sw.start(scenarios.topology(scenarios.parse("v2v", "memif", "uni"), work2,
                                        f"{ctx.tag}r"))
            self.say(f"{key}: replace-flows of {self.s.replace_rules} rules under traffic")
            self.replace_phase(key, sw, row)
        except Exception as e:  # noqa: BLE001  a failing switch gives a row saying why
            row.note = f"failed: {e}"
        finally:
            sw.stop()
        return row


def run(s: CtlSettings, repo: Path, out: Path, switch_cpu: int, gen_cpu: int,
        gen: Path | None = None, say: Any = print) -> list[CtlRow]:
    """Every switch of S in turn; rows written to OUT/flow-ctl.jsonl."""
    import tempfile

    from sluice.bench import gen as gen_mod
    from sluice.bench.switches import Context
    out.mkdir(parents=True, exist_ok=True)
    bench = Bench(s, gen or gen_mod.gen_path(repo), gen_cpu, out, say)
    rows = []
    work = Path(tempfile.mkdtemp(prefix="sluice-flowctl-"))
    try:
        for i, key in enumerate(s.switches):
            sub = work / key.replace(":", "-")
            sub.mkdir()
            ctx = Context(work=sub, tag=f"fc{os.getpid() % 10000}{chr(97 + i)}",
                          switch_cpu=switch_cpu, ctl_cpu=gen_cpu, repo=repo,
                          extra={"gen_veth_driver": "af_xdp"})
            rows.append(bench.one(key, ctx))
            write_rows(out, rows)
    finally:
        import shutil
        logs = out / "logs"
        logs.mkdir(exist_ok=True)
        for log in work.rglob("*.log"):
            shutil.copy(log, logs / "-".join(log.relative_to(work).parts))
        shutil.rmtree(work, ignore_errors=True)
    return rows


def write_rows(out: Path, rows: Sequence[CtlRow]) -> Path:
    """OUT/flow-ctl.jsonl."""
    path = out / "flow-ctl.jsonl"
    path.write_text("".join(r.to_json() + "\n" for r in rows))
    return path


def table(rows: Sequence[CtlRow]) -> str:
    """A plain-text table of ROWS."""
    head = ("switch", "add rules", "add s", "reqs", "RSS MiB before/after", "replace rules",
            "at Mpps", "replace s", "lost (without replace)", "zero loss")
    lines = [" | ".join(head)]
    for r in rows:
        rss = ("" if r.rss_before_kib is None or r.rss_after_kib is None else
               f"{r.rss_before_kib / 1024:.0f}/{r.rss_after_kib / 1024:.0f}")
        lines.append(" | ".join((
            r.switch, str(r.add_rules),
            f"{r.add_s:.3f}" if r.add_s is not None else f"error: {r.add_error[:60]}",
            str(r.add_requests), rss, str(r.replace_rules),
            f"{r.offered_pps / 1e6:.3f}" if r.offered_pps else "",
            f"{r.replace_s:.3f}" if r.replace_s is not None else
            f"error: {r.replace_error[:60]}",
            "" if r.lost is None else f"{r.lost} ({_blank(r.control_lost)})",
            "" if r.zero_loss is None else ("yes" if r.zero_loss else "no"))))
    return "\n".join(lines)


def _blank(v: object) -> str:
    return "" if v is None else str(v)
