"""Receive queues on many workers (docs/cores.md): a two-queue port polled by two workers,
show-rxqs, set-rxq under traffic with no frame lost or reordered, and the automatic
re-balance, which moves a queue when the load is skewed and not when it is even.

The two-queue port is a memif server (`mq_in`, queues=2) whose client is another port of
the same daemon (`mq_out`): each worker sends on a transmit queue of its own, so the
stream worker 0 forwards to mq_out arrives on mq_in's queue 0 and worker 1's on queue 1.
sluice-gen sends two streams (each over 16 flows) on two memif ports, in1 (worker 0) and
in2 (worker 1), and receives them on two memif clients with rx_queues=2 (out1 and out2
send on the transmit queue of whichever worker polls the mq_in queue they came from).
Each stream's sequence numbers are checked where it arrives: lost, duplicated, reordered.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from gen_helpers import GEN, assert_no_hugepage_files, gen_cmd

from conftest import Daemon, Rpc, assert_accounting, wait_for

MAC1, MAC2 = "02:00:00:00:0a:01", "02:00:00:00:0a:02"
RATE = "100kpps"      # per stream: room for the generator and two workers on one CPU
BUSY_RATE = "300kpps"  # per stream, for loads well above the noise


def rxqs(d: Daemon) -> dict[tuple[str, int], dict[str, Any]]:
    return {(q["port"], q["queue"]): q for q in d.call("show-rxqs")["rxqs"]}


def build_chain(d: Daemon, workdir: Path, w1: int = 1) -> None:
    """The ports and rules above; queues placed as the streams need them (mq_in's queue 1
    on worker W1)."""
    d.call("add-switch", name="f", mode="flow")
    for name in ("in1", "in2", "out1", "out2"):
        d.call("add-port", switch="f", name=name,
               spec=f"memif:server,socket={workdir / name}.sock")
    d.call("add-port", switch="f", name="mq_in",
           spec=f"memif:server,socket={workdir}/loop.sock,queues=2")
    d.call("add-port", switch="f", name="mq_out",
           spec=f"memif:client,socket={workdir}/loop.sock,queues=2,ring_size=8192")
    for rule in ("in_port=in1,actions=output:mq_out", "in_port=in2,actions=output:mq_out",
                 f"in_port=mq_in,dl_src={MAC1},actions=output:out1",
                 f"in_port=mq_in,dl_src={MAC2},actions=output:out2"):
        d.call("add-flow", switch="f", flow=rule)
    for port, q, w in (("in1", 0, 0), ("in2", 0, 1), ("mq_in", 0, 0), ("mq_in", 1, w1)):
        d.call("set-rxq", port=port, queue=q, worker=w)


def gen_args(workdir: Path, duration: float, rate: str) -> list[str]:
    # 8192-slot rings (80 ms at the rate) outlast a worker or the generator descheduled
    # on this busy two-CPU machine: a full ring would be a loss the move did not cause.
    ring = "ring_size=8192"
    ports = [f"memif:client,socket={workdir}/in1.sock,mac={MAC1},{ring}",
             f"memif:client,socket={workdir}/out1.sock,queues=2,{ring}",
             f"memif:client,socket={workdir}/in2.sock,mac={MAC2},{ring}",
             f"memif:client,socket={workdir}/out2.sock,queues=2,{ring}"]
    return [a for p in ports for a in ("--port", p)] + [
        "--dst-mac", "02:00:00:00:0b:01", "--dst-mac", "02:00:00:00:0b:02",
        "--rate", rate, "--flows", "16", "--duration", str(duration), "--warmup", "1",
        "--ring", "8192"]


def start_gen(workdir: Path, duration: float,
              rate: str = RATE) -> tuple[subprocess.Popen[str], Path]:
    out = workdir / "gen.json"
    proc = subprocess.Popen(gen_cmd([*gen_args(workdir, duration, rate), "--out", str(out)]),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, out


def finish_gen(proc: subprocess.Popen[str], out: Path) -> dict[str, Any]:
    """Stops the generator (SIGINT: it drains what is in flight for 200 ms, as at the end
    of its --duration, which is only an upper bound) and returns its summary."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        text, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, text
    assert_no_hugepage_files()
    return json.loads(out.read_text())


def wait_flowing(d: Daemon) -> None:
    """Until both mq_in queues carry packets (the generator's links are up)."""
    def flowing() -> bool:
        q = rxqs(d)
        return q[("mq_in", 0)]["packets"] > 1000 and q[("mq_in", 1)]["packets"] > 1000
    wait_for(flowing, 30)


def drops(d: Daemon) -> dict[str, dict[str, int]]:
    return {name: {k: v for k, v in p["drops"].items() if v}
            for name, p in d.port_stats("f").items()}


def assert_whole(summary: dict[str, Any], d: Daemon,
                 before_moves: dict[str, dict[str, int]]) -> None:
    """Both streams arrived whole and in order; the switch dropped nothing while queues
    moved (BEFORE_MOVES: its drops when the first move began)."""
    stats = d.port_stats("f")
    for name, p in stats.items():
        print(name, {k: p[k] for k in ("rx_packets", "tx_packets", "dropped")},
              {k: v for k, v in p["drops"].items() if v}, p.get("rx_missed"))
    print(summary["streams"], summary.get("port_stats"))
    for s in summary["streams"]:
        assert s["tx_packets"] > 0, summary["streams"]
        assert s["lost"] == 0 and s["duplicated"] == 0 and s["reordered"] == 0, s
        assert s["rx_packets"] == s["tx_packets"], s
        # (not_accepted: frames the generator's own ring refused, when the worker polling
        # it was descheduled; they never entered the switch and carry no sequence number)
    assert_accounting(stats)
    # Two workers share CPU 1 here, and when the generator starts one of them may get
    # little of it for a hundred milliseconds or so: the memif loop's ring towards its
    # mq_in queue (8192 slots) then fills, and the switch counts tx_full drops before
    # any queue moves, inside the generator's warm-up (seen in 3 runs of 23; in none
    # while queues moved). Those are counted, not lost silently; the moves must add none.
    assert drops(d) == before_moves, (before_moves, drops(d))


@pytest.fixture
def two_workers(workdir: Path) -> Daemon:
    if not GEN.exists():
        pytest.skip("sluice-gen not built")
    d = Daemon(workdir, "rq", ["--worker-cpus", "1,1"]).start()
    yield d
    assert d.stop() == 0, d.log.read_text()


def test_queues_key_refused_where_unsupported(daemon: Daemon) -> None:
    """A kind that receives on one queue refuses queues= with a clear error."""
    daemon.call("add-switch", name="s")
    with pytest.raises(Exception, match="'queues' is not supported"):
        daemon.call("add-port", switch="s", name="t", spec="null:queues=2")
    with pytest.raises(Exception, match="no queue 3"):
        daemon.call("add-port", switch="s", name="n", spec="null:")
        daemon.call("set-rxq", port="n", queue=3, worker=0)
    with pytest.raises(Exception, match="no worker 5"):
        daemon.call("set-rxq", port="n", queue=0, worker=5)
    assert daemon.call("set-rebalance")["move_gap_us"] == 1000
    with pytest.raises(Exception, match="move_gap_us must be 0 to 100000"):
        daemon.call("set-rebalance", move_gap_us=100001)
    assert daemon.call("set-rebalance", move_gap_us=500)["move_gap_us"] == 500


def test_show_and_move_queues_under_traffic(two_workers: Daemon, workdir: Path) -> None:
    d = two_workers
    build_chain(d, workdir, w1=0)
    shown = rxqs(d)
    assert shown[("mq_in", 0)]["worker"] == 0 and shown[("mq_in", 1)]["worker"] == 0
    assert [p["rx_queues"] for p in d.call("list-ports") if p["name"] == "mq_in"] == [2]
    proc, out = start_gen(workdir, 11)
    try:
        wait_flowing(d)
        time.sleep(1.5)
        shown = d.call("show-rxqs")
        queues = {(q["port"], q["queue"]): q for q in shown["rxqs"]}
        assert queues[("mq_in", 0)]["usage"] > 0 and queues[("mq_in", 1)]["usage"] > 0
        assert queues[("mq_in", 0)]["cycles_per_packet"] > 0
        assert sum(w["queues"] for w in shown["workers"]) == 8
        # Move both of mq_in's queues from worker 0 to worker 1 and back while both streams
        # run. Each move sends its stream out on the other worker's ring of out1/out2, and
        # sluice-gen reads ring 0 first: moving back puts the new frames on the ring it
        # reads first, so order there rests on the hand-over's pause for the receiver
        # (docs/cores.md, "Moving a queue"). The generator checks order across all four.
        before_moves = drops(d)
        for q, w in ((0, 1), (1, 1), (0, 0), (1, 0)):
            d.call("set-rxq", port="mq_in", queue=q, worker=w)
            assert rxqs(d)[("mq_in", q)]["worker"] == w
            time.sleep(1)
    finally:
        summary = finish_gen(proc, out)
    assert_whole(summary, d, before_moves)


def loads(d: Daemon) -> list[float]:
    return [w["usage"] for w in d.call("show-rxqs")["workers"]]


def test_auto_rebalance_moves_only_when_skewed(two_workers: Daemon, workdir: Path) -> None:
    d = two_workers
    build_chain(d, workdir)
    loaded = (("in1", 0), ("in2", 0), ("mq_in", 0), ("mq_in", 1))
    proc, out = start_gen(workdir, 40, BUSY_RATE)
    try:
        wait_flowing(d)
        time.sleep(6.5)                       # a whole window of even load
        even = loads(d)
        assert min(even) > 0, even
        # Both workers share CPU 1, and a queue's cycles count the time its worker was
        # descheduled while serving it: a load is the share of the worker's own running
        # time (docs/cores.md). Even, each worker is as busy as one worker alone would be
        # with all four queues, and both sit above a quarter of that: no worker is below the
        # threshold, so nothing moves. Skewed (all four on worker 0), worker 1 has nothing.
        threshold = max(1, round(0.25 * min(even)))
        d.call("set-rebalance", auto=True, interval=1, load_threshold=threshold)
        time.sleep(8)                         # a window and more after the change
        st = d.call("show-rxqs")["rebalance"]["stats"]
        assert st["checks"] > 0 and st["rebalances"] == 0, (even, loads(d), st)
        for port, q in loaded:
            d.call("set-rxq", port=port, queue=q, worker=0)
        try:
            wait_for(lambda: d.call("show-rxqs")["rebalance"]["stats"]["rebalances"] >= 1, 20)
        except AssertionError:
            raise AssertionError((threshold, loads(d), d.call("show-rxqs")["rebalance"],
                                  d.log.read_text()[-2000:])) from None
        moved = {k: q["worker"] for k, q in rxqs(d).items()}
        assert sorted(moved[k] for k in loaded) == [0, 0, 1, 1], moved
        st = d.call("show-rxqs")["rebalance"]["stats"]
        assert st["last_improvement"] >= 25 and st["moves"] >= 2, st
        time.sleep(1)                         # traffic through the queues as moved
    finally:
        d.call("set-rebalance", auto=False)
        summary = finish_gen(proc, out)
    # Worker 0 with all four queues may be overloaded on the shared CPU: then frames are
    # dropped, but every one is counted by the switch with its reason. Order is not
    # checked here: moving in1 or in2 changes the worker that sends its stream into the
    # memif loop, and so the mq_in queue the stream arrives on (test_rxq's first test
    # moves only the queue the order is checked across).
    stats = d.port_stats("f")
    assert_accounting(stats)
    for s in summary["streams"]:
        assert s["duplicated"] == 0, s
    # (the switch counts the warm-up too; the generator only the measured interval)
    assert sum(s["lost"] for s in summary["streams"]) <= \
        sum(p["dropped"] for p in stats.values()), (summary["streams"], stats)


def test_stats_and_sigterm_prompt_while_saturated_queues_move(workdir: Path) -> None:
    """Two saturated workers on one CPU (bursts back to back), stats read in a loop from
    three clients and a queue moved back and forth all the while: stats answers stay short
    and SIGTERM ends the daemon at once. (A stats read used to wait up to 100 ms a try for
    up to 100 tries per port and worker: the daemon once stalled over 10 s and SIGTERM
    waited behind it.)"""
    d = Daemon(workdir, "sat", ["--worker-cpus", "1,1"]).start()
    try:
        d.call("add-switch", name="s")
        for i in range(4):
            d.call("add-port", switch="s", name=f"a{i}", spec="null:rx=1")
            d.call("add-port", switch="s", name=f"b{i}", spec="null:")
            d.call("patch", switch="s", port1=f"a{i}", port2=f"b{i}")
        stop = threading.Event()
        moves = [0]

        def hammer() -> None:
            with contextlib.suppress(Exception), Rpc(d.socket) as r:
                while not stop.is_set():
                    r.call("stats", switch="s")

        def mover() -> None:
            with contextlib.suppress(Exception), Rpc(d.socket) as r:
                while not stop.is_set():
                    r.call("set-rxq", port=f"a{moves[0] % 4}", queue=0,
                           worker=(moves[0] // 4) % 2)
                    moves[0] += 1

        threads = [threading.Thread(target=f, daemon=True) for f in (hammer,) * 3 + (mover,)]
        for t in threads:
            t.start()
        time.sleep(2)
        slowest = 0.0
        for _ in range(10):
            t0 = time.monotonic()
            d.call("stats", switch="s")
            slowest = max(slowest, time.monotonic() - t0)
        assert moves[0] > 20 and slowest < 1.0, (moves[0], slowest)
        assert d.proc is not None
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(5) == 0
        assert time.monotonic() - t0 < 2, time.monotonic() - t0
        stop.set()
    finally:
        assert d.stop() == 0, d.log.read_text()[-2000:]
