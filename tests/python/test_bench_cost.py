"""Cost per packet (cost.py): the switches' own counters parsed, the sampler's readings
placed inside the stretches a switch runs, and per-window figures and ratios from them."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from sluice.bench import cost
from sluice.bench.stats import Sample
from sluice.bench.switches.ovsdb import parse_pmd_perf
from sluice.bench.switches.testpmd import parse_fwd_stats
from sluice.bench.switches.vpp import parse_show_runtime

# testpmd 22.11's answer to `show fwd stats all` with --record-core-cycles (two ports).
FWD_STATS = """testpmd> # sluice-bench question 3.
testpmd> show fwd stats all

  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 45708256       RX-dropped: 0             RX-total: 45708256
  TX-packets: 45708224       TX-dropped: 0             TX-total: 45708224
  ----------------------------------------------------------------------------

  ---------------------- Forward statistics for port 1  ----------------------
  RX-packets: 45708256       RX-dropped: 0             RX-total: 45708256
  TX-packets: 45708256       TX-dropped: 0             TX-total: 45708256
  ----------------------------------------------------------------------------

  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
  RX-packets: 91416512       RX-dropped: 0             RX-total: 91416512
  TX-packets: 91416480       TX-dropped: 0             TX-total: 91416480
  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++

  CPU cycles/packet=78.70 (total cycles=7194733700 / total io packets=91416512) at 2450 MHz Clock
testpmd> """

# OVS 3.1's dpif-netdev/pmd-perf-show (its format strings), one PMD thread.
PMD_PERF_31 = """Time: 04:27:01.123
Measurement duration: 0.612 s

pmd thread numa_id 0 core_id 1:

  Iterations:              1234567  (0.50 us/it)
  - Used TSC cycles:    1496000000  ( 99.9 % of total cycles)
  - idle iterations:        234567  ( 20.0 % of used cycles)
  - busy iterations:       1000000  ( 80.0 % of used cycles)
  Rx packets:              9000000  (14706 Kpps, 133 cycles/pkt)
  Datapath passes:         9000000  (1.00 passes/pkt)
  - PHWOL hits:                  0  (  0.0 %)
  - MFEX Opt hits:               0  (  0.0 %)
  - Simple Match hits:     9000000  (100.0 %)
  - EMC hits:                    0  (  0.0 %)
  - SMC hits:                    0  (  0.0 %)
  - Megaflow hits:               0  (  0.0 %, 0.00 subtbl lookups/hit)
  - Upcalls:                     0  (  0.0 %, 0.0 us/upcall)
  - Lost upcalls:                0  (  0.0 %)
  Tx packets:              9000000  (14706 Kpps)
  Tx batches:               300000  (30.00 pkts/batch)
"""

# A later OVS's format, two PMDs, one of them idle.
PMD_PERF_NEW = """pmd thread numa_id 0 core_id 1:

  Cycles:            2000000000  (2.45 GHz)
  Iterations:           1000000  (0.82 us/it)
  - idle:                400000  ( 25.0 % cycles)
  - busy:                600000  ( 75.0 % cycles)
  Rx packets:          10000000  (12000 Kpps, 150 cycles/pkt)

pmd thread numa_id 0 core_id 2:

  Cycles:            2000000000  (2.45 GHz)
  Iterations:           1000000  (0.82 us/it)
  - idle:               1000000  (100.0 % cycles)
  - busy:                     0  (  0.0 % cycles)
  Rx packets:                 0
  Tx packets:                 0

"""

# VPP's show runtime with one worker (vlib/node_cli.c's format, columns narrowed): the main
# thread's nodes are not counted, the worker's are: clocks per vector where a node had
# vectors, else per call.
SHOW_RUNTIME = """Thread 0 vpp_main (lcore 0)
Time 10.0, 10 sec internal node vector rate 0.00 loops/sec 99.80
  vector rates in 0.0000e0, out 0.0000e0, drop 0.0000e0, punt 0.0000e0
  Name  State  Calls  Vectors  Suspends  Clocks  Vectors/Call
unix-epoll-input  polling  998  0  0  5.00e4  0.00
---------------
Thread 1 vpp_wk_0 (lcore 1)
Time 10.0, 10 sec internal node vector rate 200.00 loops/sec 500000.00
  vector rates in 1.0000e7, out 1.0000e7, drop 0.0000e0, punt 0.0000e0
  Name  State  Calls  Vectors  Suspends  Clocks  Vectors/Call
VirtualEthernet0/0/1-output  active  500000  100000000  0  1.00e1  200.00
VirtualEthernet0/0/1-tx  active  500000  100000000  0  4.00e1  200.00
l2-input  active  500000  100000000  0  5.00e0  200.00
vhost-user-input  polling  5000000  100000000  0  6.00e1  20.00
"""


def test_testpmd_fwd_stats_give_busy_cycles_and_packets() -> None:
    assert parse_fwd_stats(FWD_STATS) == (7194733700.0, 91416512)
    # A later release says busy cycles; before any packet there is no cycles line.
    assert parse_fwd_stats(FWD_STATS.replace("total cycles=", "busy cycles=")) == \
        (7194733700.0, 91416512)
    empty = FWD_STATS.replace("45708256", "0").replace("45708224", "0") \
        .replace("91416512", "0").replace("91416480", "0")
    empty = empty[:empty.index("  CPU cycles")] + "testpmd> "
    assert parse_fwd_stats(empty) == (0.0, 0)


def test_testpmd_answer_is_complete_only_with_its_prompt() -> None:
    assert parse_fwd_stats(FWD_STATS[:FWD_STATS.rindex("testpmd> ")]) is None
    assert parse_fwd_stats("testpmd> show fwd stats all\n") is None


def test_ovs_pmd_perf_show_busy_cycles_from_the_busy_share() -> None:
    busy, pkts = parse_pmd_perf(PMD_PERF_31) or (0.0, 0)
    assert pkts == 9000000 and busy == pytest.approx(1496000000 * 0.8)
    busy, pkts = parse_pmd_perf(PMD_PERF_NEW) or (0.0, 0)
    assert pkts == 10000000 and busy == pytest.approx(1.5e9)
    assert parse_pmd_perf("") is None


def test_ovs_pmd_perf_show_without_a_share_uses_its_cycles_per_packet() -> None:
    text = PMD_PERF_31.replace("  - busy iterations:       1000000  ( 80.0 % of used cycles)\n",
                               "")
    assert parse_pmd_perf(text) == (133.0 * 9000000, 9000000)


def test_vpp_show_runtime_counts_the_workers_nodes_and_input_vectors() -> None:
    clocks, pkts = parse_show_runtime(SHOW_RUNTIME) or (0.0, 0)
    assert pkts == 100000000
    assert clocks == pytest.approx((10 + 40 + 5 + 60) * 1e8)
    assert parse_show_runtime("nothing") is None


def test_allowed_cpus_of_a_status_text() -> None:
    assert cost.allowed_cpus("Name:\tx\nCpus_allowed_list:\t0-2,5\n") == {0, 1, 2, 5}
    assert cost.allowed_cpus("Cpus_allowed_list:\t1\n") == {1}


def test_cpu_is_interpolated_only_between_close_samples() -> None:
    cpu = [(10.00, 0), (10.01, 10_000_000), (10.02, 20_000_000), (10.50, 50_000_000)]
    assert cost.cpu_ns_at(cpu, 10.005) == pytest.approx(5e6)
    assert cost.cpu_ns_between(cpu, 10.0, 10.02) == pytest.approx(2e7)
    assert cost.cpu_ns_at(cpu, 10.3) is None           # a 0.48 s gap: a stop may hide in it
    assert cost.cpu_ns_at(cpu, 9.0) is None


def windows_and_traces(a_cpp: float, b_cpp: float, n: int = 8, window: float = 1.0,
                       settle: float = 0.3, pps: float = 1e7, tsc: float = 2e9
                       ) -> tuple[list[cost.WindowRecord], dict[str, cost.Trace]]:
    """N alternating windows A, B, A, ...: each switch's CPU grows only in its own windows,
    at A_CPP and B_CPP cycles per packet (all of its CPU is its cost), with one own
    reading inside each window's counted part."""
    wins: list[cost.WindowRecord] = []
    traces = {"A": cost.Trace(threads=["w"], source="test"),
              "B": cost.Trace(threads=["w"], source="test")}
    used = {"A": 0.0, "B": 0.0}
    for i in range(n):
        side, start = "AB"[i % 2], 100.0 + i * window
        counted = window - settle
        wins.append((i, side, start, counted, pps * counted, "near"))
        per_s = (a_cpp if side == "A" else b_cpp) * pps / tsc * 1e9     # ns of CPU per s
        for other in "AB":
            for k in range(0, 101):
                t = start + k * window / 100
                if other == side and k > 0:
                    used[side] += per_s * window / 100
                traces[other].cpu.append((t, int(used[other])))
        own = cost.Own((a_cpp if side == "A" else b_cpp) * pps * 0.5, int(pps * 0.5))
        traces[side].intervals.append(cost.Interval(start + settle + 0.05, start + 0.9, own))
    return wins, traces


def test_alternating_windows_give_each_switch_its_cost_and_the_ratio() -> None:
    wins, traces = windows_and_traces(100.0, 200.0)
    got = cost.alternating(wins, traces, 0.3, 1.0, 2e9)
    a, b = got[("A", "near")], got[("B", "near")]
    assert a["own_cpp"] == [100.0] * 4 and b["own_cpp"] == [200.0] * 4
    assert a["proc_cpp"] == pytest.approx([100.0] * 4, rel=0.02)
    assert a["proc_nspp"] == pytest.approx([50.0] * 4, rel=0.02)
    # Windows 1..6 have neighbours of the other switch: A/B = 0.5 from every one of them.
    assert a["own_ratio"] == pytest.approx([0.5] * 6) and b["own_ratio"] == pytest.approx([2.0] * 6)
    assert a["proc_ratio"] == pytest.approx([0.5] * 6, rel=0.02)
    assert a["tsc_hz"] == 2e9 and a["own_source"] == "test"


def test_an_own_reading_across_a_stop_counts_for_no_window() -> None:
    wins, traces = windows_and_traces(100.0, 200.0)
    # A reading of A from its window 2 into window 3 (B's: A was stopped).
    traces["A"].intervals = [cost.Interval(102.5, 103.5, cost.Own(1e12, 1))]
    got = cost.alternating(wins, traces, 0.3, 1.0, 2e9)
    assert got[("A", "near")]["own_cpp"] == []
    assert got[("A", "near")]["proc_cpp"]           # /proc needs no reading of its own


def test_window_ratios_need_both_neighbours() -> None:
    c = cost.SpanCost
    costs = [c("A", "near", 100.0, 1.0, 1.0), c("B", "near", None, 2.0, 2.0),
             c("A", "near", 100.0, 1.0, 1.0), c("B", "far", 200.0, 2.0, 2.0),
             c("A", "far", 100.0, 1.0, 1.0)]
    own = cost.neighbour_ratios(costs, "own_cpp")
    assert dict(own) == {"mixed": [0.5]}        # only window 3 has two neighbours with figures
    proc = cost.neighbour_ratios(costs, "proc_nspp")
    assert proc["near"] == [0.5] and proc["mixed"] == [0.5, 0.5]


def test_interleaved_seconds_and_readings_are_filed_by_label() -> None:
    tr = cost.Trace(threads=["w"], source="test")
    tr.cpu = [(t / 100, int(t / 100 * 1e9)) for t in range(0, 1001)]   # a busy poller
    samples = [Sample(float(t), float(t), 1e7, 1e7) for t in range(2, 9)]
    labels = ["near"] * 4 + ["far"] * 3
    tr.intervals = [cost.Interval(1.2, 1.7, cost.Own(5e8, 5_000_000)),    # within near
                    cost.Interval(4.8, 5.3, cost.Own(9e9, 1)),             # across both
                    cost.Interval(6.1, 6.6, cost.Own(1e9, 5_000_000))]     # within far
    got = cost.interleaved(samples, labels, tr, 2e9)
    assert got["near"]["own_cpp"] == [100.0] and got["far"]["own_cpp"] == [200.0]
    assert got["near"]["proc_nspp"] == pytest.approx([100.0] * 4)
    assert got["near"]["proc_cpp"] == pytest.approx([200.0] * 4)
    assert got["near"]["own_ratio"] == []


class FakeMeter:
    """Counts like a switch that received 1000 packets a second at 100 cycles each."""

    source = "fake"

    def begin(self) -> object | None:
        return time.monotonic()

    def end(self, token: object) -> cost.Own | None:
        assert isinstance(token, float)
        dt = time.monotonic() - token
        return cost.Own(dt * 1e5, int(dt * 1000))


class FakeSwitch:
    def __init__(self, pid: int) -> None:
        self.pid = pid

    def pids(self) -> list[int]:
        return [self.pid]

    def cost_meter(self) -> FakeMeter:
        return FakeMeter()


def test_sampler_reads_only_inside_the_stretches_a_process_runs() -> None:
    """A real process pinned to one CPU, stopped and continued in 0.6 s windows as
    sluice-gen would: every own reading lies inside one running stretch, after the
    settling time, and the thread pinned to that CPU is the one whose CPU time is read."""
    cpu = os.sched_getaffinity(0)
    pin = min(cpu)
    proc = subprocess.Popen(["taskset", "-c", str(pin), "sleep", "30"])
    try:
        time.sleep(0.2)
        stretches: list[tuple[float, float]] = []
        stop = threading.Event()

        def alternate() -> None:
            while not stop.is_set():
                t0 = time.monotonic()
                time.sleep(0.6)
                stretches.append((t0, time.monotonic()))
                os.kill(proc.pid, signal.SIGSTOP)
                time.sleep(0.6)
                os.kill(proc.pid, signal.SIGCONT)

        sampler = cost.Sampler({"x": FakeSwitch(proc.pid)}, pin,  # type: ignore[dict-item]
                               alternating=True,
                               settle_s=0.15, window_s=0.6)
        with sampler:
            t = threading.Thread(target=alternate)
            t.start()
            time.sleep(3.9)
            stop.set()
            t.join()
        tr = sampler.traces["x"]
        assert tr.threads == ["sleep"] and tr.source == "fake" and len(tr.cpu) > 100
        assert len(tr.intervals) >= 2
        for iv in tr.intervals:
            assert any(a + 0.15 <= iv.t0 and iv.t1 <= b for a, b in stretches), (iv, stretches)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


def test_pinned_threads_finds_a_process_pinned_to_one_cpu(tmp_path: Path) -> None:
    pin = min(os.sched_getaffinity(0))
    proc = subprocess.Popen(["taskset", "-c", str(pin), "sleep", "10"])
    try:
        time.sleep(0.2)
        found = cost.pinned_threads([proc.pid], pin)
        assert [(p, n) for p, _, n in found] == [(proc.pid, "sleep")]
        assert cost.thread_cpu_ns(proc.pid, found[0][1]) is not None
        assert not cost.stopped(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(0.1)
        assert cost.stopped(proc.pid)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()
