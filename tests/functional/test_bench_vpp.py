"""The vpp adapter with a real VPP: a short v2v 64 B trial through its bridge, and its
threads where the CPU-arrangement rule wants them.

VPP is not packaged for Debian 12, so these tests run only where one is installed: `vpp`
and `vppctl` on PATH, or VPP_PREFIX=DIR naming an install (DIR/bin/vpp); elsewhere (CI)
they skip and say why. docs/bench.md ('VPP') says how to build one.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import time
from pathlib import Path

import pytest
from test_bench import assert_cleaned_up, bench, rows

from conftest import REPO
from sluice.bench.scenarios import parse, topology
from sluice.bench.switches import Context
from sluice.bench.switches.vpp import ACL_PLUGIN, Vpp, find

GEN = REPO / "build" / "tools" / "gen" / "sluice-gen"


def vpp_options() -> dict[str, str]:
    """The adapter's options for the VPP this machine has (VPP_PREFIX, else PATH)."""
    prefix = os.environ.get("VPP_PREFIX", "")
    return {"vpp_prefix": prefix} if prefix else {}


def require_vpp() -> dict[str, str]:
    """The options of an installed VPP, or a skip that says why there is none."""
    options = vpp_options()
    why = Vpp.available_with(REPO, options)
    if why is not None:
        pytest.skip(f"no VPP to test: {why} (set VPP_PREFIX=DIR to name an install)")
    if not GEN.exists():
        pytest.skip(f"{GEN} is missing: run 'make build'")
    return options


def vpp_pids(exe: str) -> set[int]:
    """PIDs of running processes whose program is EXE."""
    out = set()
    for d in glob.glob("/proc/[0-9]*"):
        try:
            if os.readlink(f"{d}/exe") == os.path.realpath(exe):
                out.add(int(Path(d).name))
        except OSError:
            continue
    return out


def thread_cpu_s(pid: int, tid: int) -> float:
    fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[str, int]:
    """Thread name -> TID of PID."""
    return {Path(f"/proc/{pid}/task/{t}/comm").read_text().strip(): int(t)
            for t in os.listdir(f"/proc/{pid}/task")}


def allowed_cpus(pid: int, tid: int) -> str:
    for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return ""


def test_vpp_threads_follow_the_cpu_rule_and_stop_by_pid(tmp_path: Path) -> None:
    """Main thread on CPU0 and asleep, one worker on CPU1 busy, SIGSTOP freezes both, and
    stop() leaves no process, socket or API segment behind."""
    options = require_vpp()
    ctx = Context(work=tmp_path, tag=f"tv{os.getpid() % 100000}", switch_cpu=1, ctl_cpu=0,
                  repo=REPO, extra=options)
    sw = Vpp(ctx, "learn")
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, ctx.tag)
    try:
        sw.start(topo)
        pid = sw.pids()[0]
        assert sw.version().startswith("VPP v"), sw.version()
        names = threads(pid)
        assert "vpp_wk_0" in names, names
        worker, main = names["vpp_wk_0"], pid
        assert allowed_cpus(pid, main) == "0" and allowed_cpus(pid, worker) == "1"
        before = (thread_cpu_s(pid, main), thread_cpu_s(pid, worker))
        time.sleep(2.0)
        main_share = (thread_cpu_s(pid, main) - before[0]) / 2.0
        worker_share = (thread_cpu_s(pid, worker) - before[1]) / 2.0
        # 0.7 % measured with its 10 ms naps (11 % with 100 us ones).
        assert main_share < 0.05, f"main thread used {main_share:.0%} of CPU0"
        assert worker_share > 0.5, f"worker used only {worker_share:.0%} of CPU1"
        for link in topo.links:
            assert Path(link.path).exists()            # VPP serves the vhost-user sockets
        os.kill(pid, signal.SIGSTOP)
        frozen = thread_cpu_s(pid, worker)
        time.sleep(0.5)
        assert thread_cpu_s(pid, worker) - frozen < 0.05
        os.kill(pid, signal.SIGCONT)
    finally:
        sw.stop()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(
        f"/proc/{pid}/status").read_text()
    assert not any(Path(link.path).exists() for link in topo.links)
    assert not glob.glob(f"/dev/shm/{sw.shm_prefix}-*")
    assert not (sw.run_dir / "cli.sock").exists()


def test_v2v_64_through_vpp_bridge_and_testpmd(tmp_path: Path) -> None:
    """A short v2v 64 B run of vpp:learn beside testpmd io: VPP forwards, its row says how
    it steers, the manifest names its version, nothing of it is left afterwards."""
    options = require_vpp()
    install, _ = find(options)
    assert install is not None
    running = vpp_pids(install.vpp)
    out = tmp_path / "vpp"
    prefix = ["--vpp-prefix", options["vpp_prefix"]] if options else []
    r = bench("run", "--scenario", "v2v", "--switch", "vpp:learn,testpmd", "--sizes", "64",
              "--duration", "4", "--trials", "1", "--warmup", "0", "--out", str(out), *prefix)
    assert r.returncode == 0, r.stdout + r.stderr
    got = [x for x in rows(out) if x["key"] == "vpp:learn"]
    assert got, r.stdout + r.stderr
    for x in got:
        assert x["rx_pps"] > 0 and x["tx_pps"] > 0, x
        assert x["rx_pps"] <= x["tx_pps"] * 1.01, x
        assert not x["oversubscribed"], x
        assert "bridge domain" in x["steering"] and x["port_kind"] == "vhost-user"
    counters = list((out / "logs").glob("*vpp-counters.log"))    # VPP's own view, kept
    assert counters and "vhost-user-input" in counters[0].read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert "VPP v" in json.dumps(manifest), manifest
    assert_cleaned_up(out)
    assert vpp_pids(install.vpp) <= running             # every VPP it started is gone
    assert not glob.glob("/dev/shm/sb*vpp-*")


def test_v2v_64_through_vpp_acl_with_1000_rules(tmp_path: Path) -> None:
    """vpp:acl with a 1,000-rule ACL and 1,000 flows: every ACL is in VPP as sent, its node
    runs on the worker, and every frame passes (no rule matches the traffic)."""
    options = require_vpp()
    install, _ = find(options)
    assert install is not None
    if not any((d / ACL_PLUGIN).exists() for d in install.plugin_dirs()):
        pytest.skip(f"this VPP ({install.vpp}) has no {ACL_PLUGIN}")
    out = tmp_path / "vppacl"
    prefix = ["--vpp-prefix", options["vpp_prefix"]] if options else []
    r = bench("run", "--scenario", "v2v", "--switch", "vpp:acl", "--rules", "1000",
              "--flows", "1000", "--sizes", "64", "--duration", "3", "--trials", "1",
              "--warmup", "0", "--out", str(out), *prefix)
    assert r.returncode == 0, r.stdout + r.stderr
    got = [x for x in rows(out) if x["key"] == "vpp:acl"]
    assert got, r.stdout + r.stderr
    for x in got:
        # VPP loses 0.5-3 % here, all of it in its transmit to the sink's ring (`show
        # errors`: "tx packet drops (no available descriptors)"), none in the ACL.
        assert x["rx_pps"] > 0 and x["loss"] < 0.05, x
        assert x["rules"] == 1000 and x["flows"] == 1000, x
        assert "1000 ACL rules" in x["steering"], x
    counters = next((out / "logs").glob("*vpp-counters.log")).read_text()
    errors = counters.split("$ vppctl show errors", 1)[1].split("$ vppctl", 1)[0]
    assert "ACL permit packets" in errors and "ACL deny" not in errors, errors
    assert_cleaned_up(out)
    assert not glob.glob("/dev/shm/sb*vpp-*")
