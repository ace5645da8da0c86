"""sluice-bench idle: the +idle variant of the sluice switch, CPU time from /proc stat
fields, and the report's 'Idle CPU and idle-sleep latency' section."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from sluice.bench import cli, idle, report, report_idle
from sluice.bench.runner import Settings
from sluice.bench.schema import Row, append_rows
from sluice.bench.switches import Context
from sluice.bench.switches.sluice import Sluice


def ctx(tmp_path: Path) -> Context:
    return Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path)


def test_idle_variant_runs_only_when_named() -> None:
    assert cli.switch_keys("sluice") == ("sluice:patch", "sluice:learn", "sluice:flow",
                                         "sluice:flow-normal")
    assert cli.switch_keys("sluice:patch+idle,sluice:patch") == ("sluice:patch+idle",
                                                                 "sluice:patch")
    with pytest.raises(argparse.ArgumentTypeError):
        cli.switch_keys("testpmd:io+idle")


def test_idle_variant_keeps_the_default_sleep_and_the_forwarding_mode(tmp_path: Path) -> None:
    busy, idle = Sluice(ctx(tmp_path), "patch"), Sluice(ctx(tmp_path), "patch+idle")
    assert (busy.fwd_mode, busy.idle_sleep) == ("patch", False)
    assert (idle.fwd_mode, idle.idle_sleep) == ("patch", True)
    assert "busy-polls" in busy.steering() and "sleeps when idle" in idle.steering()
    learn = Sluice(ctx(tmp_path), "learn+idle")
    assert learn.learns and learn.fwd_mode == "learn"


# A /proc/PID/stat line whose name holds a space and a parenthesis: utime 250, stime 50.
STAT = ("4242 (lcore-worker) 1) S 1 4242 4242 0 -1 4194368 900 0 0 0 250 50 0 0 20 0 3 0 "
        "1000 123456 789 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0")


def test_stat_ticks_read_utime_and_stime_after_the_last_parenthesis() -> None:
    assert idle.stat_ticks(STAT) == ("lcore-worker) 1", 300)
    with pytest.raises(ValueError):
        idle.stat_ticks("no parentheses here 1 2 3")
    with pytest.raises(ValueError):
        idle.stat_ticks("1 (short) S 1 2")


def fake_proc(root: Path, pid: int, threads: dict[int, tuple[str, int, int]]) -> None:
    """/proc/PID/stat (the sum of THREADS) and /proc/PID/task/TID/stat under ROOT."""
    def line(tid: int, name: str, ut: int, st: int) -> str:
        return f"{tid} ({name}) S 1 1 1 0 -1 0 0 0 0 0 {ut} {st} 0 0 20 0 1 0 1 1 1\n"
    (root / str(pid) / "task").mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "stat").write_text(line(pid, "sluiced", sum(t[1] for t in
                                                                    threads.values()),
                                               sum(t[2] for t in threads.values())))
    for tid, (name, ut, st) in threads.items():
        (root / str(pid) / "task" / str(tid)).mkdir(exist_ok=True)
        (root / str(pid) / "task" / str(tid) / "stat").write_text(line(tid, name, ut, st))


def test_read_sums_the_process_and_lists_its_threads(tmp_path: Path) -> None:
    fake_proc(tmp_path, 7, {7: ("sluiced", 10, 5), 8: ("lcore-worker-1", 100, 20)})
    r = idle.read([7], tmp_path)
    assert r is not None and r.ticks == 135
    assert r.threads == {7: ("sluiced", 15), 8: ("lcore-worker-1", 120)}
    assert idle.read([7, 99], tmp_path) is None          # a process that is gone


def test_cpu_between_is_percent_of_one_core_per_process_and_thread() -> None:
    before = idle.Reading(100.0, 1000, {1: ("main", 10), 2: ("lcore-worker-1", 990)})
    after = idle.Reading(110.0, 1040, {1: ("main", 11), 2: ("lcore-worker-1", 1020),
                                       3: ("new", 9)})
    got = idle.cpu_between(before, after, 100)
    # 40 ticks of 10 ms in 10 s: 0.4 s, 4 % of a core.
    assert got["wall_s"] == 10.0 and got["cpu_s"] == 0.4 and got["percent"] == 4.0
    assert [(t["name"], t["percent"]) for t in got["threads"]] == [
        ("lcore-worker-1", 3.0), ("new", 0.9), ("main", 0.1)]
    assert idle.percent(100, 1.0, 100) == 100.0 and idle.percent(5, 0.0, 100) == 0.0


def rec(key: str, pct: float, threads: dict[str, float], trial: int = 0) -> dict:
    return {"switch": key, "trial": trial, "percent": pct, "wall_s": 10.0,
            "threads": [{"tid": i, "name": n, "percent": p}
                        for i, (n, p) in enumerate(threads.items())]}


def test_summarize_takes_the_median_spread_and_thread_shares_per_switch() -> None:
    recs = [rec("sluice:patch+idle", 3.0, {"lcore-worker-1": 2.8, "sluiced": 0.2}),
            rec("testpmd:io", 99.0, {"lcore-worker-1": 99.0}),
            rec("sluice:patch+idle", 4.0, {"lcore-worker-1": 3.9}, 1),
            rec("sluice:patch+idle", 2.0, {"lcore-worker-1": 1.6, "sluiced": 0.4}, 2)]
    sl, tp = idle.summarize(recs)
    assert sl["switch"] == "sluice:patch+idle" and tp["switch"] == "testpmd:io"
    assert (sl["median"], sl["min"], sl["max"], sl["trials"]) == (3.0, 2.0, 4.0, 3)
    # A thread missing from a trial counts 0 % there.
    assert sl["threads"] == [("lcore-worker-1", 2.8), ("sluiced", 0.2)]
    assert idle.by_name([{"name": "handler", "percent": 0.5},
                         {"name": "handler", "percent": 0.25}]) == {"handler": 0.75}


def lat_row(key: str, p50: float, p99: float, trial: int = 0, placement: str = "near",
            load: float = 0.10) -> Row:
    """A p2p/memif latency row of KEY at LOAD of R+ (nanoseconds)."""
    switch, mode = key.split(":")
    return Row(switch=switch, mode=mode, key=key, scenario="p2p", phy="memif", vnf="",
               size=64, direction="uni", trial=trial, placement=placement,
               method="latency", rx_pps=1e6, tx_pps=1e6, loss=0.0, oversubscribed=False,
               generator_bound=False, kernel_path=False, latency_kind="loads",
               latency_load=load, asked_pps=1.2e6, rplus_pps=12e6,
               latency_ns={"p50": p50, "p99": p99, "mean": p50 + 500, "count": 1000.0})


def test_latency_table_gives_each_variant_and_what_the_idle_sleep_adds() -> None:
    rows = [lat_row(idle.IDLE_KEY, 9000, 30000), lat_row(idle.BUSY_KEY, 6000, 20000),
            lat_row(idle.IDLE_KEY, 11000, 50000, trial=1, placement="far"),
            lat_row(idle.BUSY_KEY, 1000, 1000, load=0.5)]         # another load: left out
    h, lines = report_idle.latency_table(rows)
    assert h[5:7] == ["p50 us", "p99 us"]
    assert lines[0][:2] == [idle.IDLE_KEY, "sleeps when idle"]
    assert lines[0][2:] == ["1.200", "1.000", "0.00 %", "9.0", "30.0", "9.5", "near",
                            "1"]                                   # near preferred
    assert lines[1][0] == idle.BUSY_KEY and lines[1][5:7] == ["6.0", "20.0"]
    assert lines[2][0] == "added by the idle sleep" and "met" in lines[2][1]
    assert lines[2][5:9] == ["+3.0", "+10.0", "+3.0", "near"]
    # One variant only: no difference line.
    _, lines = report_idle.latency_table(rows[:1])
    assert len(lines) == 1


def test_cpu_table_marks_the_goal_for_the_idle_sluice_only() -> None:
    recs = [rec(idle.IDLE_KEY, 6.5, {"lcore-worker-1": 6.0, "sluiced": 0.5}),
            rec("testpmd:io", 99.5, {"lcore-worker-1": 99.5, "eal-intr-thread": 0.0})]
    _, lines = report_idle.cpu_table(recs, [{"switch": "ovs-dpdk:normal", "scenario": "v2v",
                                             "reason": "not installed"}])
    assert lines[0] == [idle.IDLE_KEY, "6.50", "6.50-6.50", "1 x 10",
                        "lcore-worker-1 6.00, sluiced 0.50", "< 5 %: not met"]
    assert lines[1][0] == "testpmd:io" and lines[1][4] == "lcore-worker-1 99.50"
    assert lines[1][5] == ""
    assert lines[2][0] == "ovs-dpdk:normal" and "not installed" in lines[2][4]


def test_report_of_an_idle_run_alone_and_inside_a_run(tmp_path: Path) -> None:
    sub = tmp_path / "idle"
    sub.mkdir()
    (sub / idle.CPU_FILE).write_text(
        json.dumps(rec(idle.IDLE_KEY, 2.0, {"lcore-worker-1": 1.9})) + "\n")
    append_rows(sub / "results.jsonl", [lat_row(idle.IDLE_KEY, 9000, 30000),
                                        lat_row(idle.BUSY_KEY, 6000, 20000)])
    (sub / "manifest.json").write_text(json.dumps({"skipped": [], "kernel": "k"}))
    text = report.write(tmp_path).read_text()
    assert "## Idle CPU and idle-sleep latency" in text and "< 5 %: met" in text
    assert "added by the idle sleep" in text and "## Environment" in text
    assert "Summary" not in text                      # an idle run alone: no empty tables
    assert "Idle CPU" in (tmp_path / "report.html").read_text()
    # Inside a run: the idle sections beside the others.
    append_rows(tmp_path / "results.jsonl", [lat_row("testpmd:io", 5000, 9000)])
    text = report.write(tmp_path).read_text()
    assert "Summary" in text and "## Idle CPU and idle-sleep latency" in text
    assert report_idle.sections(tmp_path / "nothing") == []


def test_stage_settings_plan_one_alternation_then_latency_at_a_tenth(tmp_path: Path) -> None:
    base = Settings(units=(), switches=(), trials=2, duration=8, window=1, settle=0.3,
                    warmup=1, cooldown=0, switch_cpu=1, gen_cpu=0, allow_shared_cpu=False,
                    baseline="testpmd", out=tmp_path, repo=tmp_path)
    s = idle.stage_settings(base, idle.IdleSettings(latency_trials=2))
    assert s.out == tmp_path / "idle" and s.loads == (0.10,)
    (scn, sizes), = s.units
    assert (scn.label(), sizes, s.switches) == ("p2p/memif uni", (64,), (idle.IDLE_KEY,
                                                                    idle.BUSY_KEY))
    assert idle.stage_settings(base, idle.IdleSettings(latency=False)).latency == ()
