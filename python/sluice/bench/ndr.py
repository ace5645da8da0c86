"""NDR and PDR with MLRsearch (FD.io CSIT's search, PyPI `MLRsearch`), trials by sluice-gen.

NDR is the highest offered rate with no loss, PDR with at most 0.5 % loss. Every trial is
an open-loop sluice-gen run (`--load open --rate R`: what the switch's port refuses counts
as loss, as RFC 2544 and the OVS-DPDK paper count it), so loss = asked - received: frames
the generator could not even try count too, or a search would credit a switch with a rate
that was never offered. A bound where the generator fell short is marked generator-bound.

Rates on these machines flip by 1.4-2.6x with the vCPU placement, and a search whose trials
mix placements finds a bound of neither. So a search keeps to one placement: the first
trial's label becomes the search's; before every later trial the search waits (up to
`wait_s`) until the monitor sees that placement again, a trial labelled otherwise all the
same is repeated (up to `retries` times), and when the placement will not come back the
search stops as `placement_unstable`. The result says which placement it rests on.

Zero loss also needs rings that outlast the host's stalls of a vCPU (milliseconds here): a
trial's generator runs with `--ring` (16384 slots for memif, 8192 for virtio-user) unless
told otherwise, and the rows say so (`gen_ring`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

GOALS = (("pdr", 0.005), ("ndr", 0.0))


@dataclass(frozen=True)
class TrialOutcome:
    """One open-loop trial: frames offered (asked of the generator) and received, and its
    placement; TRIED (what the generator managed to try, 0: as offered) tells a generator
    that fell short from a switch that lost."""

    offered: int
    received: int
    placement: str
    seconds: float
    tried: int = 0

    @property
    def generator_short(self) -> bool:
        """Whether the generator tried less than 99.5 % of what it was asked."""
        return bool(self.tried) and self.tried < 0.995 * self.offered


@dataclass
class SearchLog:
    """Every trial a search ran, kept ones and repeated ones."""

    kept: list[tuple[float, float, TrialOutcome]] = field(default_factory=list)
    repeated: list[tuple[float, float, TrialOutcome]] = field(default_factory=list)
    placement: str = ""
    waited_s: float = 0.0


AwaitPlacement = Callable[[str], float]
"""Waits until the monitor sees the given placement (or gives up); returns seconds waited."""


class PlacementUnstable(RuntimeError):
    """The placement changed and did not come back within the retries."""


def measurer_class() -> type:
    """The AbstractMeasurer subclass (imported late: MLRsearch is optional)."""
    from MLRsearch import AbstractMeasurer, MeasurementResult

    class GenMeasurer(AbstractMeasurer):  # type: ignore[misc]
        """Runs TRIAL(duration, per-port load) and keeps to one placement label."""

        def __init__(self, trial: Callable[[float, float], TrialOutcome], log: SearchLog,
                     retries: int = 3, await_placement: AwaitPlacement | None = None) -> None:
            self.trial = trial
            self.log = log
            self.retries = retries
            self.await_placement = await_placement

        def measure(self, intended_duration: float, intended_load: float) -> Any:
            for _ in range(self.retries + 1):
                if self.log.placement and self.await_placement is not None:
                    self.log.waited_s += self.await_placement(self.log.placement)
                out = self.trial(intended_duration, intended_load)
                if not self.log.placement or out.placement == self.log.placement:
                    break
                self.log.repeated.append((intended_duration, intended_load, out))
            else:
                raise PlacementUnstable(
                    f"{self.retries + 1} trials in a row ran {out.placement}, the search "
                    f"rests on {self.log.placement}")
            self.log.placement = self.log.placement or out.placement
            self.log.kept.append((intended_duration, intended_load, out))
            return MeasurementResult(
                intended_duration=intended_duration, intended_load=intended_load,
                offered_count=out.offered, forwarding_count=min(out.received, out.offered),
                duration_with_overheads=out.seconds)

    return GenMeasurer


def generator_bound(log: SearchLog, bound: Bound) -> bool:
    """Whether the generator fell short in a kept trial at the load of BOUND's upper bound
    (where the goal failed): the bound is then the generator's, not the switch's."""
    if bound.upper_pps is None:
        return False
    return any(out.generator_short for _, load, out in log.kept
               if abs(load - bound.upper_pps) <= 1e-3 * bound.upper_pps)


@dataclass(frozen=True)
class Bound:
    """One goal's result: the conditional throughput (per port) and its relevant bounds."""

    goal: str
    loss_ratio: float
    throughput_pps: float | None
    lower_pps: float | None
    upper_pps: float | None


def search(trial: Callable[[float, float], TrialOutcome], max_load: float,
           min_load: float = 10_000.0, trial_s: float = 1.0, duration_sum: float = 3.0,
           width: float = 0.02, budget_s: float = 300.0, retries: int = 3,
           await_placement: AwaitPlacement | None = None,
           log: SearchLog | None = None) -> tuple[list[Bound], SearchLog]:
    """NDR and PDR of the path TRIAL measures; loads per sending port, up to MAX_LOAD.

    Short trials (TRIAL_S) summing to DURATION_SUM seconds per bound, to a relative WIDTH:
    coarser than CSIT's defaults (1 s trials summing to 21 s, 0.5 %), since every trial
    here starts a generator and the placement drifts within minutes. LOG (new if None)
    gathers the trials, also when the search raises."""
    from MLRsearch import Config, MultipleLossRatioSearch, SearchGoal

    goals = {name: SearchGoal(loss_ratio=ratio, exceed_ratio=0.5, relative_width=width,
                              initial_trial_duration=trial_s, final_trial_duration=trial_s,
                              duration_sum=duration_sum, preceding_targets=2,
                              expansion_coefficient=2, fail_fast=False)
             for name, ratio in GOALS}
    config = Config()
    config.goals = list(goals.values())
    config.max_load = max_load
    config.min_load = min(min_load, max_load / 2)
    config.search_duration_max = budget_s
    config.warmup_duration = None
    log = log if log is not None else SearchLog()
    result = MultipleLossRatioSearch(config=config).search(
        measurer=measurer_class()(trial, log, retries, await_placement),
        debug=lambda _msg: None)
    bounds = []
    for name, goal in goals.items():
        r = result[goal]
        ct = r.conditional_throughput
        bounds.append(Bound(
            name, goal.loss_ratio, float(ct) if ct is not None else None,
            float(r.relevant_lower_bound) if r.relevant_lower_bound else None,
            float(r.relevant_upper_bound) if r.relevant_upper_bound else None))
    return bounds, log


def _placement_of(runner: Any, res: Any) -> str:
    """The label of a trial's sending seconds (its per-second samples), or 'unlabelled'."""
    from sluice.bench import placement
    if not res.samples:
        return "unlabelled"
    return placement.label(runner.monitor.probes(), res.samples[0].monotonic_s - 1.0,
                           res.samples[-1].monotonic_s)


def placement_waiter(runner: Any, wait_s: float) -> AwaitPlacement:
    """An AwaitPlacement on RUNNER's monitor: polls its label until it reads WANT, for at
    most WAIT_S seconds (a placement lasts 1 to 20 s here, PLATFORM.md)."""
    import time

    def wait(want: str) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < wait_s:
            if runner.current_label(wait_s=0.6) in (want, "unlabelled"):
                break
        return time.monotonic() - t0
    return wait


def trial_runner(runner: Any, live: Any, scn: Any, key: str, size: int,
                 counter: list[int], ring: int = 0) -> Callable[[float, float], TrialOutcome]:
    """A TRIAL function for search(): one open-loop sluice-gen run of KEY at a load, its
    rings RING slots long (0: sluice-gen's own sizes)."""
    from sluice.bench.plan import TrialSpec

    ring_args = ["--ring", str(ring)] if ring else []

    def trial(duration: float, load: float) -> TrialOutcome:
        counter[0] += 1
        spec = TrialSpec(scn, size, counter[0], "interleaved", (key,))
        res = runner.run_gen(spec, [live.switches[key]], live,
                             ["--rate", f"{load:.0f}", "--load", "open", *ring_args])
        s = res.summary
        seconds = float(s.get("duration_s", duration))
        tried = int(s.get("tx_packets", 0)) + int(s.get("not_accepted", 0) or 0)
        asked = round(load * seconds * max(1, len(s.get("streams") or [])))
        return TrialOutcome(max(asked, tried), int(s.get("rx_packets", 0)),
                            _placement_of(runner, res), seconds, tried)
    return trial


def run(runner: Any, max_load: float, opts: dict[str, float], ring: int = 0,
        placement_wait_s: float = 20.0) -> list[Any]:
    """NDR and PDR of every switch, scenario and size of RUNNER's settings; rows appended
    to its results.jsonl as each search ends. RING: the generator's --ring (0: its own
    sizes); PLACEMENT_WAIT_S: how long a trial waits for the search's placement."""
    import signal
    import time

    from sluice.bench.schema import Row, append_rows
    from sluice.bench.stats import row_size

    rows: list[Row] = []
    runner.s.out.mkdir(parents=True, exist_ok=True)
    try:
        for scn, keys, specs in runner.plan_cache:
            sizes = sorted({sp.size for sp in specs})
            with runner.scenario(scn, keys) as live:
                for key in keys:
                    if key not in live.switches:
                        continue
                    sw = live.switches[key]
                    for size in sizes:
                        counter = [0]
                        log = SearchLog()
                        bounds: list[Bound] = []
                        live.signal([key], signal.SIGCONT)
                        t0 = time.monotonic()
                        try:
                            time.sleep(0.3)
                            with runner.monitor.running():
                                bounds, log = search(
                                    trial_runner(runner, live, scn, key, size, counter, ring),
                                    max_load, **opts, log=log,
                                    await_placement=placement_waiter(runner, placement_wait_s))
                            outcome = "found"
                        except PlacementUnstable as e:
                            outcome = f"placement_unstable: {e}"
                        except Exception as e:  # noqa: BLE001  a failed search is recorded
                            outcome = f"failed: {e}"
                        finally:
                            live.signal([key], signal.SIGSTOP)
                        runner.progress(time.monotonic() - t0,
                                        f"{scn.label()} {size} B {key}: NDR/PDR {outcome} "
                                        f"({len(log.kept)} trials kept, {len(log.repeated)} "
                                        f"repeated, {log.waited_s:.0f} s waiting for "
                                        f"{log.placement or 'a placement'})")
                        if outcome != "found":
                            runner.skip(key, scn, f"NDR/PDR at {size} B: {outcome}")
                        senders = scn.pairs * (2 if scn.direction == "bidir" else 1)
                        new = [Row(
                            switch=sw.name, mode=sw.mode, key=key, scenario=scn.name,
                            phy=scn.phy, vnf=scn.vnf, size=row_size(size),
                            direction=scn.direction, trial=0,
                            placement=log.placement or "unlabelled", method="search",
                            rx_pps=(b.throughput_pps or 0.0) * senders,
                            tx_pps=(b.throughput_pps or 0.0) * senders, loss=b.loss_ratio,
                            oversubscribed=False, generator_bound=generator_bound(log, b),
                            kernel_path=scn.kernel_path, port_kind=sw.port_kind(),
                            steering=sw.steering(), pairs=scn.pairs, search_goal=b.goal,
                            search_lower_pps=(b.lower_pps or 0.0) * senders,
                            search_upper_pps=(b.upper_pps or 0.0) * senders,
                            search_trials=len(log.kept), search_repeated=len(log.repeated),
                            samples=len(log.kept), gen_ring=ring or None,
                            counted_s=sum(o.seconds for _, _, o in log.kept))
                            for b in bounds]
                        append_rows(runner.results, new)
                        rows += new
    finally:
        runner.write_manifest()
        runner.cleanup_work()
    return rows
