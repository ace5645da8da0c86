"""sluice-bench end to end: real switches, real sluice-gen, a real report in Chromium.

Each test runs the harness as a user would (bin/sluice-bench) into its own directory; the
harness stops its processes by PID and removes its sockets, namespaces and hugepage files,
which the tests check afterwards.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

BENCH = REPO / "bin" / "sluice-bench"
GEN = REPO / "build" / "tools" / "gen" / "sluice-gen"


def bench(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Runs bin/sluice-bench ARGS to the end, in a session of its own: if it overruns
    TIMEOUT, SIGTERM lets it stop its switches, and whatever is left of its process group
    is killed (by group id: only the harness and what it started are in it)."""
    proc = subprocess.Popen([str(BENCH), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        for f in glob.glob(f"/dev/hugepages/sb{proc.pid % 100000}*map_*"):
            os.unlink(f)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def assert_cleaned_up(out: Path) -> None:
    """No process, namespace or hugepage file of the run is left."""
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["cpu_model"] and manifest["kernel"] and manifest["git"]["commit"]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "-gen" not in left and "-sw " not in left, left
    assert not glob.glob("/dev/hugepages/sb*map_*")


def test_smoke_v2v_sluice_and_testpmd(tmp_path: Path) -> None:
    """v2v at 64 B, 2 s runs: both switches forward, rx <= tx, a report is written."""
    out = tmp_path / "smoke"
    r = bench("run", "--scenario", "v2v", "--switch", "sluice:patch,testpmd", "--sizes", "64",
              "--duration", "4", "--trials", "2", "--warmup", "0", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert {x["key"] for x in got} == {"sluice:patch", "testpmd:io"}
    for x in got:
        assert x["rx_pps"] > 0 and x["tx_pps"] > 0, x
        assert x["rx_pps"] <= x["tx_pps"] * 1.01, x          # late frames aside
        assert x["method"] == "alternating" and not x["oversubscribed"]
    assert (out / "report.md").exists() and (out / "report.html").exists()
    assert "sluice:patch" in (out / "report.md").read_text()
    assert_cleaned_up(out)


def test_testpmd_against_itself_gives_a_ratio_near_one(tmp_path: Path) -> None:
    """The method's own check: one switch alternated with a copy of itself."""
    out = tmp_path / "self"
    r = bench("compare", "testpmd", "testpmd", "--scenario", "v2v", "--sizes", "64",
              "--duration", "10", "--trials", "4", "--out", str(out), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    # A row per trial and placement label (near/far/mixed, when the monitor runs).
    measured = [x for x in rows(out) if x["key"] == "testpmd:io" and
                x["ratio_median"] is not None]
    assert len({x["trial"] for x in measured}) == 4, rows(out)   # two in each generator order
    ratios = [x["ratio_median"] for x in measured]
    # Two instances of one switch differ by up to a tenth, steadily over a run and in both
    # generator orders, one instance or the other (docs/bench.md, "Validated": 1.10 and
    # 0.96 in two runs of this test's command on one machine); a defect of the method (a
    # window counted for the wrong switch, a stopped switch's seconds) is not that subtle.
    assert 0.85 <= statistics.median(ratios) <= 1.18, ratios
    # Its cost per packet against itself, window by window, near 1. Loose bounds for a
    # shared machine (docs/bench.md has the validation measured under the lock): a host
    # that preempts a forwarding thread inside a busy pass adds the time to its own
    # (TSC) figure, so that one scatters most; a reading across a stop would be off by
    # far more.
    for fig, (lo, hi) in (("proc_ratio", (0.8, 1.25)), ("own_ratio", (0.67, 1.5))):
        pooled = [v for x in measured for v in x["cost"].get(fig, [])]
        assert len(pooled) >= 5 and lo <= statistics.median(pooled) <= hi, (fig, pooled)
    assert_cleaned_up(out)


def test_cpu_arrangement_is_refused_without_allow_shared_cpu(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    r = bench("run", "--scenario", "v2v", "--switch", "testpmd", "--sizes", "64",
              "--duration", "2", "--trials", "1", "--gen-cpu", "1", "--switch-cpu", "1",
              "--out", str(out), "--no-report")
    assert r.returncode == 2 and "busy-poll on the same CPU" in r.stderr, r.stderr


def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    """The report of a short real alternating run opens in Chromium with the verdict first:
    its table and its figure are in the page Chromium built, and the screenshot is not
    blank. Every row carries both cost figures of its switch."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed: scripts/setup.sh installs it")
    out = tmp_path / "html"
    # Without a placement monitor every window is 'unlabelled': one placement, so the
    # windows have neighbours to be compared with however the vCPUs move.
    r = bench("run", "--scenario", "v2v", "--switch", "sluice:patch,testpmd", "--sizes", "64",
              "--duration", "6", "--trials", "1", "--placement-monitor", "/nonexistent",
              "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    for key in ("sluice:patch", "testpmd:io"):
        mine = [x["cost"] for x in rows(out) if x["key"] == key]
        assert any(c.get("own_cpp") for c in mine), mine
        assert any(c.get("proc_cpp") for c in mine), mine
        assert all(c["proc_threads"] == ["rte-worker-1"] for c in mine if c), mine
    page = (out / "report.html").as_uri()
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          page], capture_output=True, text=True, timeout=60).stdout
    verdict = dom.index('<h2 id="verdict">')
    section = dom[verdict:dom.index("<h2", verdict + 1)]
    table = section[section.index("<table>"):section.index("</table>")]
    assert "sluice:patch" in table and "testpmd:io" in table and "unlabelled" in table
    plot = dom.index('<h2 id="verdict-the-ratios">')
    section = dom[plot:dom.index("<h2", plot + 1)]
    assert '<figure id="verdict-the-ratios-figure"><svg' in section and "<path" in section
    assert verdict < plot < dom.index('<h2 id="method">')
    shot = tmp_path / "shot.png"
    c = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        f"--screenshot={shot}", "--window-size=1200,1200", page],
                       capture_output=True, text=True, timeout=60)
    assert shot.exists(), c.stderr
    import matplotlib.image
    pixels = matplotlib.image.imread(str(shot))[:, :, :3]
    inked = (pixels.mean(axis=2) < 0.9).mean()        # share of pixels that are not white
    assert 0.02 < inked < 0.9 and pixels.std() > 0.1, (inked, pixels.std())
    assert (out / "figures" / "tput-v2v.svg").exists()


def test_loopback_1_inline_vnf_keeps_a_tenth_of_v2v(tmp_path: Path) -> None:
    """loopback-1 with the VNF inside sluice-gen's loop: at least a tenth of the same
    switch's v2v rate (a scheduler-bound arrangement gets about a six-hundredth)."""
    help_text = subprocess.run([str(GEN), "--help"], capture_output=True, text=True).stdout
    if "--vnf-in" not in help_text:
        pytest.skip("sluice-gen has no --vnf-in yet (inline VNFs, branch gen-vnf)")
    out = tmp_path / "loop"
    r = bench("run", "--scenario", "v2v,loopback-1", "--switch", "testpmd", "--sizes", "64",
              "--duration", "3", "--trials", "1", "--out", str(out), "--no-report")
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    v2v = max(x["rx_pps"] for x in got if x["scenario"] == "v2v")
    loop = max(x["rx_pps"] for x in got if x["scenario"] == "loopback-1")
    assert loop >= v2v / 10, (loop, v2v)
    assert all(x["vnf"] == "inline" for x in got if x["scenario"] == "loopback-1")


def test_latency_at_loads_and_the_v2v_round_trip_at_1_mpps(tmp_path: Path) -> None:
    """--latency loads,fixed:1Mpps: three p2p latency trials at rising rates below R+, and
    the four-port v2v round trip at about 1 Mpps, each with a kept histogram."""
    out = tmp_path / "lat"
    # One counted second a trial (after a warm-up second) is all the checks need.
    r = bench("run", "--scenario", "p2p,v2v", "--switch", "sluice:patch", "--sizes", "64",
              "--duration", "2", "--warmup", "1", "--trials", "1", "--latency",
              "loads,fixed:1Mpps", "--latency-duration", "2", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    lat = [x for x in rows(out) if x["method"] == "latency"]
    loads = sorted((x for x in lat if x["latency_kind"] == "loads"),
                   key=lambda x: x["latency_load"])
    assert [x["latency_load"] for x in loads] == [0.1, 0.5, 0.99], lat
    assert loads[0]["asked_pps"] < loads[1]["asked_pps"] < loads[2]["asked_pps"]
    assert loads[2]["asked_pps"] <= loads[2]["rplus_pps"]
    fixed = [x for x in lat if x["latency_kind"] == "fixed"]
    assert len(fixed) == 1 and fixed[0]["scenario"] == "v2v", lat
    assert 0.8e6 <= fixed[0]["rx_pps"] <= 1.05e6, fixed
    for x in lat:
        hist = json.loads((out / x["hist"]).read_text())
        assert hist["count"] > 0 and hist["count"] == x["latency_ns"]["count"], x
        assert 0 < x["latency_ns"]["p50"] <= x["latency_ns"]["p99"], x
    md = (out / "report.md").read_text()
    assert "Latency at 0.10, 0.50 and 0.99 of R+" in md and "v2v round trip" in md
    assert (out / "figures" / "latency-cdf.svg").exists()
    assert_cleaned_up(out)


def test_echo_gives_a_mean_rtt_per_burst_size(tmp_path: Path) -> None:
    """--latency echo: a ping client and a reflector on the two v2v ports, 1000 pps in
    bursts of 4 and 32; every frame comes back and has a round-trip time."""
    out = tmp_path / "echo"
    # The throughput trial before the echo test: one counted second (nothing checks it);
    # the echo trials keep two (2000 frames at 1000 pps, of which 1000 are checked).
    r = bench("run", "--scenario", "v2v", "--switch", "sluice:patch", "--sizes", "64",
              "--duration", "2", "--warmup", "1", "--trials", "1", "--latency", "echo",
              "--echo-bursts", "4,32", "--latency-duration", "3", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    echo = {x["burst"]: x for x in rows(out) if x["latency_kind"] == "echo"}
    assert sorted(echo) == [4, 32], rows(out)
    for x in echo.values():
        assert x["latency_ns"]["count"] >= 1000 and x["latency_ns"]["mean"] > 0, x
        assert x["loss"] == 0.0, x
    assert "echo test" in (out / "report.md").read_text()
    assert_cleaned_up(out)


def test_ndr_pdr_search_over_memif(tmp_path: Path) -> None:
    """sluice-bench ndr: MLRsearch over open-loop trials through sluiced, deep generator
    rings, one placement per result; up to 2 Mpps, which this path carries (its R+ is
    ten times that), so both bounds are found and neither is the generator's."""
    pytest.importorskip("MLRsearch")
    out = tmp_path / "ndr"
    r = bench("ndr", "--scenario", "p2p", "--phy", "memif", "--switch", "sluice:patch",
              "--sizes", "64", "--max-rate", "2Mpps", "--trial-seconds", "1",
              "--duration-sum", "2", "--width", "0.05", "--search-budget", "90",
              "--out", str(out), timeout=200)
    assert r.returncode == 0, r.stdout + r.stderr
    found = {x["search_goal"]: x for x in rows(out)}
    assert sorted(found) == ["ndr", "pdr"], rows(out)
    for x in found.values():
        assert x["method"] == "search" and x["gen_ring"] == 16384, x
        assert x["search_trials"] >= 1 and x["placement"] in ("near", "far", "unlabelled")
        assert 0 < x["rx_pps"] <= 2.05e6 and not x["generator_bound"], x
        assert x["search_lower_pps"] <= x["rx_pps"] <= (x["search_upper_pps"] or 2.05e6), x
    assert found["ndr"]["rx_pps"] <= found["pdr"]["rx_pps"]
    assert "NDR and PDR (MLRsearch)" in (out / "report.md").read_text()
    assert_cleaned_up(out)


def test_jumbo_size_runs_where_a_switch_takes_it(tmp_path: Path) -> None:
    """A 9000 B size (bench-full's) is planned for switches whose adapter carries jumbo frames
    over the scenario's ports (sluice and testpmd over vhost-user) and skipped with a note
    for the rest (memif, veth, peers without a jumbo set-up), 64 B staying as it was;
    sluiced's ports get mtu=9000 in such a run."""
    from sluice.bench.switches.base import Context, Link
    from sluice.bench.switches.sluice import Sluice

    r = bench("run", "--dry-run", "--scenario", "v2v,p2p", "--phy", "memif",
              "--switch", "sluice:patch,testpmd,ovs-dpdk:normal", "--sizes", "64,9000",
              "--trials", "1", "--duration", "2", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    v2v, p2p = r.stdout.split("\np2p/memif uni:")
    assert "9000 B trial 0 alternating: sluice:patch vs testpmd:io" in v2v
    assert "9000 B trial 0 alternating: ovs-dpdk" not in v2v
    assert "9000 B" not in p2p and "64 B trial 0 alternating: sluice:patch" in p2p
    # OVS-DPDK is a peer of `setup.sh --peers`, not of `make test`: where it is missing the
    # plan skips it whole, with that reason, and 9000 B for it is never planned either.
    from sluice.bench.switches import ovsdb
    from sluice.bench.switches.ovs_dpdk import VSWITCHD
    if ovsdb.missing(VSWITCHD):
        assert "skipped ovs-dpdk:normal in v2v uni: OVS-DPDK is not installed" in r.stdout
    else:
        assert "64 B trial 0 alternating: ovs-dpdk:normal vs testpmd:io" in v2v
        assert "skipped ovs-dpdk:normal in v2v uni: 9000 B frames:" in r.stdout
    assert "skipped sluice:patch in p2p/memif uni: 9000 B frames: DPDK 22.11's memif" \
        in r.stdout
    r = bench("sockets", "--sizes", "9000", "--dry-run")
    assert r.returncode == 2 and "64..1518" in r.stderr

    ctx = Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=REPO,
                  extra={"mtu": "9000"})
    spec = Sluice(ctx, "patch")._spec(Link("a", "vhost", path="/x.sock"), "af_xdp")
    assert spec == "vhost-user:server,path=/x.sock,mtu=9000"
