"""sluice-gen: A/B alternation windows, never leaving a switch stopped, EAL defaults and
overrides, rate units, JSON lines and the histogram dump."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from gen_helpers import (
    assert_no_hugepage_files,
    gen_cmd,
    memif_pair,
    proc_state,
    run_gen,
    stand_ins,
)

from conftest import Daemon, stop_process, wait_for


def four_memif_ports(workdir: Path) -> list[str]:
    return [*memif_pair(workdir, "a"), *memif_pair(workdir, "b")]


def test_alternate_windows_over_memif(workdir: Path) -> None:
    """Two memif pairs in one process at 1 Mpps each: windows alternate, each counts only
    its own pair after the settle time, one stand-in is stopped at a time, the neighbour
    ratios of two equal paths are 1, and stdout is JSON lines on the monotonic clock."""
    with stand_ins() as (a, b):
        t0 = time.monotonic()
        proc = subprocess.Popen(gen_cmd([*four_memif_ports(workdir), "--alternate",
                                         f"{a.pid},{b.pid}", "--window", "0.5", "--settle",
                                         "0.1", "--duration", "3.2", "--rate", "1Mpps",
                                         "--json", "--out", str(workdir / "alt.json")]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = set()
        while proc.poll() is None:
            seen.add((proc_state(a.pid), proc_state(b.pid)))
            time.sleep(0.02)
        out, err = proc.communicate()
        t1 = time.monotonic()
        assert proc.returncode == 0, err
        assert proc_state(a.pid) != "T" and proc_state(b.pid) != "T"
    assert ("T", "T") not in seen
    assert any(s[0] == "T" and s[1] != "T" for s in seen), seen
    assert any(s[1] == "T" and s[0] != "T" for s in seen), seen

    res = json.loads((workdir / "alt.json").read_text())
    windows = res["windows"]
    assert [w["switch"] for w in windows] == ["A", "B"] * 3
    for w in windows:
        assert abs(w["counted_s"] - 0.4) < 0.02, w
        assert 0 <= w["tx_packets"] - w["rx_packets"] <= 2048, w     # at most a ring behind
        assert 0.9e6 < w["rx_pps"] < 1.01e6, w
    alt = res["alternation"]
    assert alt["pids"] == [a.pid, b.pid] and alt["a_windows"] == alt["b_windows"] == 3
    ratio = alt["ratio_ab"]
    assert ratio["n"] == 4
    assert 0.95 < ratio["q1"] <= ratio["median"] <= ratio["q3"] < 1.05, ratio
    assert windows[0]["neighbour_ratio"] is None and windows[-1]["neighbour_ratio"] is None

    lines = [json.loads(line) for line in out.splitlines()]       # every line is JSON
    assert lines[-1]["windows"] == windows                          # the summary, last
    records = [x for x in lines if "window" in x]
    assert [r["window"] for r in records] == list(range(6))
    assert [r["rx_packets"] for r in records] == [w["rx_packets"] for w in windows]
    seconds = [x for x in lines if "t" in x and "monotonic_s" in x]
    assert len(seconds) >= 3
    assert all(t0 < x["monotonic_s"] < t1 for x in seconds + records)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_generator_end_resumes_both_switches(workdir: Path, sig: int) -> None:
    """However the generator ends, SIGKILL included, no stand-in stays stopped."""
    with stand_ins() as (a, b):
        proc = subprocess.Popen(gen_cmd([*four_memif_ports(workdir), "--alternate",
                                         f"{a.pid},{b.pid}", "--window", "0.3", "--settle",
                                         "0.1", "--duration", "30", "--rate", "100k",
                                         "--out", str(workdir / "k.json")]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: proc_state(a.pid) == "T", 15)     # window 1: B's
            proc.send_signal(sig)
            proc.wait(10)
            wait_for(lambda: proc_state(a.pid) != "T" and proc_state(b.pid) != "T", 3)
        finally:
            stop_process(proc)
    if sig == signal.SIGTERM:       # a clean stop still writes its summary
        assert proc.returncode == 0
        assert json.loads((workdir / "k.json").read_text())["alternation"]["a_windows"] >= 1
    assert_no_hugepage_files()


def patched_vhost(d: Daemon, workdir: Path, tag: str) -> list[str]:
    d.call("add-switch", name="br0")
    for p in ("in", "out"):
        d.call("add-port", switch="br0", name=p,
               spec=f"vhost-user:server,path={workdir}/{tag}{p}.sock")
    d.call("patch", switch="br0", port1="in", port2="out")
    return ["--port", f"virtio-user:path={workdir}/{tag}in.sock",
            "--port", f"virtio-user:path={workdir}/{tag}out.sock"]


def test_alternate_through_two_daemons_counts_late_frames_apart(workdir: Path) -> None:
    """At full rate a switch stopped mid-stream still holds frames; when it resumes (or
    when the idle pair is drained) they arrive in a later window, sent before it began:
    counted as late, never as that window's."""
    a = Daemon(workdir, "a").start()
    b = Daemon(workdir, "b").start()
    try:
        ports = patched_vhost(a, workdir, "a") + patched_vhost(b, workdir, "b")
        assert a.proc is not None and b.proc is not None
        res, _ = run_gen(workdir, [*ports, "--alternate", f"{a.proc.pid},{b.proc.pid}",
                                   "--window", "0.5", "--settle", "0.15", "--duration", "3.2"])
        for d in (a, b):
            assert proc_state(d.proc.pid) != "T"
    finally:
        for d in (a, b):
            if d.proc is not None and d.proc.poll() is None:
                d.proc.send_signal(signal.SIGCONT)
        assert a.stop() == 0 and b.stop() == 0
    windows = res["windows"]
    assert len(windows) == 6 and all(w["rx_pps"] > 0 for w in windows)
    assert all(w["rx_packets"] <= w["tx_packets"] for w in windows), windows
    assert sum(w["late_packets"] for w in windows) > 0, windows
    assert res["alternation"]["late_packets"] == sum(w["late_packets"] for w in windows)
    ratio = res["alternation"]["ratio_ab"]
    assert ratio["n"] == 4 and ratio["q1"] <= ratio["median"] <= ratio["q3"]


def test_eal_defaults_quiet_pinned_and_overridable(workdir: Path) -> None:
    res, r = run_gen(workdir, ["--role", "tx", "--port", "null", "--duration", "0.3"])
    assert r.stderr == ""                                   # quiet by default
    assert res["lcore_cpu"] == 0 and res["idle_fraction"] < 0.05
    res, _ = run_gen(workdir, ["--role", "tx", "--port", "null", "--duration", "0.3",
                               "--", "-l", "1"])
    assert res["lcore_cpu"] == 1                            # the user's -l wins over --lcores
    res, _ = run_gen(workdir, ["--role", "tx", "--port", "null", "--duration", "0.3",
                               "--lcore", "1"])
    assert res["lcore_cpu"] == 1
    prefix = f"sgtest{workdir.name}"
    run_gen(workdir, ["--role", "tx", "--port", "null", "--duration", "0.3", "--",
                      "--file-prefix", prefix, "--legacy-mem"])
    assert not list(Path("/dev/hugepages").glob(f"{prefix}*"))


def test_two_instances_at_once(workdir: Path) -> None:
    """Each instance has a file prefix of its own: both run, neither clashes."""
    procs = [subprocess.Popen(gen_cmd(["--role", "tx", "--port", "null", "--rate", "10k",
                                       "--duration", "1", "--out", str(workdir / f"{i}.json")],
                                      cpu=i), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
             for i in (0, 1)]
    for p in procs:
        assert p.wait(30) == 0, p.stderr.read() if p.stderr else ""
    for i in (0, 1):
        res = json.loads((workdir / f"{i}.json").read_text())
        assert res["lcore_cpu"] == i and 9_000 < res["tx_packets"] < 11_000


@pytest.mark.parametrize("rate,size,pps", [
    ("1Gbps", "64", 1e9 / (8 * (64 + 20))),      # L1: preamble, delimiter and gap count
    ("1Gbps-l2", "64", 1e9 / (8 * 64)),
    ("500kpps", "64", 500e3),
    ("1.5M", "imix", 1.5e6),
    ("2Gbps", "imix", 2e9 / (8 * ((7 * 64 + 4 * 570 + 1518) / 12 + 20))),
])
def test_rate_units(workdir: Path, rate: str, size: str, pps: float) -> None:
    res, _ = run_gen(workdir, ["--role", "tx", "--port", "null", "--rate", rate, "--size", size,
                               "--duration", "0.5"])
    assert res["asked_pps"] == pytest.approx(pps, rel=1e-9)
    assert res["offered_pps"] == pytest.approx(pps, rel=0.03)


def test_histogram_json_and_idle_fraction(workdir: Path) -> None:
    hist = workdir / "h.json"
    res, _ = run_gen(workdir, [*memif_pair(workdir, "h"), "--rate", "100k", "--duration", "1",
                               "--hist-out", str(hist)])
    lat = res["latency_ns"]
    h = json.loads(hist.read_text())
    assert h["count"] == lat["count"] == res["rx_packets"] > 90_000
    assert sum(c for _, _, c in h["buckets"]) == h["count"]
    lows = [lo for lo, _, _ in h["buckets"]]
    assert lows == sorted(lows) and all(lo <= hi for lo, hi, _ in h["buckets"])
    assert h["min"] == lat["min"] and h["max"] == lat["max"]
    assert res["idle_fraction"] > 0.5          # 100 kpps leaves the loop mostly idle


@pytest.mark.parametrize("args,names", [
    (["--flows", "10x"], "--flows"),
    (["--flows", "0"], "--flows"),
    (["--cpu", "one"], "--cpu"),
    (["--size", "20"], "--size"),
    (["--size", "64-"], "--size"),
    (["--rate", "3parsecs"], "--rate"),
    (["--duration", "-1"], "--duration"),
    (["--warmup", "5", "--duration", "4"], "--duration"),
    (["--role", "sink"], "--role"),
    (["--vary", "vlan"], "--vary"),
    (["--alternate", "12"], "--alternate"),
    (["--alternate", "100,200"], "--alternate"),            # needs four txrx ports
    (["--port", "null"] * 3 + ["--alternate", "999999,999998"], "--alternate"),  # no such
    (["--window", "0.2", "--settle", "0.3"], "--settle"),
])
def test_bad_options_name_the_option(args: list[str], names: str) -> None:
    r = subprocess.run(gen_cmd(["--port", "null", *args]), capture_output=True, text=True)
    assert r.returncode == 2 and names in r.stderr, r.stderr
