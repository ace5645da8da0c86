"""Running a plan: switches started per scenario, trials run, rows written as they end.

Every userspace switch is SIGSTOPped as soon as it has started and continued only for the
trials it takes part in, so no idle poller competes with the one measured (nor with the
other users of the machine). Whatever happens, every process is continued and stopped, and
the namespaces and hugepage files made here are removed.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.bench import arrange, gen, manifest, placement, procs, vnfs
from sluice.bench.abwindows import Window
from sluice.bench.plan import TrialSpec, expected_seconds, trials_for
from sluice.bench.scenarios import Namespaces, Scenario, topology
from sluice.bench.schema import Row, append_rows
from sluice.bench.stats import Sample, loss_fraction, r_plus, trim
from sluice.bench.switches import ADAPTERS, Context, Switch
from sluice.bench.windows import Labelled, figures, ratios_by_label

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, from the command line."""

    units: tuple[tuple[Scenario, tuple[int, ...]], ...]
    switches: tuple[str, ...]          # name:mode keys
    trials: int
    duration: float
    window: float
    settle: float
    warmup: float
    cooldown: float
    switch_cpu: int
    gen_cpu: int
    allow_shared_cpu: bool
    baseline: str
    out: Path
    repo: Path
    vnf: str = "inline"
    vnf_cpus: tuple[int, ...] = ()     # CPUs of process VNFs, in turn; default: gen_cpu
    gen: Path | None = None            # sluice-gen; default: the repository's build
    monitor: Path | None = None        # placement monitor; default: bin/sluice-placement

    @property
    def vnf_cpu_list(self) -> tuple[int, ...]:
        """The CPUs process VNFs take in turn."""
        return self.vnf_cpus or (self.gen_cpu,)

    @property
    def alt_duration(self) -> float:
        """An alternating run lasts at least the warm-up and four windows, so each switch
        has a counted window between two of the other's (a shorter --duration is raised)."""
        return max(self.duration, self.warmup + 4 * self.window)

    def gen_seconds(self, method: str) -> float:
        """How long sluice-gen sends in a trial of METHOD."""
        return self.alt_duration if method == "alternating" else self.duration


@dataclass
class Live:
    """The switches running for one scenario."""

    switches: dict[str, Switch] = field(default_factory=dict)
    netns: Namespaces | None = None
    vnfs: dict[str, vnfs.VnfSet] = field(default_factory=dict)   # process VNFs per switch

    def pids(self, keys: Sequence[str]) -> list[int]:
        """The PIDs of the switches KEYS and of their VNF processes."""
        return [p for k in keys for p in self.switches[k].pids()
                + (self.vnfs[k].pids() if k in self.vnfs else [])]

    def vnf_pollers(self, keys: Sequence[str]) -> list[arrange.Poller]:
        """The busy pollers of the VNF processes of switches KEYS."""
        return [p for k in keys if k in self.vnfs for p in self.vnfs[k].pollers()]

    def signal(self, keys: Sequence[str], sig: signal.Signals) -> None:
        """Sends SIG to the processes of switches KEYS."""
        for pid in self.pids(keys):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


def split_key(key: str) -> tuple[str, str]:
    """('ovs-dpdk', 'normal') from 'ovs-dpdk:normal' (or from 'ovs-dpdk:normal#2', the
    second instance of one switch that `compare X X` runs)."""
    name, _, mode = key.partition(":")
    return name, mode.split("#")[0]


class Runner:
    """Runs the SETTINGS' plan, reporting progress to PROGRESS(seconds_done, what)."""

    def __init__(self, settings: Settings, progress: Progress, say: Callable[[str], None]):
        self.s = settings
        self.progress = progress
        self.say = say
        self.work = Path(tempfile.mkdtemp(prefix="sbench-", dir="/tmp"))
        self.tag = f"sb{os.getpid() % 100000}"
        self.monitor = placement.Monitor(
            settings.monitor or placement.monitor_path(settings.repo), self.work,
            (settings.gen_cpu, settings.switch_cpu))
        self.gen = settings.gen or gen.gen_path(settings.repo)
        self.skipped: list[dict[str, str]] = []
        self.versions: dict[str, str] = {}
        self.results = settings.out / "results.jsonl"
        self.letters = iter("abcdefghijklmnopqrstuvwxyz")

    # -- plan ---------------------------------------------------------------------------
    def usable_keys(self, scn: Scenario) -> list[str]:
        """The switch keys that can run SCN here; the others are recorded as skipped."""
        keys = []
        for key in self.s.switches:
            name, mode = split_key(key)
            cls = ADAPTERS[name]
            why = cls.available(self.s.repo)
            if why is None:
                probe = cls(self._ctx(cls, "probe"), mode)
                why = probe.unsupported(scn.name, scn.phy)
            if why is None:
                keys.append(key)
            else:
                self.skip(key, scn, why)
        return keys

    def skip(self, key: str, scn: Scenario, why: str) -> None:
        """Records that KEY did not run in SCN, and why."""
        self.skipped.append({"switch": key, "scenario": scn.label(), "reason": why})
        self.say(f"skipped {key} in {scn.label()}: {why}")

    def plan(self) -> list[tuple[Scenario, list[str], list[TrialSpec]]]:
        """Per scenario: the switches that run and their trials."""
        out = []
        for scn, sizes in self.s.units:
            if scn.chain and not vnfs.is_process(scn.vnf) and not gen.has_inline_vnfs(self.gen):
                self.skip("*", scn, "this sluice-gen has no --vnf-in (inline VNFs come with "
                          "the gen-vnf branch)")
                continue
            if scn.chain and vnfs.is_process(scn.vnf):
                why = vnfs.available(scn.vnf, self.s.repo) or vnfs.unsupported(scn.vnf, scn)
                if why:
                    self.skip("*", scn, why)
                    continue
                self.check_vnf_arrangement(scn)
            keys = self.usable_keys(scn)
            if not keys:
                continue
            kernel = {k for k in keys if ADAPTERS[split_key(k)[0]].kernel}
            out.append((scn, keys, trials_for(scn, sizes, keys, kernel, self.s.trials,
                                              self.s.baseline)))
        return out

    def check_vnf_arrangement(self, scn: Scenario) -> None:
        """Refuses process VNFs beside other pollers before anything starts (SharedCpuError),
        unless --allow-shared-cpu; the trials then mark their rows oversubscribed."""
        arrange.check([[arrange.Poller("sluice-gen", self.s.gen_cpu),
                        arrange.Poller("the switch's forwarding thread", self.s.switch_cpu),
                        *vnfs.planned_pollers(scn.vnf, scn.chain, self.s.vnf_cpu_list)]],
                      self.s.allow_shared_cpu)

    def total_seconds(self, plan: Sequence[tuple[Scenario, list[str], list[TrialSpec]]]) -> float:
        """Expected length of PLAN."""
        return sum(expected_seconds(specs, self.s.gen_seconds(specs[0].method), len(keys))
                   for _, keys, specs in plan)

    # -- switches -----------------------------------------------------------------------
    def _ctx(self, cls: type[Switch], sub: str) -> Context:
        work = self.work / sub
        work.mkdir(parents=True, exist_ok=True)
        return Context(work=work, tag=f"{self.tag}{sub[-1]}", switch_cpu=self.s.switch_cpu,
                       ctl_cpu=self.s.gen_cpu, repo=self.s.repo,
                       extra={"gen_veth_driver": "af_xdp"})

    def start_switches(self, scn: Scenario, keys: Sequence[str], live: Live) -> None:
        """Starts KEYS for SCN, each stopped right after it started; failures skipped."""
        for key in keys:
            name, mode = split_key(key)
            cls = ADAPTERS[name]
            sw = cls(self._ctx(cls, f"{name}-{mode}-{next(self.letters)}"), mode)
            try:
                ns = live.netns.create(f"{sw.ctx.tag}-sw") if live.netns else None
                topo = topology(scn, sw.ctx.work, sw.ctx.tag, ns)
                if live.netns:
                    live.netns.add_veths(topo)
                sw.start(topo)
                # Process VNFs attach while their switch runs: virtio-user negotiates with it.
                if scn.chain and vnfs.is_process(scn.vnf):
                    live.vnfs[key] = vnfs.VnfSet(scn.vnf, key, self.s.vnf_cpu_list)
                    live.vnfs[key].start(sw)
                    self.versions[f"vnf {scn.vnf}"] = vnfs.version(scn.vnf)
            except Exception as e:  # noqa: BLE001  any failure of a peer skips that peer
                if key in live.vnfs:
                    live.vnfs.pop(key).stop()
                sw.stop()
                self.skip(key, scn, f"did not start: {e}")
                continue
            self.versions[name] = sw.version()
            live.switches[key] = sw
            live.signal([key], signal.SIGSTOP)
            self.progress(0, f"{scn.label()}: {key} started")

    @contextlib.contextmanager
    def scenario(self, scn: Scenario, keys: Sequence[str]) -> Iterator[Live]:
        """The switches of SCN running (stopped) inside the block, all gone after it."""
        live = Live()
        try:
            if scn.phy == "veth":
                live.netns = Namespaces(self.tag)
            self.start_switches(scn, keys, live)
            yield live
        finally:
            live.signal(list(live.switches), signal.SIGCONT)
            for v in live.vnfs.values():
                v.stop()
            for sw in live.switches.values():
                sw.stop()
            if live.netns:
                live.netns.delete()
            self.keep_logs()

    def keep_logs(self) -> None:
        """Copies the switches' logs into OUT/logs."""
        dest = self.s.out / "logs"
        dest.mkdir(parents=True, exist_ok=True)
        for log in self.work.rglob("*.log"):
            name = "-".join(log.relative_to(self.work).parts)
            shutil.copy(log, dest / name)

    # -- trials -------------------------------------------------------------------------
    def oversubscribed(self, sws: Sequence[Switch], alternating: bool,
                       vnf_pollers: Sequence[arrange.Poller] = ()) -> bool:
        """The CPU-arrangement rule for a trial of SWS (raises unless allowed). VNF_POLLERS:
        those of the trial's VNF processes, which run with their switch (interleaved trials
        only: sluice-gen's alternation stops one PID a side, so they count in every phase)."""
        g = arrange.Poller("sluice-gen", self.s.gen_cpu)
        phases = ([[g, *sw.pollers(), *vnf_pollers] for sw in sws] if alternating
                  else [[g, *(p for sw in sws for p in sw.pollers()), *vnf_pollers]])
        return arrange.check(phases, self.s.allow_shared_cpu)

    def gen_cmd(self, spec: TrialSpec, sws: Sequence[Switch], out: Path,
                netns: str | None) -> list[str]:
        """The sluice-gen command of one trial."""
        cmd = [str(self.gen), "--cpu", str(self.s.gen_cpu), "--role", "txrx", "--size",
               str(spec.size), "--rate", "max", "--duration",
               str(self.s.gen_seconds(spec.method)), "--json",
               "--out", str(out)]
        if spec.scenario.direction == "bidir":
            cmd.append("--bidir")
        for sw in sws:
            cmd += gen.port_args(sw, inline_vnfs=not vnfs.is_process(spec.scenario.vnf))
        if spec.method == "alternating":
            cmd += ["--alternate", ",".join(str(sw.pids()[0]) for sw in sws),
                    "--window", str(self.s.window), "--settle", str(self.s.settle)]
        else:
            cmd += ["--warmup", str(self.s.warmup), "--cooldown", str(self.s.cooldown)]
        return ["ip", "netns", "exec", netns, *cmd] if netns else cmd

    def run_gen(self, spec: TrialSpec, sws: Sequence[Switch], live: Live) -> gen.GenResult:
        """One sluice-gen run; on veths an af_xdp failure is retried with af_packet."""
        name = f"gen-{spec.scenario.name}-{spec.size}-{spec.trial}-{'-'.join(spec.switches)}"
        out = self.work / f"{name.replace(':', '_')}.json"
        netns = live.netns.gen if live.netns else None
        cmd = self.gen_cmd(spec, sws, out, netns)
        log = self.s.out / "logs" / out.with_suffix(".log").name
        log.parent.mkdir(parents=True, exist_ok=True)
        timeout = self.s.gen_seconds(spec.method) + 30
        def resume() -> None:
            live.signal(spec.switches, signal.SIGCONT)

        try:
            return gen.run(cmd, log, out, timeout, resume)
        except RuntimeError:
            if not any(a.startswith("af_xdp:") for a in cmd):
                raise
            cmd = [a.replace("af_xdp:", "af_packet:", 1) for a in cmd]
            return gen.run(cmd, log, out, timeout, resume)

    def run_trial(self, spec: TrialSpec, live: Live) -> list[Row]:
        """Continues the trial's switches, runs the generator, stops them again."""
        keys = spec.gen_order
        sws = [live.switches[k] for k in keys]
        over = self.oversubscribed(sws, spec.method == "alternating", live.vnf_pollers(keys))
        before = {k: self.cpu_of(live.switches[k]) for k in keys}
        busy0 = procs.cpu_busy()
        t0 = time.monotonic()
        live.signal(keys, signal.SIGCONT)
        try:
            time.sleep(0.3)
            with self.monitor.running():
                res = self.run_gen(spec, sws, live)
        finally:
            live.signal(keys, signal.SIGSTOP)
        wall = round(time.monotonic() - t0, 3)
        busy = {c: round(v - busy0.get(c, 0.0), 3) for c, v in procs.cpu_busy().items()}
        cpu = {k: _delta(self.cpu_of(live.switches[k]), before[k]) for k in keys}
        common = {"over": over, "busy": busy, "cpu": cpu, "res": res, "wall": wall}
        if spec.method == "alternating":
            return self.alternating_rows(spec, sws, keys, common)
        return self.interleaved_rows(spec, sws[0], keys[0], common)

    @staticmethod
    def cpu_of(sw: Switch) -> float | None:
        """CPU seconds of SW's processes so far."""
        vals = [procs.cpu_seconds(p) for p in sw.pids()]
        return sum(v for v in vals if v is not None) if vals else None

    def base_row(self, spec: TrialSpec, sw: Switch, key: str, common: dict[str, Any],
                 **kw: Any) -> Row:
        """A row with the fields every method fills the same way."""
        res: gen.GenResult = common["res"]
        idle = float(res.summary.get("idle_fraction", 0.0))
        lat = {k: float(v) for k, v in (res.summary.get("latency_ns") or {}).items()
               if isinstance(v, int | float)}
        return Row(switch=sw.name, mode=sw.mode, key=key, scenario=spec.scenario.name,
                   phy=spec.scenario.phy, vnf=spec.scenario.vnf, size=spec.size,
                   direction=spec.scenario.direction, trial=spec.trial,
                   method=spec.method, oversubscribed=common["over"],
                   generator_bound=idle < 0.01, kernel_path=spec.scenario.kernel_path,
                   gen_idle_fraction=idle, port_kind=sw.port_kind(), steering=sw.steering(),
                   switch_cpu_s=common["cpu"][key], gen_cpu_s=round(res.cpu_s, 3),
                   cpu_busy_s=common["busy"], wall_s=common["wall"], latency_ns=lat, **kw)

    def alternating_rows(self, spec: TrialSpec, sws: Sequence[Switch], keys: Sequence[str],
                         common: dict[str, Any]) -> list[Row]:
        """Rows of both switches of an alternation, per placement label."""
        res: gen.GenResult = common["res"]
        probes = self.monitor.probes()
        skip = math.ceil(self.s.warmup / self.s.window - 1e-9)
        ws = [Labelled(Window(int(w["index"]), w["switch"], float(w["rx_pps"]),
                              float(w["counted_s"])),
                       int(w["tx_packets"]), int(w["rx_packets"]),
                       placement.label(probes, float(w["start_monotonic_s"]) + self.s.settle,
                                       float(w["start_monotonic_s"]) + self.s.window))
              for w in res.windows if int(w["index"]) >= skip]
        ratios = ratios_by_label(ws)
        rows = []
        for side, sw, key, other in (("A", sws[0], keys[0], keys[1]),
                                     ("B", sws[1], keys[1], keys[0])):
            for lab in sorted({w.label for w in ws}):
                f = figures(ws, side, lab, ratios)
                if f is None:
                    continue
                rows.append(self.base_row(
                    spec, sw, key, common, placement=lab, rx_pps=f.rx_mean, tx_pps=f.tx_pps,
                    loss=f.loss, rx_pps_median=f.rx_median, samples=f.windows,
                    counted_s=f.counted_s, ratio_vs=other,
                    ratio_median=f.ratio.median if f.ratio else None,
                    ratio_q1=f.ratio.q1 if f.ratio else None,
                    ratio_q3=f.ratio.q3 if f.ratio else None,
                    ratio_n=f.ratio.n if f.ratio else 0,
                    gen_order="first" if side == "A" else "second"))
        return rows

    def interleaved_rows(self, spec: TrialSpec, sw: Switch, key: str,
                         common: dict[str, Any]) -> list[Row]:
        """Rows of one switch's trial, per placement label of its one-second samples."""
        res: gen.GenResult = common["res"]
        probes = self.monitor.probes()
        kept = trim(res.samples, self.s.warmup, self.s.cooldown, self.s.duration)
        groups: dict[str, list[Sample]] = defaultdict(list)
        for s in kept:
            groups[placement.label(probes, s.monotonic_s - 1.0, s.monotonic_s)].append(s)
        rows = []
        for lab, samples in sorted(groups.items()):
            tx = sum(s.tx_pps for s in samples)
            rx = sum(s.rx_pps for s in samples)
            rows.append(self.base_row(
                spec, sw, key, common, placement=lab, rx_pps=r_plus(samples),
                tx_pps=tx / len(samples), loss=loss_fraction(tx, rx),
                rx_pps_median=sorted(s.rx_pps for s in samples)[len(samples) // 2],
                samples=len(samples), counted_s=float(len(samples))))
        return rows

    # -- the whole run ------------------------------------------------------------------
    def run(self) -> list[Row]:
        """Runs the plan; returns every row (also appended to results.jsonl as they come)."""
        self.s.out.mkdir(parents=True, exist_ok=True)
        all_rows: list[Row] = []
        try:
            for scn, keys, specs in self.plan_cache:
                with self.scenario(scn, keys) as live:
                    for spec in specs:
                        all_rows += self.one(spec, live)
        finally:
            self.write_manifest()
            shutil.rmtree(self.work, ignore_errors=True)
        return all_rows

    def one(self, spec: TrialSpec, live: Live) -> list[Row]:
        """Runs SPEC if its switches started; a failed trial is recorded, not fatal."""
        what = (f"{spec.scenario.label()} {spec.size} B trial {spec.trial}: "
                + " vs ".join(spec.switches))
        if any(k not in live.switches for k in spec.switches):
            self.progress(self.s.gen_seconds(spec.method) + 3, f"{what} (skipped)")
            return []
        try:
            rows = self.run_trial(spec, live)
        except arrange.SharedCpuError:
            raise
        except Exception as e:  # noqa: BLE001  one failed trial must not end the run
            self.skip("+".join(spec.switches), spec.scenario, f"trial failed: {e}")
            rows = []
        append_rows(self.results, rows)
        self.progress(self.s.gen_seconds(spec.method) + 3, what)
        return rows

    @property
    def plan_cache(self) -> list[tuple[Scenario, list[str], list[TrialSpec]]]:
        """The plan, made once."""
        if not hasattr(self, "_plan"):
            self._plan = self.plan()
        return self._plan

    def write_manifest(self) -> None:
        """manifest.json with the environment, versions, settings and what was skipped."""
        settings = {k: (str(v) if isinstance(v, Path) else v)
                    for k, v in self.s.__dict__.items() if k != "units"}
        settings["units"] = [{"scenario": scn.name, "phy": scn.phy,
                              "direction": scn.direction, "sizes": list(sizes)}
                             for scn, sizes in self.s.units]
        settings["alternating_duration"] = self.s.alt_duration
        settings["placement_monitor"] = (str(self.monitor.exe) if self.monitor.available
                                         else None)
        m = manifest.collect(self.s.repo, self.versions, settings)
        m["skipped"] = self.skipped
        m["sluice_gen"] = str(self.gen)
        manifest.write(self.s.out / "manifest.json", m)


def _delta(now: float | None, before: float | None) -> float | None:
    return None if now is None or before is None else round(now - before, 3)
