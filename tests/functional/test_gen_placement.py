"""sluice-placement, the vCPU-placement monitor: sane samples on the monotonic clock, both
threads asleep between samples, well under 1 % of a CPU, a clean end on a signal, bad
options named."""

from __future__ import annotations

import contextlib
import json
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, stop_process

PLACEMENT = REPO / "build" / "tools" / "placement" / "sluice-placement"
WRAPPER = REPO / "bin" / "sluice-placement"


def samples(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def check_sample(s: dict, threshold: float = 200.0) -> None:
    assert set(s) == {"t_mono", "rtt_ns", "min_ns", "label", "cpus"}, s
    assert s["cpus"] == [0, 1]
    if s["label"] == "unknown":
        assert s["rtt_ns"] is None and s["min_ns"] is None
        return
    assert 10 < s["min_ns"] <= s["rtt_ns"] < 20_000, s
    assert s["label"] == ("near" if s["rtt_ns"] < threshold else "far"), s


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def test_two_seconds_of_samples() -> None:
    cpu0 = children_cpu_s()
    t0 = time.monotonic()
    proc = subprocess.Popen([str(PLACEMENT), "--duration", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    states = []
    while proc.poll() is None:           # both threads should be asleep nearly always
        for task in Path(f"/proc/{proc.pid}/task").glob("*/stat"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                states.append(task.read_text().rsplit(")", 1)[1].split()[0])
        time.sleep(0.013)
    out, err = proc.communicate()
    t1 = time.monotonic()
    cpu = children_cpu_s() - cpu0                    # this one child's, reaped just now
    assert proc.returncode == 0, err
    got = samples(out)
    assert 9 <= len(got) <= 10, got                 # one every 200 ms
    for s in got:
        check_sample(s)
    assert sum(s["label"] != "unknown" for s in got) >= len(got) - 2
    times = [s["t_mono"] for s in got]
    assert t0 < times[0] and times[-1] < t1          # the clock of time.monotonic()
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert all(0.15 < g < 0.3 for g in gaps), gaps
    assert "near" in err and "far" in err           # the count summary on stderr
    assert cpu < 0.01 * (t1 - t0), cpu              # under 1 % of one CPU
    assert states.count("S") >= 0.9 * len(states), states


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_runs_until_a_signal(sig: int) -> None:
    proc = subprocess.Popen([str(PLACEMENT), "--interval-ms", "50", "--round-trips", "500",
                             "--cpus", "1,0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = proc.stdout.readline()      # type: ignore[union-attr]
        time.sleep(0.3)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=5)
    finally:
        stop_process(proc)       # only if it did not end by itself
    assert proc.returncode == 0
    got = samples(first + out)
    assert len(got) >= 4
    assert all(s["cpus"] == [1, 0] for s in got)
    for s in got:
        s["cpus"] = [0, 1]
        check_sample(s)


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PLACEMENT), *args], capture_output=True, text=True, timeout=10)


def test_help_threshold_and_bad_options() -> None:
    r = subprocess.run([str(WRAPPER), "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    assert all(o in r.stdout for o in ("--duration", "--cpus", "--interval-ms",
                                       "--round-trips", "--threshold-ns", "t_mono"))
    r = run(["--duration", "0.5", "--threshold-ns", "1"])      # everything is far
    assert r.returncode == 0
    assert {s["label"] for s in samples(r.stdout)} <= {"far", "unknown"}
    for args, opt in ((["--cpus", "0,0"], "--cpus"), (["--cpus", "0"], "--cpus"),
                      (["--cpus", "0,1000"], "--cpus"), (["--interval-ms", "5"], "--interval-ms"),
                      (["--round-trips", "1001"], "--round-trips"),
                      (["--duration", "soon"], "--duration"),
                      (["--threshold-ns", "-3"], "--threshold-ns")):
        r = run(args)
        assert r.returncode == 2 and opt in r.stderr, (args, r.stderr)
    r = run(["extra"])
    assert r.returncode == 2 and "extra" in r.stderr
