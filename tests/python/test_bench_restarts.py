"""sluice-bench: a switch whose process ends between trials is restarted and recorded, and
one that ends after its last trial in a scenario is recorded too (issue 17, part 5: DPDK
22.11's memif server can fault as the generator disconnects)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bench import report
from sluice.bench.arrange import Poller
from sluice.bench.plan import TrialSpec
from sluice.bench.runner import Live, Runner, Settings
from sluice.bench.scenarios import Scenario, parse
from sluice.bench.switches.base import Context, Switch, Topology


class Crashing(Switch):
    """A stand-in switch whose process died of SIGSEGV (a real process, really ended)."""

    name = "crash"
    modes = ("x",)

    def __init__(self, ctx: Context, mode: str, fault: bool) -> None:
        super().__init__(ctx, mode)
        script = "kill -SEGV $$" if fault else "sleep 60"
        self.proc = subprocess.Popen(["sh", "-c", script])
        if fault:
            self.proc.wait(10)
        self.stopped = False

    @classmethod
    def available(cls, repo: Path) -> str | None:
        return None

    def start(self, topo: Topology) -> None:
        self.topology = topo

    def version(self) -> str:
        return "crash 0"

    def pids(self) -> list[int]:
        return [self.proc.pid]

    def pollers(self) -> list[Poller]:
        return []

    def steering(self) -> str:
        return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.stopped = True


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    s = Settings(units=(), switches=("a:x", "b:x"), trials=2, duration=4.0, window=1.0,
                 settle=0.3, warmup=1.0, cooldown=0.0, switch_cpu=1, gen_cpu=0,
                 allow_shared_cpu=False, baseline="b", out=tmp_path, repo=tmp_path)
    r = Runner(s, lambda *_: None, lambda _m: None)
    yield r
    r.cleanup_work()


def crashing(tmp_path: Path, sub: str, fault: bool) -> Crashing:
    work = tmp_path / sub
    work.mkdir()
    return Crashing(Context(work=work, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path), "x",
                    fault)


def test_a_switch_that_died_between_trials_is_restarted_and_recorded(
        runner: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[Scenario, list[str]]] = []
    monkeypatch.setattr(runner, "start_switches",
                        lambda scn, keys, live: started.append((scn, list(keys))))
    dead, alive = crashing(tmp_path, "dead", True), crashing(tmp_path, "alive", False)
    live = Live(switches={"a:x": dead, "b:x": alive})
    scn = parse("p2p", "memif", "uni")
    try:
        runner.revive(TrialSpec(scn, 64, 1, "alternating", ("a:x", "b:x")), live)
    finally:
        alive.stop()
    assert started == [(scn, ["a:x"])] and dead.stopped
    assert runner.restarts == [{"switch": "a:x", "scenario": "p2p/memif uni", "before_trial": 1,
                                "how": "was killed by SIGSEGV",
                                "log": f"{tmp_path}/logs/dead-*.log"}]


def test_a_switch_that_died_after_its_last_trial_is_recorded_not_restarted(
        runner: Runner, tmp_path: Path) -> None:
    scn = parse("loopback-1", "memif", "uni")
    dead = crashing(tmp_path, "dead", True)
    runner.note_exits(scn, Live(switches={"a:x": dead}))
    assert runner.restarts[0]["before_trial"] is None
    assert runner.restarts[0]["how"] == "was killed by SIGSEGV"
    secs = report.sections([], {"restarts": runner.restarts}, {})
    restarted = next(s for s in secs if s[0] == "Restarted switches")
    assert restarted[3] == [["a:x", "loopback-1/memif uni",
                             "none (after the last; not restarted)", "was killed by SIGSEGV",
                             f"{tmp_path}/logs/dead-*.log"]]
