"""NDR and PDR with MLRsearch (FD.io CSIT's search, PyPI `MLRsearch`), trials by sluice-gen.

NDR is the highest offered rate with no loss, PDR with at most 0.5 % loss. Every trial is
an open-loop sluice-gen run (`--load open --rate R`: what the switch's port refuses counts
as loss, as RFC 2544 and the OVS-DPDK paper count it), so loss = offered - received. The
generator's pacing tries about 0.2 % fewer frames than rate x seconds (its schedule runs in
bursts); short by more than GEN_TOLERANCE, it is offered the asked count instead, so the
frames it could not even try count as loss: otherwise a search would credit a switch with a
rate that was never offered. A bound where that happened is marked generator-bound.

Rates on these machines flip by 1.4-2.6x with the vCPU placement, and a search whose trials
mix placements finds a bound of neither. So a search keeps to one placement, and the
placement may change under it. A search runs in the placement the monitor sees when it
starts; before every trial it waits (up to `wait_s`) until the monitor sees that placement
again, and a trial that ran in another all the same is repeated (up to `retries` times). When
the placement does not come back, the search starts again in the placement of the moment.
The trials each placement kept are replayed to its later searches (MLRsearch chooses its
next load from the results so far alone, so it asks for the same loads again): no trial is
wasted, and searches in both placements advance. The first search to end gives the result
and says which placement it rests on; only the budget running out stops the whole
(`placement_unstable` when the last try ended that way).

Zero loss also needs rings that outlast the host's stalls of a vCPU (milliseconds here): a
trial's generator runs with `--ring` (16384 slots, memif rings and virtqueues too) unless
told otherwise, and the rows say so (`gen_ring`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

GOALS = (("pdr", 0.005), ("ndr", 0.0))
GEN_TOLERANCE = 0.005   # a generator that tries this much less than asked is short of it


@dataclass(frozen=True)
class TrialOutcome:
    """One open-loop trial: frames offered (loss is counted against them) and received,
    and its placement; ASKED (rate x seconds x senders, 0: unknown) and what the generator
    TRIED tell a generator that fell short from a switch that lost."""

    offered: int
    received: int
    placement: str
    seconds: float
    tried: int = 0
    asked: int = 0

    @property
    def generator_short(self) -> bool:
        """Whether the generator tried less than it was asked, beyond its pacing's grain."""
        return self.tried < (1 - GEN_TOLERANCE) * self.asked

    @classmethod
    def of(cls, asked: int, tried: int, received: int, placement: str,
           seconds: float) -> TrialOutcome:
        """A trial's outcome; offered is what was tried unless the generator was short."""
        out = cls(tried, received, placement, seconds, tried, asked)
        return replace(out, offered=asked) if out.generator_short else out


@dataclass
class SearchLog:
    """The trials of a search: kept (its placement's, replayed ones included), repeated (run
    in another placement), the seconds it waited for its placement, and how many times it
    was started (once, and again after each placement change)."""

    kept: list[tuple[float, float, TrialOutcome]] = field(default_factory=list)
    repeated: list[tuple[float, float, TrialOutcome]] = field(default_factory=list)
    placement: str = ""
    waited_s: float = 0.0
    starts: int = 0
    ran: int = 0                  # trials run; the rest of `kept` were replayed


AwaitPlacement = Callable[[str], tuple[float, bool]]
"""Waits until the monitor sees the given placement: seconds waited and whether it came."""

CurrentPlacement = Callable[[], str]
"""The placement the monitor sees now ('unlabelled' when it cannot tell)."""


class PlacementUnstable(RuntimeError):
    """The placement changed and did not come back within the retries or the wait."""


class Replay:
    """Trials per placement, by (duration, load) in the order they ran, so a search started
    again in a placement gets the results earlier searches had there. A trial that ran in
    another placement than its search's is kept for that placement."""

    def __init__(self) -> None:
        self.kept: dict[str, dict[tuple[float, float], list[TrialOutcome]]] = {}
        self.used: dict[tuple[str, tuple[float, float]], int] = {}

    def restart(self) -> None:
        """A new search: every kept trial may be handed out again."""
        self.used = {}

    def take(self, placement: str, key: tuple[float, float]) -> TrialOutcome | None:
        """The next kept outcome of KEY in PLACEMENT this search has not had, or None."""
        got = self.kept.get(placement, {}).get(key, [])
        n = self.used.get((placement, key), 0)
        if n >= len(got):
            return None
        self.used[(placement, key)] = n + 1
        return got[n]

    def add(self, key: tuple[float, float], out: TrialOutcome, taken: bool) -> None:
        """A trial that ran, kept under its placement; TAKEN: this search uses it now."""
        if out.placement not in ("near", "far"):
            return
        self.kept.setdefault(out.placement, {}).setdefault(key, []).append(out)
        if taken:
            self.used[(out.placement, key)] = self.used.get((out.placement, key), 0) + 1


def measurer_class() -> type:
    """The AbstractMeasurer subclass (imported late: MLRsearch is optional)."""
    from MLRsearch import AbstractMeasurer, MeasurementResult

    class GenMeasurer(AbstractMeasurer):  # type: ignore[misc]
        """Runs TRIAL(duration, per-port load) in one placement, replaying kept trials."""

        def __init__(self, trial: Callable[[float, float], TrialOutcome], log: SearchLog,
                     replay: Replay, retries: int = 3,
                     await_placement: AwaitPlacement | None = None) -> None:
            self.trial = trial
            self.log = log
            self.replay = replay
            self.retries = retries
            self.await_placement = await_placement

        def run_in_placement(self, duration: float, load: float) -> TrialOutcome:
            """One trial in the search's placement (the first trial fixes it if unset)."""
            for _ in range(self.retries + 1):
                if self.log.placement and self.await_placement is not None:
                    waited, came = self.await_placement(self.log.placement)
                    self.log.waited_s += waited
                    if not came:
                        raise PlacementUnstable(f"{self.log.placement} did not come back "
                                                f"in {waited:.0f} s")
                out = self.trial(duration, load)
                self.log.ran += 1
                mine = not self.log.placement or out.placement == self.log.placement
                self.replay.add((duration, load), out, taken=mine)
                if mine:
                    # Only a clear label fixes the search's placement (not 'mixed', nor
                    # 'unlabelled' without a monitor, where every trial is the search's).
                    if not self.log.placement and out.placement in ("near", "far"):
                        self.log.placement = out.placement
                    return out
                self.log.repeated.append((duration, load, out))
            raise PlacementUnstable(f"{self.retries + 1} trials in a row ran {out.placement}, "
                                    f"the search rests on {self.log.placement}")

        def measure(self, intended_duration: float, intended_load: float) -> Any:
            key = (intended_duration, intended_load)
            out = self.replay.take(self.log.placement, key) if self.log.placement else None
            if out is None:
                out = self.run_in_placement(intended_duration, intended_load)
            self.log.kept.append((intended_duration, intended_load, out))
            return MeasurementResult(
                intended_duration=intended_duration, intended_load=intended_load,
                offered_count=out.offered, forwarding_count=min(out.received, out.offered),
                duration_with_overheads=out.seconds)

    return GenMeasurer


@dataclass(frozen=True)
class Bound:
    """One goal's result: the conditional throughput (per port) and its relevant bounds."""

    goal: str
    loss_ratio: float
    throughput_pps: float | None
    lower_pps: float | None
    upper_pps: float | None


def generator_bound(log: SearchLog, bound: Bound) -> bool:
    """Whether the generator fell short in a kept trial at the load of BOUND's upper bound
    (where the goal failed): the bound is then the generator's, not the switch's."""
    if bound.upper_pps is None:
        return False
    return any(out.generator_short for _, load, out in log.kept
               if abs(load - bound.upper_pps) <= 1e-3 * bound.upper_pps)


def search(trial: Callable[[float, float], TrialOutcome], max_load: float,
           min_load: float = 10_000.0, trial_s: float = 1.0, duration_sum: float = 3.0,
           width: float = 0.02, budget_s: float = 300.0, retries: int = 3,
           await_placement: AwaitPlacement | None = None,
           current_placement: CurrentPlacement | None = None,
           log: SearchLog | None = None) -> tuple[list[Bound], SearchLog]:
    """NDR and PDR of the path TRIAL measures; loads per sending port, up to MAX_LOAD.

    Short trials (TRIAL_S) summing to DURATION_SUM seconds per bound, to a relative WIDTH:
    coarser than CSIT's defaults (1 s trials summing to 21 s, 0.5 %), since every trial
    here starts a generator and the placement drifts within minutes. A search that loses
    its placement starts again in the current one (module docstring) until BUDGET_S runs
    out. LOG (new if None) ends as the last search's, also when this raises."""
    import time

    from MLRsearch import Config, MultipleLossRatioSearch, SearchGoal

    goals = {name: SearchGoal(loss_ratio=ratio, exceed_ratio=0.5, relative_width=width,
                              initial_trial_duration=trial_s, final_trial_duration=trial_s,
                              duration_sum=duration_sum, preceding_targets=2,
                              expansion_coefficient=2, fail_fast=False)
             for name, ratio in GOALS}
    log = log if log is not None else SearchLog()
    replay = Replay()
    stop = time.monotonic() + budget_s
    while True:
        config = Config()
        config.goals = list(goals.values())
        config.max_load = max_load
        config.min_load = min(min_load, max_load / 2)
        config.search_duration_max = max(1.0, stop - time.monotonic())
        config.warmup_duration = None
        now = current_placement() if current_placement is not None else ""
        log.placement = now if now in ("near", "far") else ""
        log.kept, log.starts = [], log.starts + 1
        replay.restart()
        try:
            result = MultipleLossRatioSearch(config=config).search(
                measurer=measurer_class()(trial, log, replay, retries, await_placement),
                debug=lambda _msg: None)
            break
        except PlacementUnstable:
            if time.monotonic() >= stop:
                raise
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
    most WAIT_S seconds (a placement lasts 1 to 20 s here, PLATFORM.md). Without a monitor
    every placement reads 'unlabelled' and nothing waits."""
    import time

    def wait(want: str) -> tuple[float, bool]:
        t0 = time.monotonic()
        while time.monotonic() - t0 < wait_s:
            if runner.current_label(wait_s=0.6) in (want, "unlabelled"):
                return time.monotonic() - t0, True
        return time.monotonic() - t0, False
    return wait


def trial_runner(runner: Any, live: Any, scn: Any, key: str, size: int,
                 counter: list[int], ring: int = 0) -> Callable[[float, float], TrialOutcome]:
    """A TRIAL function for search(): one open-loop sluice-gen run of KEY at a load, its
    rings RING slots long (0: sluice-gen's own sizes)."""
    import signal
    import time

    from sluice.bench.plan import TrialSpec

    ring_args = ["--ring", str(ring)] if ring else []

    def trial(duration: float, load: float) -> TrialOutcome:
        counter[0] += 1
        spec = TrialSpec(scn, size, counter[0], "interleaved", (key,))
        if runner.dead([key], live):
            # testpmd's memif server can fault as a generator disconnects (runner.revive):
            # restarted, recorded in the manifest, and the search goes on.
            runner.revive(spec, live)
            if key not in live.switches:
                raise RuntimeError(f"{key} ended and was not restarted")
            live.signal([key], signal.SIGCONT)
            time.sleep(0.3)
        res = runner.run_gen(spec, [live.switches[key]], live,
                             ["--rate", f"{load:.0f}", "--load", "open", *ring_args])
        s = res.summary
        seconds = float(s.get("duration_s", duration))
        tried = int(s.get("tx_packets", 0)) + int(s.get("not_accepted", 0) or 0)
        asked = round(load * seconds * max(1, len(s.get("streams") or [])))
        return TrialOutcome.of(asked, tried, int(s.get("rx_packets", 0)),
                               _placement_of(runner, res), seconds)
    return trial


def run(runner: Any, max_load: float, opts: dict[str, float], ring: int = 0,
        placement_wait_s: float = 8.0) -> list[Any]:
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
                                    await_placement=placement_waiter(runner, placement_wait_s),
                                    current_placement=runner.current_label)
                            outcome = "found"
                        except PlacementUnstable as e:
                            outcome = f"placement_unstable: {e}"
                        except Exception as e:  # noqa: BLE001  a failed search is recorded
                            outcome = f"failed: {e}"
                        finally:
                            live.signal([key], signal.SIGSTOP)
                        runner.progress(time.monotonic() - t0,
                                        f"{scn.label()} {size} B {key}: NDR/PDR {outcome} "
                                        f"in {log.placement or 'no placement'} ({log.ran} "
                                        f"trials run, {len(log.kept)} in the result, "
                                        f"{len(log.repeated)} in another placement, "
                                        f"{log.starts} start(s), {log.waited_s:.0f} s "
                                        f"waiting)")
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
