"""Running a plan: switches started per scenario, trials run, rows written as they end.

Every userspace switch is SIGSTOPped as soon as it has started and continued only for the
trials it takes part in, so no idle poller competes with the one measured (nor with the
other users of the machine). Whatever happens, every process is continued and stopped, and
the namespaces and hugepage files made here are removed.

Per scenario: the planned throughput trials, then more of them while some (switch, size)
has fewer than --min-near trials with near-placement figures and the time budget lasts,
then the latency trials, whose loads are fractions of the R+ the throughput trials found.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import shutil
import signal
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.bench import arrange, cost, gen, hops, manifest, placement, procs, vnfs
from sluice.bench.abwindows import Window
from sluice.bench.plan import (
    GEN_OVERHEAD_S,
    LOADS,
    START_S,
    TrialSpec,
    echo_for,
    has_load_latency,
    latency_for,
    pick_baseline,
    trials_for,
)
from sluice.bench.scenarios import (
    FANOUT_DST_MAC,
    Namespaces,
    Scenario,
    round_trip,
    topology,
)
from sluice.bench.schema import Row, append_rows
from sluice.bench.stats import (
    IMIX,
    JUMBO_MTU,
    Sample,
    gen_size,
    is_jumbo,
    loss_fraction,
    r_plus,
    row_size,
    trim,
)
from sluice.bench.switches import ADAPTERS, Context, Switch
from sluice.bench.windows import Labelled, figures, ratios_by_label

Progress = Callable[[float, str], None]
# Restarts of one switch within one scenario before the rest of its trials there are skipped.
MAX_RESTARTS = 3
# How long a latency trial at a fraction of R+ waits for a placement that R+ was measured in.
LOAD_PLACEMENT_WAIT_S = 8.0


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
    latency: tuple[str, ...] = ()      # "loads", "fixed:<pps>" and/or "echo"
    echo_bursts: tuple[int, ...] = (4, 8, 16, 32, 64, 128)
    latency_sizes: tuple[int, ...] = (64,)
    latency_scenarios: tuple[str, ...] = ()   # families for loads; () = every eligible
    latency_duration: float = 6.0
    latency_trials: int = 1
    loads: tuple[float, ...] = LOADS
    min_near: int = 0                  # add trials until each (switch, size) has this many
    budget_s: float = 0.0              # ... near ones, or these extra seconds are spent
    gen_extra: tuple[str, ...] = ()    # more sluice-gen options (--burst, --flows)
    switch_burst: int | None = None    # the switches' receive burst, where they have one
    fixed_any_scenario: bool = False   # fixed-rate latency in every scenario, not the v2v RTT
    tags: dict[str, str] = field(default_factory=dict)   # sweep_param/sweep_value of rows
    switch_options: dict[str, str] = field(default_factory=dict)  # Context.extra: vpp_prefix

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
        if method == "latency":
            return self.latency_duration
        return self.alt_duration if method == "alternating" else self.duration

    @property
    def fixed_rates(self) -> list[float]:
        """The rates of --latency fixed:RATE, packets per second."""
        return [float(m.split(":", 1)[1]) for m in self.latency if m.startswith("fixed:")]


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


def v2v_split(scn: Scenario, keys: Sequence[str]) -> list[tuple[Scenario, list[str]]]:
    """SCN with the KEYS that run in it. In v2v (and fanout), switches without vhost-user
    ports (`veth_only`) run apart, over the containers' veth pairs (v2v/veth, fanout-N/veth,
    kernel_path): their rows are never compared with vhost-user ones."""
    if scn.family not in ("v2v", "fanout") or scn.phy:
        return [(scn, list(keys))]
    veth = [k for k in keys if ADAPTERS[split_key(k)[0]].veth_only]
    rest = [k for k in keys if k not in veth]
    out = [(scn, rest)] if rest else []
    if veth:
        out.append((dataclasses.replace(scn, phy="veth"), veth))
    return out


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
        self.restarts: list[dict[str, Any]] = []
        self.restarts_of: dict[tuple[str, Scenario], int] = defaultdict(int)
        self.versions: dict[str, str] = {}
        self.results = settings.out / "results.jsonl"
        self.instances = itertools.count()     # switch instances started so far
        # (key, scenario, size) -> [(rx_pps, samples, placement)] of throughput rows: the R+
        # that latency loads are fractions of.
        self.rplus_seen: dict[tuple[str, Scenario, int], list[tuple[float, int, str]]] = \
            defaultdict(list)
        self.near_report: list[dict[str, Any]] = []
        self.grow: Callable[[float], None] = lambda _s: None   # the ETA's total grows
        # A jumbo size anywhere in the run: switches that take them get ports with that MTU.
        self.jumbo_run = any(is_jumbo(z) for _, sizes in settings.units for z in sizes) or \
            any(is_jumbo(z) for z in settings.latency_sizes)

    # -- plan ---------------------------------------------------------------------------
    def usable_keys(self, scn: Scenario, wanted: Sequence[str]) -> list[str]:
        """The switch keys of WANTED that can run SCN here; the others are recorded as
        skipped."""
        keys = []
        for key in wanted:
            name, mode = split_key(key)
            cls = ADAPTERS[name]
            why = cls.available_with(self.s.repo, self.s.switch_options)
            if why is None:
                probe = cls(self._ctx(cls, "probe"), mode)
                why = probe.unsupported(scn.steer_as, scn.phy)
                if why is None and scn.rtt and not (probe.learns and not probe.veth_only):
                    # The v2v round trip is a one-VNF chain on vhost-user ports: a learning
                    # switch steers it by MAC (gen.port_args); any other must steer
                    # loopback-1 over some stand-in.
                    chain = [probe.unsupported("loopback-1", ph) for ph in probe.phys]
                    why = chain[0] if all(chain) else None
            if (why is None and scn.process_vnfs and probe.learns
                    and not probe.veth_only):
                why = (f"{scn.vnf} VNFs address 02:00:00:00:00:0P, not the next hop, so a "
                       "learning switch would flood the chain (inline VNFs steer it by MAC)")
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
        """Per scenario: the switches that run and their trials (throughput first, then
        latency); the v2v round trip of --latency fixed:RATE is a scenario of its own."""
        out = []
        for unit, sizes in self.s.units:
            if unit.chain and not unit.process_vnfs and not gen.has_inline_vnfs(self.gen):
                self.skip("*", unit, "this sluice-gen has no --vnf-in (inline VNFs come with "
                          "the gen-vnf branch)")
                continue
            if (unit.chain and not unit.process_vnfs and set(unit.inline_kinds) != {"l2"}
                    and not gen.has_vnf_kinds(self.gen)):
                self.skip("*", unit, "this sluice-gen has no --vnf-kind (the inline L3 VNF "
                          "comes with the mixed branch)")
                continue
            if unit.family == "fanout" and not gen.has_sink_ports(self.gen):
                self.skip("*", unit, "this sluice-gen has no --sink-port (fan-out sinks "
                          "come with the fanout branch)")
                continue
            if unit.process_vnfs:
                why = vnfs.available(unit.vnf, self.s.repo) or vnfs.unsupported(unit.vnf, unit)
                if why:
                    self.skip("*", unit, why)
                    continue
                try:
                    self.check_vnf_arrangement(unit)
                except arrange.SharedCpuError:
                    self.cleanup_work()       # refused before run(), which would remove it
                    raise
            for scn, wanted in v2v_split(unit, self.s.switches):
                keys = self.usable_keys(scn, wanted)
                planned = self.plan_unit(scn, keys, sizes) if keys else (scn, [], [])
                if planned[2]:
                    out.append(planned)
        has_v2v = any(scn.family == "v2v" for scn, _ in self.s.units)
        if not self.s.fixed_any_scenario and self.s.fixed_rates and has_v2v:
            rtt = round_trip()
            keys = self.usable_keys(rtt, [k for k in self.s.switches
                                          if not ADAPTERS[split_key(k)[0]].veth_only])
            specs = self.without_jumbo(rtt, keys, [
                sp for rate in self.s.fixed_rates
                for sp in latency_for(rtt, self.s.latency_sizes, keys, (), rate,
                                      self.s.latency_trials)])
            if keys and specs:
                out.append((rtt, keys, specs))
        return out

    def check_vnf_arrangement(self, scn: Scenario) -> None:
        """Refuses process VNFs beside other pollers before anything starts (SharedCpuError),
        unless --allow-shared-cpu; the trials then mark their rows oversubscribed."""
        arrange.check([[arrange.Poller("sluice-gen", self.s.gen_cpu),
                        arrange.Poller("the switch's forwarding thread", self.s.switch_cpu),
                        *vnfs.planned_pollers(scn.vnf, scn.chain, self.s.vnf_cpu_list)]],
                      self.s.allow_shared_cpu)

    def without_jumbo(self, scn: Scenario, keys: Sequence[str], specs: list[TrialSpec]
                      ) -> list[TrialSpec]:
        """SPECS less the jumbo-frame trials (stats.is_jumbo) of switches that cannot carry
        them in SCN (Switch.jumbo_unsupported; VNF processes never do), each recorded as
        skipped with the reason. An alternating trial needs both its switches."""
        jumbo = sorted({sp.size for sp in specs if is_jumbo(sp.size)})
        if not jumbo:
            return specs
        cannot = set()
        for key in keys:
            name, mode = split_key(key)
            cls = ADAPTERS[name]
            why = (f"{scn.vnf} VNF processes take 2 KB buffers" if scn.process_vnfs else
                   cls(self._ctx(cls, "probe"), mode).jumbo_unsupported(scn.steer_as, scn.phy))
            if why is not None:
                cannot.add(key)
                self.skip(key, scn, f"{','.join(map(str, jumbo))} B frames: {why}")
        return [sp for sp in specs if not (is_jumbo(sp.size) and cannot & set(sp.switches))]

    def plan_unit(self, scn: Scenario, keys: list[str], sizes: tuple[int, ...]
                  ) -> tuple[Scenario, list[str], list[TrialSpec]]:
        """The trials of KEYS in SCN."""
        kernel = {k for k in keys if ADAPTERS[split_key(k)[0]].kernel}
        specs = trials_for(scn, sizes, keys, kernel, self.s.trials, self.s.baseline)
        anywhere = "*" in self.s.latency_scenarios
        if ("loads" in self.s.latency and (has_load_latency(scn) or anywhere)
                and (anywhere or scn.family in (self.s.latency_scenarios or (scn.family,)))):
            lat_sizes = [z for z in sizes if z in self.s.latency_sizes]
            specs += latency_for(scn, lat_sizes, keys, self.s.loads,
                                 trials=self.s.latency_trials)
        if self.s.fixed_any_scenario:
            specs += [sp for rate in self.s.fixed_rates
                      for sp in latency_for(scn, sizes, keys, (), rate, self.s.latency_trials)]
        if "echo" in self.s.latency and scn.family == "v2v" and scn.pairs == 1:
            specs += echo_for(scn, self.s.latency_sizes, keys, self.s.echo_bursts,
                              self.s.latency_trials)
        specs = self.without_jumbo(scn, keys, specs)
        return (scn, [k for k in keys if any(k in sp.switches for sp in specs)], specs)

    def total_seconds(self, plan: Sequence[tuple[Scenario, list[str], list[TrialSpec]]]) -> float:
        """Expected length of PLAN."""
        return sum(len(keys) * START_S
                   + sum(self.s.gen_seconds(sp.method) + GEN_OVERHEAD_S for sp in specs)
                   for _, keys, specs in plan)

    # -- switches -----------------------------------------------------------------------
    def _ctx(self, cls: type[Switch], sub: str) -> Context:
        work = self.work / sub
        work.mkdir(parents=True, exist_ok=True)
        # The instance's letters (a..z, then ba, bb, ...) make its tag unique in the run; a
        # probe (never started) gets a digit, which no instance has.
        suffix = sub.rsplit("-", 1)[1] if "-" in sub else "0"
        return Context(work=work, tag=f"{self.tag}{suffix}",
                       switch_cpu=self.s.switch_cpu,
                       ctl_cpu=self.s.gen_cpu, repo=self.s.repo,
                       extra={"gen_veth_driver": "af_xdp", **self.s.switch_options,
                              **({"burst": str(self.s.switch_burst)}
                                 if self.s.switch_burst else {}),
                              **({"mtu": str(JUMBO_MTU)} if self.jumbo_run else {})})

    def start_switches(self, scn: Scenario, keys: Sequence[str], live: Live) -> None:
        """Starts KEYS for SCN, each stopped right after it started; failures skipped."""
        for key in keys:
            name, mode = split_key(key)
            cls = ADAPTERS[name]
            sw = cls(self._ctx(cls, f"{name}-{mode}-{instance_name(next(self.instances))}"),
                     mode)
            try:
                ns = live.netns.create(f"{sw.ctx.tag}-sw") if live.netns else None
                topo = topology(scn, sw.ctx.work, sw.ctx.tag, ns, veth_vnfs=cls.veth_only)
                if live.netns:
                    live.netns.add_veths(topo)
                sw.start(topo)
                # Process VNFs attach while their switch runs: virtio-user negotiates with it.
                if scn.process_vnfs:
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
            self.note_exits(scn, live)
            live.signal(list(live.switches), signal.SIGCONT)
            for v in live.vnfs.values():
                v.stop()
            for sw in live.switches.values():
                sw.stop()
            if live.netns:
                live.netns.delete()
            self.keep_logs()

    def cleanup_work(self) -> None:
        """Removes the private work directory (run() does it itself)."""
        shutil.rmtree(self.work, ignore_errors=True)

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

    def echo_cmd(self, spec: TrialSpec, sw: Switch, out: Path, extra: Sequence[str]
                 ) -> list[str]:
        """The echo test: a ping client on the first port, a reflector on the second, one
        sluice-gen loop serving both (its two ends share one TSC)."""
        assert sw.topology is not None
        a, b = sw.topology.links[0], sw.topology.links[1]
        return [str(self.gen), "--cpu", str(self.s.gen_cpu), "--role", "ping", "--size",
                gen_size(spec.size), "--duration", str(self.s.latency_duration), "--json",
                "--out", str(out), "--warmup", str(self.s.warmup), "--burst",
                str(spec.burst), "--port", sw.gen_spec(a, raw=False),
                "--reflect", sw.gen_spec(b, raw=False),
                *extra]

    def gen_cmd(self, spec: TrialSpec, sws: Sequence[Switch], out: Path,
                netns: str | None, extra: Sequence[str] = ()) -> list[str]:
        """The sluice-gen command of one trial."""
        if spec.latency_kind == "echo":
            cmd = self.echo_cmd(spec, sws[0], out, extra)
            return ["ip", "netns", "exec", netns, *cmd] if netns else cmd
        cmd = [str(self.gen), "--cpu", str(self.s.gen_cpu), "--role", "txrx", "--size",
               gen_size(spec.size), "--duration", str(self.s.gen_seconds(spec.method)), "--json",
               "--out", str(out), *(extra or ("--rate", "max")), *self.s.gen_extra]
        if spec.scenario.direction == "bidir":
            cmd.append("--bidir")
        if spec.scenario.family == "fanout":
            cmd += ["--dst-mac", FANOUT_DST_MAC]
        cmd += self.ports_of(spec, sws)
        if spec.method == "alternating":
            cmd += ["--alternate", ",".join(str(sw.pids()[0]) for sw in sws),
                    "--window", str(self.s.window), "--settle", str(self.s.settle)]
        else:
            cmd += ["--warmup", str(self.s.warmup), "--cooldown", str(self.s.cooldown)]
        return ["ip", "netns", "exec", netns, *cmd] if netns else cmd

    @staticmethod
    def ports_of(spec: TrialSpec, sws: Sequence[Switch]) -> list[str]:
        """The switches' ports and VNFs for sluice-gen; --dst-mac in its stream order (every
        switch's forward streams, then with --bidir the reverse ones) where a chain is
        steered by MAC, and --announce when a switch learns."""
        kinds = () if spec.scenario.process_vnfs else spec.scenario.inline_kinds
        parts = [gen.port_args(sw, kinds) for sw in sws]
        cmd = [a for p in parts for a in p.args]
        dst = [d for p in parts for d in p.forward_dst]
        if spec.scenario.direction == "bidir":
            dst += [d for p in parts for d in p.reverse_dst]
        if any(d != "default" for d in dst):
            cmd += [a for d in dst for a in ("--dst-mac", d)]
        if any(sw.learns for sw in sws):
            cmd.append("--announce")
        return cmd

    def run_gen(self, spec: TrialSpec, sws: Sequence[Switch], live: Live,
                extra: Sequence[str] = ()) -> gen.GenResult:
        """One sluice-gen run; on veths an af_xdp failure is retried with af_packet."""
        out = self.work / f"{trial_name(spec)}.json"
        netns = live.netns.gen if live.netns else None
        cmd = self.gen_cmd(spec, sws, out, netns, extra)
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
        extra: list[str] = []
        lat: dict[str, Any] = {}
        before = {k: self.cpu_of(live.switches[k]) for k in keys}
        busy0 = procs.cpu_busy()
        t0 = time.monotonic()
        live.signal(keys, signal.SIGCONT)
        try:
            time.sleep(0.3)
            ports0 = hops.switch_counters(spec, live.switches, keys)
            # Cost per packet: each switch's own counters and its forwarding threads' CPU
            # time, read only while it runs (cost.py).
            sampler = cost.Sampler(dict(zip(keys, sws, strict=True)), self.s.switch_cpu,
                                   alternating=spec.method == "alternating",
                                   settle_s=self.s.settle, window_s=self.s.window)
            with self.monitor.running():
                if spec.method == "latency":
                    extra, lat = self.latency_args(spec, self.label_for_load(spec))
                with sampler:
                    res = self.run_gen(spec, sws, live, extra)
            # The generator continues both switches of an alternation at its end.
            ports1 = hops.switch_counters(spec, live.switches, keys)
        finally:
            # Stopped before its interrupt thread has handled the generator's disconnect, a
            # switch would handle it on SIGCONT while its forwarding thread may be mid-burst
            # (see sluice-gen's teardown_alternating).
            time.sleep(0.05)
            live.signal(keys, signal.SIGSTOP)
        wall = round(time.monotonic() - t0, 3)
        busy = {c: round(v - busy0.get(c, 0.0), 3) for c, v in procs.cpu_busy().items()}
        cpu = {k: _delta(self.cpu_of(live.switches[k]), before[k]) for k in keys}
        common = {"over": over, "busy": busy, "cpu": cpu, "res": res, "wall": wall,
                  "traces": sampler.traces,
                  "hops": hops.trial_hops(spec, keys, res.summary, ports0, ports1)}
        if spec.method == "alternating":
            return self.alternating_rows(spec, sws, keys, common)
        if spec.method == "latency":
            return [self.latency_row(spec, sws[0], keys[0], common, lat)]
        return self.interleaved_rows(spec, sws[0], keys[0], common)

    # -- latency ------------------------------------------------------------------------
    def rplus(self, key: str, scn: Scenario, size: int, label: str) -> tuple[float, str] | None:
        """R+ of KEY in SCN at SIZE from this run's throughput rows (mean of their received
        rates weighted by the samples each rests on) and the placement it came from: rows of
        placement LABEL when there are any (the rate changes by 1.4-2.6x with it), else all
        of them ('any'). None when none ran."""
        seen = [t for t in self.rplus_seen.get((key, scn, size), []) if t[1] > 0]
        same = [t for t in seen if t[2] == label]
        use, where = (same, label) if same else (seen, "any")
        total = sum(n for _, n, _ in use)
        return (sum(rx * n for rx, n, _ in use) / total, where) if total else None

    def current_label(self, wait_s: float = 1.0) -> str:
        """The placement the monitor (running) sees now, from its probes of the next
        WAIT_S seconds at most; 'unlabelled' without a monitor or a probe."""
        if not self.monitor.available:
            return "unlabelled"
        t0 = time.monotonic()
        while time.monotonic() - t0 < wait_s:
            time.sleep(0.2)
            lab = placement.label(self.monitor.probes(), t0, time.monotonic())
            if lab != "unlabelled":
                return lab
        return "unlabelled"

    def label_for_load(self, spec: TrialSpec) -> str:
        """The placement a latency trial starts in. At a fraction of R+ it waits (up to
        LOAD_PLACEMENT_WAIT_S) for a placement the switch's R+ was measured in: 0.99 of a
        near R+ run in far placement is overload, not a load of 0.99, and its round trips
        measure a full queue (seen here: 77 us against 8 us)."""
        now = self.current_label()
        if spec.load is None or now not in ("near", "far"):
            return now
        seen = {t[2] for t in self.rplus_seen.get(
            (spec.switches[0], spec.scenario, row_size(spec.size)), []) if t[1] > 0}
        if now in seen or not seen & {"near", "far"}:
            return now
        t0 = time.monotonic()
        while time.monotonic() - t0 < LOAD_PLACEMENT_WAIT_S:
            now = self.current_label(wait_s=0.6)
            if now in seen:
                break
        return now

    def latency_args(self, spec: TrialSpec, label: str) -> tuple[list[str], dict[str, Any]]:
        """sluice-gen's rate and histogram options of a latency trial starting in placement
        LABEL, and the row fields they imply; RuntimeError when a load has no R+ to be a
        fraction of."""
        scn = spec.scenario
        senders = scn.pairs * (2 if scn.direction == "bidir" else 1)
        rp, where = None, ""
        if spec.burst is not None:
            total = 1000.0        # the container study's R: 1000 packets per second
        elif spec.load is not None:
            found = self.rplus(spec.switches[0], scn, row_size(spec.size), label)
            if found is None:
                raise RuntimeError(f"no R+ of {spec.switches[0]} in {scn.label()} at "
                                   f"{gen_size(spec.size)} B to take {spec.load:g} of")
            rp, where = found
            total = spec.load * rp
        else:
            assert spec.rate_pps is not None
            total = spec.rate_pps
        if spec.burst is not None:
            senders = 1
        hist = self.s.out / "hist" / f"{trial_name(spec)}.json"
        hist.parent.mkdir(parents=True, exist_ok=True)
        args = ["--rate", f"{max(total / senders, 1.0):.0f}", "--hist-out", str(hist)]
        fields = {"latency_kind": spec.latency_kind, "latency_load": spec.load,
                  "asked_pps": round(total, 1), "rplus_pps": rp, "rplus_placement": where,
                  "hist": str(hist.relative_to(self.s.out)), "burst": spec.burst}
        return args, fields

    def latency_row(self, spec: TrialSpec, sw: Switch, key: str, common: dict[str, Any],
                    lat: dict[str, Any]) -> Row:
        """The row of a latency trial: one placement label over its counted seconds (the
        histogram cannot be split by second)."""
        res: gen.GenResult = common["res"]
        kept = trim(res.samples, self.s.warmup, 0.0, self.s.latency_duration)
        lab = (placement.label(self.monitor.probes(), kept[0].monotonic_s - 1.0,
                               kept[-1].monotonic_s) if kept else "unlabelled")
        costs = cost.interleaved(kept, [lab] * len(kept), common.get("traces", {}).get(key),
                                 res.summary.get("tsc_hz"))
        summ = res.summary
        tx, rx = int(summ.get("tx_packets", 0) or 0), int(summ.get("rx_packets", 0) or 0)
        if self.s.tags.get("sweep_param") == "rate":
            lat = {**lat, "sweep_value": (f"{spec.load:g}" if spec.load is not None
                                          else f"{spec.rate_pps:.0f}")}
        return self.base_row(
            spec, sw, key, common, placement=lab,
            rx_pps=statistics.fmean(s.rx_pps for s in kept) if kept else 0.0,
            tx_pps=statistics.fmean(s.tx_pps for s in kept) if kept else 0.0,
            loss=loss_fraction(tx, rx) if tx else 0.0,
            samples=len(kept), counted_s=float(len(kept)), cost=costs.get(lab, {}), **lat)

    @property
    def gen_flows(self) -> int:
        """sluice-gen's --flows in this run (the last one given wins, as in sluice-gen)."""
        extra = list(self.s.gen_extra)
        vals = [extra[i + 1] for i, a in enumerate(extra[:-1]) if a == "--flows"]
        return int(vals[-1]) if vals else 1

    @staticmethod
    def cpu_of(sw: Switch) -> float | None:
        """CPU seconds of SW's processes so far."""
        vals = [procs.cpu_seconds(p) for p in sw.pids()]
        return sum(v for v in vals if v is not None) if vals else None

    def base_row(self, spec: TrialSpec, sw: Switch, key: str, common: dict[str, Any],
                 **kw: Any) -> Row:
        """A row with the fields every method fills the same way."""
        res: gen.GenResult = common["res"]
        tags = {**self.s.tags, **kw_tags(kw)}
        own = (kw.get("cost") or {}).get("own_cpp") or []
        idle = float(res.summary.get("idle_fraction", 0.0))
        lat = {k: float(v) for k, v in (res.summary.get("latency_ns") or {}).items()
               if isinstance(v, int | float)}
        return Row(switch=sw.name, mode=sw.mode, key=key, scenario=spec.scenario.name,
                   phy=spec.scenario.phy, vnf=spec.scenario.vnf, size=row_size(spec.size),
                   size_label="imix" if spec.size == IMIX else "",
                   pairs=spec.scenario.pairs, **tags,
                   direction=spec.scenario.direction, trial=spec.trial,
                   method=spec.method, oversubscribed=common["over"],
                   generator_bound=idle < 0.01, kernel_path=spec.scenario.kernel_path,
                   gen_idle_fraction=idle, port_kind=sw.port_kind(), steering=sw.steering(),
                   switch_cpu_s=common["cpu"][key], gen_cpu_s=round(res.cpu_s, 3),
                   cpu_busy_s=common["busy"], wall_s=common["wall"], latency_ns=lat,
                   switch_cycles_per_packet=(round(statistics.median(own), 1) if own
                                             else None),
                   rules=sw.acl_rules, rule_masks=sw.acl_masks, flows=self.gen_flows,
                   hops=common.get("hops", {}).get(key, {}), **kw)

    def alternating_rows(self, spec: TrialSpec, sws: Sequence[Switch], keys: Sequence[str],
                         common: dict[str, Any]) -> list[Row]:
        """Rows of both switches of an alternation, per placement label."""
        res: gen.GenResult = common["res"]
        probes = self.monitor.probes()
        skip = math.ceil(self.s.warmup / self.s.window - 1e-9)
        kept = [w for w in res.windows if int(w["index"]) >= skip]
        ws = [Labelled(Window(int(w["index"]), w["switch"], float(w["rx_pps"]),
                              float(w["counted_s"])),
                       int(w["tx_packets"]), int(w["rx_packets"]),
                       placement.label(probes, float(w["start_monotonic_s"]) + self.s.settle,
                                       float(w["start_monotonic_s"]) + self.s.window))
              for w in kept]
        ratios = ratios_by_label(ws)
        costs = cost.alternating(
            [(lw.window.index, lw.window.switch, float(w["start_monotonic_s"]),
              lw.window.counted_s, lw.rx_packets, lw.label)
             for lw, w in zip(ws, kept, strict=True)],
            {side: common.get("traces", {}).get(k) for side, k in zip("AB", keys, strict=False)},
            self.s.settle, self.s.window, res.summary.get("tsc_hz"))
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
                    gen_order="first" if side == "A" else "second",
                    cost=costs.get((side, lab), {})))
        return rows

    def interleaved_rows(self, spec: TrialSpec, sw: Switch, key: str,
                         common: dict[str, Any]) -> list[Row]:
        """Rows of one switch's trial, per placement label of its one-second samples."""
        res: gen.GenResult = common["res"]
        probes = self.monitor.probes()
        kept = trim(res.samples, self.s.warmup, self.s.cooldown, self.s.duration)
        labels = [placement.label(probes, s.monotonic_s - 1.0, s.monotonic_s) for s in kept]
        costs = cost.interleaved(kept, labels, common.get("traces", {}).get(key),
                                 res.summary.get("tsc_hz"))
        groups: dict[str, list[Sample]] = defaultdict(list)
        for s, lab in zip(kept, labels, strict=True):
            groups[lab].append(s)
        rows = []
        for lab, samples in sorted(groups.items()):
            tx = sum(s.tx_pps for s in samples)
            rx = sum(s.rx_pps for s in samples)
            copies = max(spec.scenario.sinks, 1)   # a fan-out's frame should arrive N times
            rows.append(self.base_row(
                spec, sw, key, common, placement=lab, rx_pps=r_plus(samples),
                tx_pps=tx / len(samples), loss=loss_fraction(copies * tx, rx),
                rx_pps_median=sorted(s.rx_pps for s in samples)[len(samples) // 2],
                samples=len(samples), counted_s=float(len(samples)),
                cost=costs.get(lab, {}), **fanout_fields(spec.scenario, samples)))
        return rows

    # -- more trials until enough ran near ----------------------------------------------
    def near_trials(self, rows: Sequence[Row], key: str, size: int) -> int:
        """How many trials of KEY at SIZE gave near-placement figures (two samples or more:
        one window or second says little)."""
        return len({r.trial for r in rows if r.key == key and r.size == row_size(size)
                    and r.placement == "near" and r.samples >= 2})

    def wanting(self, rows: Sequence[Row], keys: Sequence[str],
                specs: Sequence[TrialSpec],
                given_up: frozenset[tuple[str, int]] = frozenset()
                ) -> tuple[TrialSpec, str] | None:
        """One more throughput trial for the (switch, size) furthest below --min-near, and
        that switch; None when every one has enough (or its extra trial failed: GIVEN_UP)."""
        short = []
        for sp in specs:
            for k in sp.switches:
                n = self.near_trials(rows, k, sp.size)
                if n < self.s.min_near and (k, sp.size) not in given_up:
                    short.append((n, sp.size, k, sp))
        if not short:
            return None
        _, size, key, sp = min(short, key=lambda t: t[:2])
        trial = 1 + max(s.trial for s in specs if s.size == size)
        if sp.method == "alternating":
            base = pick_baseline(keys, self.s.baseline)
            pair = (key, base) if key != base else sp.switches
            return TrialSpec(sp.scenario, size, trial, "alternating", pair), key
        return TrialSpec(sp.scenario, size, trial, "interleaved", (key,)), key

    def top_up(self, specs: list[TrialSpec], rows: list[Row], keys: Sequence[str],
               live: Live, allowance: float) -> list[Row]:
        """Runs extra trials while a (switch, size) lacks near trials and ALLOWANCE seconds
        last; records which (switch, size) ended with enough and which ran out of budget."""
        added: list[Row] = []
        given_up: set[tuple[str, int]] = set()
        deadline = time.monotonic() + allowance
        while True:
            want = self.wanting(rows + added, keys, specs, frozenset(given_up))
            if want is None:
                break
            nxt, key = want
            cost = self.s.gen_seconds(nxt.method) + GEN_OVERHEAD_S
            if time.monotonic() + cost > deadline:
                break
            self.grow(cost)
            specs.append(nxt)
            got = self.one(nxt, live)
            if not got:        # a failed trial is not retried: it would fail again
                given_up.add((key, nxt.size))
            added += got
        for key, size in sorted({(k, sp.size) for sp in specs for k in sp.switches}):
            n = self.near_trials(rows + added, key, size)
            self.near_report.append({
                "scenario": specs[0].scenario.label(), "switch": key, "size": row_size(size),
                "near_trials": n, "wanted": self.s.min_near,
                "trials": len({sp.trial for sp in specs if key in sp.switches
                               and sp.size == size}),
                "outcome": "enough" if n >= self.s.min_near else "budget ran out"})
        return added

    # -- the whole run ------------------------------------------------------------------
    def run(self) -> list[Row]:
        """Runs the plan; returns every row (also appended to results.jsonl as they come)."""
        self.s.out.mkdir(parents=True, exist_ok=True)
        all_rows: list[Row] = []
        # --budget is shared out: each scenario may spend its part of what is left on
        # extra trials, so an early scenario cannot take the time of the later ones.
        left = self.s.budget_s
        try:
            for i, (scn, keys, specs) in enumerate(self.plan_cache):
                with self.scenario(scn, keys) as live:
                    rows, spent = self.run_scenario(specs, keys, live,
                                                    left / (len(self.plan_cache) - i))
                    all_rows += rows
                    left = max(0.0, left - spent)
        finally:
            self.write_manifest()
            shutil.rmtree(self.work, ignore_errors=True)
        return all_rows

    def run_scenario(self, specs: Sequence[TrialSpec], keys: Sequence[str], live: Live,
                     allowance: float) -> tuple[list[Row], float]:
        """Throughput trials, the top-up to --min-near (at most ALLOWANCE seconds), then
        latency trials; the rows and the seconds the top-up took."""
        thru = [sp for sp in specs if sp.method != "latency"]
        rows: list[Row] = []
        for spec in thru:
            rows += self.one(spec, live)
        t0 = time.monotonic()
        if self.s.min_near > 0 and thru:
            rows += self.top_up(thru, rows, keys, live, allowance)
        spent = time.monotonic() - t0
        for spec in specs:
            if spec.method == "latency":
                rows += self.one(spec, live)
        return rows, spent

    def one(self, spec: TrialSpec, live: Live) -> list[Row]:
        """Runs SPEC if its switches started; a failed trial is recorded, not fatal."""
        what = (f"{spec.scenario.label()} {gen_size(spec.size)} B trial {spec.trial}: "
                + " vs ".join(spec.switches))
        if spec.latency_kind == "echo":
            what += f" echo, bursts of {spec.burst}"
        elif spec.method == "latency":
            what += (f" latency at {spec.load:g} R+" if spec.load is not None
                     else f" latency at {(spec.rate_pps or 0) / 1e6:g} Mpps")
        self.revive(spec, live)
        if any(k not in live.switches for k in spec.switches):
            self.progress(self.s.gen_seconds(spec.method) + GEN_OVERHEAD_S,
                          f"{what} (skipped)")
            return []
        try:
            rows = self.run_trial(spec, live)
        except arrange.SharedCpuError:
            raise
        except Exception as e:  # noqa: BLE001  one failed trial must not end the run
            dead = self.dead(spec.switches, live)
            self.skip("+".join(spec.switches), spec.scenario, f"trial failed: {e}"
                      + (f" ({', '.join(dead)} had exited)" if dead else ""))
            rows = []
        append_rows(self.results, rows)
        for r in rows:
            if r.method != "latency":
                self.rplus_seen[(r.key, spec.scenario, r.size)].append(
                    (r.rx_pps, r.samples, r.placement))
        self.progress(self.s.gen_seconds(spec.method) + GEN_OVERHEAD_S, what)
        return rows

    def dead(self, keys: Sequence[str], live: Live) -> list[str]:
        """Those of KEYS running in LIVE whose process (or a VNF process of theirs) ended."""
        return [k for k in keys
                if k in live.switches and any(procs.gone(p) for p in live.pids([k]))]

    def revive(self, spec: TrialSpec, live: Live) -> None:
        """Restarts the switches of SPEC whose process ended since their last trial (at most
        MAX_RESTARTS times per switch and scenario; then the rest of its trials are skipped).
        A peer's crash as its generator disconnects ends no trial early: DPDK 22.11's memif
        server can fault then (src/unmap_guard.c keeps sluiced from it; testpmd has no such
        guard), after the trial's figures are complete."""
        for k in self.dead(spec.switches, live):
            sw = live.switches.pop(k)
            how, log = self.record_exit(k, sw, spec.scenario, spec.trial)
            if k in live.vnfs:
                live.vnfs.pop(k).stop()
            sw.stop()
            n = self.restarts_of[(k, spec.scenario)] = self.restarts_of[(k, spec.scenario)] + 1
            if n > MAX_RESTARTS:
                self.skip(k, spec.scenario, f"its process {how} for the {n}th time; the rest "
                          f"of its trials there are skipped (log: {log})")
                continue
            self.say(f"{k} in {spec.scenario.label()}: its process {how} after its last "
                     f"trial (log: {log}); restarting it")
            self.start_switches(spec.scenario, [k], live)

    def record_exit(self, key: str, sw: Switch, scn: Scenario,
                    before_trial: int | None) -> tuple[str, str]:
        """Records in the manifest's restarts that KEY's process ended before trial
        BEFORE_TRIAL of SCN (None: after its last trial there, so it is not restarted);
        how it ended and where its log goes."""
        how = procs.exit_status(getattr(sw, "proc", None))
        log = f"{self.s.out / 'logs'}/{sw.ctx.work.name}-*.log"
        self.restarts.append({"switch": key, "scenario": scn.label(),
                              "before_trial": before_trial, "how": how, "log": log})
        return how, log

    def note_exits(self, scn: Scenario, live: Live) -> None:
        """Records the switches of SCN whose process ended after their last trial there
        (revive() sees only those that ended before another trial): a memif server's fault
        as the generator disconnects from the last trial is a crash like any other."""
        for k in self.dead(list(live.switches), live):
            how, log = self.record_exit(k, live.switches[k], scn, None)
            self.say(f"{k} in {scn.label()}: its process {how} after its last trial "
                     f"(log: {log})")

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
        m["restarts"] = self.restarts
        m["near_trials"] = self.near_report
        m["sluice_gen"] = str(self.gen)
        manifest.write(self.s.out / "manifest.json", m)


def instance_name(n: int) -> str:
    """Letters for the N-th switch instance of a run: a..z, then ba..zz (676 in all, far
    more than a run starts; the tags of interfaces leave room for two letters)."""
    if n >= 26 * 26:
        raise ValueError(f"more than {26 * 26} switch instances in one run")
    hi, lo = divmod(n, 26)
    return (chr(ord("a") + hi) if hi else "") + chr(ord("a") + lo)


def fanout_fields(scn: Scenario, samples: Sequence[Sample]) -> dict[str, Any]:
    """A fan-out row's own fields from its SAMPLES: the destinations, the share of the
    copies that arrived, each sink's mean rate ({} outside fanout)."""
    if scn.family != "fanout" or not samples:
        return {}
    tx = sum(s.tx_pps for s in samples)
    rx = sum(s.rx_pps for s in samples)
    per = [s.sink_rx_pps for s in samples if len(s.sink_rx_pps) == scn.sinks]
    return {"fanout": scn.sinks,
            "delivered_fraction": min(1.0, rx / (scn.sinks * tx)) if tx > 0 else 0.0,
            "sink_rx_pps": ([round(statistics.fmean(col), 1) for col in zip(*per, strict=True)]
                            if per else [])}


def kw_tags(kw: dict[str, Any]) -> dict[str, Any]:
    """Sweep tags a caller of base_row set itself (popped from KW, they win)."""
    return {k: kw.pop(k) for k in ("sweep_param", "sweep_value") if k in kw}


def trial_name(spec: TrialSpec) -> str:
    """A file-name-safe name of one trial."""
    scn = spec.scenario
    parts = [scn.name + ("-rtt" if scn.rtt else ""), scn.phy, scn.direction,
             f"{scn.pairs}p" if scn.pairs > 1 else "", gen_size(spec.size), f"t{spec.trial}",
             *spec.switches]
    if spec.load is not None:
        parts.append(f"load{spec.load:g}")
    if spec.rate_pps is not None:
        parts.append(f"rate{spec.rate_pps:.0f}")
    if spec.burst is not None:
        parts.append(f"echo{spec.burst}")
    return "gen-" + "-".join(p for p in parts if p).replace(":", "_").replace("#", "_")


def _delta(now: float | None, before: float | None) -> float | None:
    return None if now is None or before is None else round(now - before, 3)
